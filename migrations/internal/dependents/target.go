package dependents

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"github.com/jackc/pgx/v5"
)

// Querier is what the checks read the catalog with: *pgx.Conn and pgx.Tx
// satisfy it.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Target is what a run changes.
type Target struct {
	// Schema and Tables name the queue's tables.
	Schema string
	Tables []string
	// Column is the key column's current name.
	Column string
	// Rename is the name the run gives the key column, or "" when the run
	// renames nothing (its cutover is done).
	Rename string
	// Up says the run is up: its cutover drops the unique rules whose
	// columns include the key (down restores them).
	Up bool
	// Concurrent lists the queue tables (quoted, schema-qualified) on which
	// the run would build or drop an index CONCURRENTLY.
	Concurrent []string
	// OwnFunctions lists the functions the tool made and carries itself
	// (schema, name: "schema.name", unquoted), which the checks pass over.
	OwnFunctions []string
}

func (t Target) direction() string {
	if t.Up {
		return "up"
	}
	return "down"
}

// Outcome is what a run does to a dependent object.
type Outcome int

// The outcomes.
const (
	// Carried: PostgreSQL follows the change by itself.
	Carried Outcome = iota
	// Refused: the run refuses before any change.
	Refused
	// Ignored: the run would refuse, but the object's comment says
	// "migrate-unique:ignore <reason>" (functions only, whose bodies are
	// read by a heuristic).
	Ignored
)

// Finding is one dependent object and what the run does to it.
type Finding struct {
	// Kind is the kind of object ("function", "view", ...).
	Kind string
	// Object names it, schema-qualified and quoted.
	Object string
	// Outcome says whether the run carries it or refuses over it.
	Outcome Outcome
	// Message says what happens to it and, for a refusal, what to do.
	Message string
}

// Check reads one kind of dependent object.
type Check struct {
	// Kind names the kind of object the check reads.
	Kind string
	// Run returns a finding per dependent object of the kind.
	Run func(ctx context.Context, q Querier, t Target) ([]Finding, error)
}

// All lists every check, in the order their findings are shown.
var All = []Check{
	partitionsCheck,
	partitionUniqueCheck,
	functionsCheck,
	triggerArgumentsCheck,
	foreignKeysCheck,
	uniqueDependentsCheck,
	onConflictCheck,
	replicaIdentityCheck,
	uniqueExpressionsCheck,
	primaryKeyCheck,
	exclusionCheck,
	publicationsCheck,
	viewsCheck,
	rulesCheck,
	checkConstraintsCheck,
	generatedColumnsCheck,
	indexesCheck,
	triggersCheck,
	policiesCheck,
	statisticsCheck,
	atomicBodiesCheck,
}

// Run runs every check of All.
func Run(ctx context.Context, q Querier, t Target) ([]Finding, error) {
	var out []Finding
	for _, c := range All {
		fs, err := c.Run(ctx, q, t)
		if err != nil {
			return nil, fmt.Errorf("check the %s that depend on the queue's key column: %w", c.Kind, err)
		}
		out = append(out, fs...)
	}
	return out, nil
}

// queueColumns is a CTE "queue (rel, key, root)": each queue table and the
// attribute number of its key column ($1 schema, $2 tables, $3 column),
// root true; and every partition of a partitioned queue table, at any
// level, root false: what depends on a partition's key column is checked
// as what depends on the table's.
const queueColumns = `queue AS (
    SELECT p.relid AS rel, a.attnum AS key, p.root
    FROM pg_catalog.pg_class c
    JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
    CROSS JOIN LATERAL (SELECT c.oid AS relid, true AS root
                        UNION ALL
                        SELECT t.relid, false FROM pg_catalog.pg_partition_tree(c.oid) AS t WHERE t.relid OPERATOR(pg_catalog.<>) c.oid) AS p
    JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) p.relid AND a.attname OPERATOR(pg_catalog.=) $3 AND NOT a.attisdropped
    WHERE n.nspname OPERATOR(pg_catalog.=) $1 AND c.relname OPERATOR(pg_catalog.=) ANY ($2))`

