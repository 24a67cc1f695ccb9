package dependents

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// onConflictCheck refuses over SQL-standard function bodies and rules whose
// INSERT ... ON CONFLICT (..., key) infers the unique rule up drops.
// PostgreSQL stores them parsed and carries the rename, but it infers the
// arbiter index only when the statement is planned: after up no unique
// index matches, and every such INSERT fails (42P10). (ON CONFLICT ON
// CONSTRAINT name depends on the constraint itself: uniquedependents.go.)
// Bodies stored as text are refused anyway (functions.go).
var onConflictCheck = Check{Kind: "ON CONFLICT clauses", Run: func(ctx context.Context, q Querier, t Target) ([]Finding, error) {
	if !t.Up || t.Rename == "" {
		return nil, nil
	}
	return query(ctx, q, t, `WITH `+queueColumns+`, `+dependsOnKey+`
SELECT DISTINCT format('function %s.%s(%s)', `+quoted("n.nspname")+`, `+quoted("p.proname")+`, pg_get_function_identity_arguments(p.oid)), pg_get_functiondef(p.oid)
FROM deps JOIN pg_proc p ON deps.classid = 'pg_proc'::regclass AND p.oid = deps.objid
JOIN pg_namespace n ON n.oid = p.pronamespace
UNION
SELECT DISTINCT format('rule %s on %s.%s', `+quoted("r.rulename")+`, `+quoted("n.nspname")+`, `+quoted("c.relname")+`), pg_get_ruledef(r.oid)
FROM deps JOIN pg_rewrite r ON deps.classid = 'pg_rewrite'::regclass AND r.oid = deps.objid AND r.rulename <> '_RETURN'
JOIN pg_class c ON c.oid = r.ev_class JOIN pg_namespace n ON n.oid = c.relnamespace
ORDER BY 1`, func(rows pgx.Rows) (Finding, error) {
		var object, def string
		if err := rows.Scan(&object, &def); err != nil {
			return Finding{}, err
		}
		if !infersOnKey(def, t.Column) {
			return Finding{}, nil
		}
		return Finding{Kind: "ON CONFLICT", Object: safe(object), Outcome: Refused,
			Message: fmt.Sprintf("%s has an INSERT ... ON CONFLICT on %s, which infers the unique rule up drops: after up no unique index matches it and every such INSERT fails (42P10: there is no unique or exclusion constraint matching the ON CONFLICT specification). "+
				"Before up, drop the ON CONFLICT clause (the runtime's admission check replaces it) or the object, and create it again after up",
				safe(object), t.Column)}, nil
	})
}}

var onConflictRE = regexp.MustCompile(`(?is)ON\s+CONFLICT\s*\(([^)]*)\)`)

// infersOnKey reports an ON CONFLICT (...) target list, in a deparsed
// definition, that names the key column.
func infersOnKey(def, column string) bool {
	for _, m := range onConflictRE.FindAllStringSubmatch(def, -1) {
		if names(tokens(m[1]), column) {
			return true
		}
	}
	return false
}

// refusedOnConflict is a carried note's filter: an object refused
// by onConflictCheck is not also noted as carried.
func refusedOnConflict(t Target, def string) bool {
	return t.Up && strings.Contains(strings.ToUpper(def), "CONFLICT") && infersOnKey(def, t.Column)
}
