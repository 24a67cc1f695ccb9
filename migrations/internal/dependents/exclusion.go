package dependents

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// exclusionCheck refuses over an exclusion constraint on the key (EXCLUDE
// USING gist (unique_key WITH =), say): it enforces uniqueness as a unique
// rule does, but the cutover replaces only unique indexes and constraints,
// so it would stay and reject a second job of a group (23P01).
var exclusionCheck = Check{Kind: "exclusion constraints", Run: func(ctx context.Context, q Querier, t Target) ([]Finding, error) {
	if !t.Up || t.Rename == "" {
		return nil, nil
	}
	return query(ctx, q, t, `WITH `+queueColumns+`, `+dependsOnKey+`
SELECT DISTINCT format('%s', `+quoted("con.conname")+`), format('%s.%s', `+quoted("n.nspname")+`, `+quoted("c.relname")+`), pg_get_constraintdef(con.oid)
FROM deps JOIN pg_constraint con ON con.contype = 'x' AND con.conparentid = 0 AND (deps.classid = 'pg_constraint'::regclass AND con.oid = deps.objid
                                                           OR deps.classid = 'pg_class'::regclass AND con.conindid = deps.objid)
JOIN pg_class c ON c.oid = con.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
ORDER BY 2, 1`, func(rows pgx.Rows) (Finding, error) {
		var name, table, def string
		if err := rows.Scan(&name, &table, &def); err != nil {
			return Finding{}, err
		}
		return Finding{Kind: "exclusion constraint", Object: safe(table) + " " + safe(name), Outcome: Refused,
			Message: fmt.Sprintf("exclusion constraint %s on %s (%s) compares the key: the cutover replaces unique rules, not exclusion constraints, so it would stay and go on rejecting a second job of a group (23P01) once the runtime admits more than one. "+
				"Drop it before up (ALTER TABLE %s DROP CONSTRAINT %s); nothing restores it on down",
				safe(name), safe(table), safe(def), safe(table), safe(name))}, nil
	})
}}