// droppedUnique is a CTE "dropped (rel, idx)", after queueColumns: the
// unique indexes (and the constraints they back) up's cutover drops, by the
// cutover's own rule: unique, not the primary key, the key among its columns.
const droppedUnique = `dropped AS (
    SELECT x.indrelid AS rel, x.indexrelid AS idx
    FROM pg_index x JOIN queue ON queue.rel = x.indrelid
    WHERE x.indisunique AND NOT x.indisprimary AND queue.key = ANY (x.indkey::int2[]))`

// dependsOnKey is a CTE "deps (classid, objid, rel)", after queueColumns:
// every object pg_depend records as depending on a queue table's key column.
const dependsOnKey = `deps AS (
    SELECT DISTINCT d.classid, d.objid, queue.rel
    FROM pg_depend d JOIN queue ON d.refclassid = 'pg_class'::regclass AND d.refobjid = queue.rel AND d.refobjsubid = queue.key
    WHERE d.deptype IN ('n', 'a'))`

// query runs sql with $1 schema, $2 tables, $3 column, then extra as $4
// on, and collects one finding per row from scan (a finding without a
// message is left out).
func query(ctx context.Context, q Querier, t Target, sql string, scan func(rows pgx.Rows) (Finding, error), extra ...any) ([]Finding, error) {
	rows, err := q.Query(ctx, sql, append([]any{t.Schema, t.Tables, t.Column}, extra...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Finding
	for rows.Next() {
		f, err := scan(rows)
		if err != nil {
			return nil, err
		}
		if f.Message != "" {
			out = append(out, f)
		}
	}
	return out, rows.Err()
}

// serverVersion is the server's server_version_num.
func serverVersion(ctx context.Context, q Querier) (int, error) {
	rows, err := q.Query(ctx, "SELECT current_setting('server_version_num')::int")
	if err != nil {
		return 0, err
	}
	v, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[int])
	if err != nil {
		return 0, fmt.Errorf("read the server's version: %w", err)
	}
	return v, nil
}

// quoted renders the name expr in SQL always double-quoted, as
// pgx.Identifier quotes, so that every object a finding names reads as the
// rest of the tool's output does.
func quoted(expr string) string {
	return `('"' || replace(` + expr + `::text, '"', '""') || '"')`
}

// qualified quotes schema.name as SQL does, with every control character
// escaped so that a name read from the catalog cannot move a terminal's
// cursor.
func qualified(schema, name string) string {
	return safe(pgx.Identifier{schema, name}.Sanitize())
}

func ident(name string) string { return safe(pgx.Identifier{name}.Sanitize()) }

func safe(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// carriedDeps is a check that notes every object of one catalog that
// depends on the key column: from must join deps (see dependsOnKey) to that
// catalog and select the object's name as "object", its identifiers
// rendered with quoted, and its definition as "definition" where it may
// hold an INSERT ... ON CONFLICT (” elsewhere): one onConflictCheck
// refuses is not noted as carried.
func carriedDeps(kind, plural, from, how string) Check {
	return Check{Kind: plural, Run: func(ctx context.Context, q Querier, t Target) ([]Finding, error) {
		if t.Rename == "" {
			return nil, nil
		}
		return query(ctx, q, t, `WITH `+queueColumns+`, `+dependsOnKey+`
SELECT DISTINCT object, definition FROM (`+from+`) AS o ORDER BY 1`, func(rows pgx.Rows) (Finding, error) {
			var object, definition string
			if err := rows.Scan(&object, &definition); err != nil {
				return Finding{}, err
			}
			if refusedOnConflict(t, definition) {
				return Finding{}, nil
			}
			return carried(t, kind, safe(object), how), nil
		})
	}}
}

// carried is the note for an object PostgreSQL rewrites on the rename;
// detail, when given, says what that means for its users.
func carried(t Target, kind, object, how string, detail ...string) Finding {
	msg := fmt.Sprintf("%s %s %s: carried, PostgreSQL follows the rename of %s to %s by itself", kind, object, how, t.Column, t.Rename)
	for _, d := range detail {
		msg += " (" + d + ")"
	}
	return Finding{Kind: kind, Object: object, Outcome: Carried, Message: msg}
}
