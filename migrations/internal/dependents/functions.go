package dependents

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// functionsCheck refuses over function and procedure bodies stored as text
// (plpgsql, SQL string bodies, any other procedural language) that name the
// key column: PostgreSQL never rewrites them, so after the rename they fail
// when they run. A trigger function on a queue table fails every INSERT or
// UPDATE that fires it; any other function fails when the application
// calls it, and is refused when its body also names a queue table or its
// signature takes or returns a queue table's row type (a body that names
// the column but no queue table is another table's business).
// SQL-standard BEGIN ATOMIC bodies are parsed and carried (atomic.go).
//
// The names are found by reading the body's tokens (body.go), a heuristic:
// a function the operator has checked can say so in its comment, with a
// reason (COMMENT ON FUNCTION ... IS 'migrate-unique:ignore reads
// other_table.unique_key'), and is then only noted.
var functionsCheck = Check{Kind: "functions", Run: func(ctx context.Context, q Querier, t Target) ([]Finding, error) {
	if t.Rename == "" {
		return nil, nil
	}
	// Text bodies only: a SQL-standard body (prosqlbody, from 14 on) is
	// parsed and carried (atomic.go).
	textBody, atomic := "true", false
	if v, err := serverVersion(ctx, q); err != nil {
		return nil, err
	} else if v >= 140000 {
		textBody, atomic = "p.prosqlbody IS NULL", true
	}
	return query(ctx, q, t, `WITH `+queueColumns+`,
trig AS (
    SELECT tg.tgfoid AS fn, array_agg(format('trigger %s on %s.%s', `+quoted("tg.tgname")+`, `+quoted("n.nspname")+`, `+quoted("c.relname")+`) ORDER BY tg.tgname) AS triggers
    FROM pg_trigger tg JOIN queue ON queue.rel = tg.tgrelid
    JOIN pg_class c ON c.oid = tg.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE NOT tg.tgisinternal AND tg.tgparentid = 0 -- a partition's clone is its parent's trigger
    GROUP BY tg.tgfoid)
SELECT n.nspname::text, p.proname::text, pg_get_function_identity_arguments(p.oid), p.prokind::text, p.prosrc,
       coalesce(trig.triggers, '{}'), coalesce(obj_description(p.oid, 'pg_proc'), ''),
       ARRAY(SELECT format('%s.%s', `+quoted("qn.nspname")+`, `+quoted("qc.relname")+`) FROM queue JOIN pg_class qc ON qc.oid = queue.rel
             JOIN pg_namespace qn ON qn.oid = qc.relnamespace
             WHERE qc.reltype = p.prorettype OR qc.reltype = ANY (p.proargtypes::oid[]) OR qc.reltype = ANY (coalesce(p.proallargtypes, '{}'))
             ORDER BY 1)
FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace
JOIN pg_language lang ON lang.oid = p.prolang
LEFT JOIN trig ON trig.fn = p.oid
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND lang.lanname NOT IN ('internal', 'c')
  AND `+textBody+`
  AND strpos(lower(p.prosrc), $3) > 0
  AND NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = 'pg_proc'::regclass AND e.objid = p.oid AND e.deptype = 'e')
ORDER BY 1, 2, 3`, func(rows pgx.Rows) (Finding, error) {
		var schema, name, args, kind, src, comment string
		var triggers, rowTypes []string
		if err := rows.Scan(&schema, &name, &args, &kind, &src, &triggers, &comment, &rowTypes); err != nil {
			return Finding{}, err
		}
		if args == "" && slices.Contains(t.OwnFunctions, schema+"."+name) {
			return Finding{}, nil // the tool's own, carried by its steps
		}
		f := bodyFinding(t, schema, name, args, kind, src, triggers, rowTypes, atomic)
		if m := ignoreRE.FindStringSubmatch(comment); m != nil && f.Outcome == Refused {
			f.Outcome = Ignored
			f.Message = fmt.Sprintf("%s %s names %s in its body, but its comment says %q: not refused; it is yours to make it work after %s renames the column to %s",
				f.Kind, f.Object, t.Column, safe(m[0]), t.direction(), t.Rename)
		}
		return f, nil
	})
}}

// ignoreRE is the directive, in a function's comment (COMMENT ON FUNCTION),
// that turns a refusal over its body into a note: it needs a reason.
var ignoreRE = regexp.MustCompile(`migrate-unique:ignore[ \t]+[^ \t\n][^\n]*`)

// bodyFinding decides over one function whose body mentions the column.
// rowTypes lists the queue tables whose row type it takes or returns;
// atomic says the server has SQL-standard bodies (14 and later), the
// rewrite the advice offers first.
func bodyFinding(t Target, schema, name, args, kind, src string, triggers, rowTypes []string, atomic bool) Finding {
	ts := tokens(src)
	what := map[string]string{"p": "procedure"}[kind]
	if what == "" {
		what = "function"
	}
	object := fmt.Sprintf("%s(%s)", qualified(schema, name), safe(args))
	f := Finding{Kind: what, Object: object}
	if !refersTo(ts, t.Column, t.Rename) {
		return Finding{} // only a comment, a word containing it, or a value read under both names
	}
	tables := rowTypes
	for _, tb := range t.Tables {
		if namesTable(ts, tb) && !slices.Contains(tables, qualified(t.Schema, tb)) {
			tables = append(tables, qualified(t.Schema, tb))
		}
	}
	switch {
	case len(triggers) > 0:
		f.Outcome = Refused
		f.Message = fmt.Sprintf("%s %s (%s) names %s in its body, which PostgreSQL stores as text and does not rewrite: after %s renames the column to %s, every INSERT or UPDATE that fires it fails (record \"new\" has no field \"%s\"). "+
			"Before %s, make the body independent of the column's name (read the key as coalesce(to_jsonb(NEW)->>'%s', to_jsonb(NEW)->>'%s'); set it with NEW := jsonb_populate_record(NEW, jsonb_build_object('%s', v, '%s', v))), "+
			"or drop the trigger and create it again naming %s right after %s",
			what, object, safe(strings.Join(triggers, ", ")), t.Column, t.direction(), t.Rename, t.Column,
			t.direction(), t.Rename, t.Column, t.Rename, t.Column, t.Rename, t.direction())
	case len(tables) > 0:
		rewrite := "rewrite it as a SQL-standard body (BEGIN ATOMIC ... END, which PostgreSQL rewrites on the rename) or without naming the column"
		if !atomic { // no SQL-standard bodies before 14
			rewrite = "rewrite it without naming the column"
		}
		f.Outcome = Refused
		f.Message = fmt.Sprintf("%s %s reads the queue table %s and names %s in its body, which PostgreSQL stores as text and does not rewrite: after %s renames the column to %s, every call fails (column \"%s\" does not exist). "+
			"Before %s, %s, or drop it and create it again naming %s right after %s",
			what, object, strings.Join(tables, ", "), t.Column, t.direction(), t.Rename, t.Column, t.direction(), rewrite, t.Rename, t.direction())
	default:
		return Finding{}
	}
	return f
}
