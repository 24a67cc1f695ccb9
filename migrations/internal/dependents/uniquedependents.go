package dependents

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// uniqueDependentsCheck refuses over any object that depends on a unique
// rule up drops (its index or its constraint), such as a SQL-standard body
// with INSERT ... ON CONFLICT ON CONSTRAINT: PostgreSQL refuses to drop the
// rule while it is needed (2BP01), so the cutover could never commit.
// Foreign keys have their own message (foreignkeys.go).
var uniqueDependentsCheck = Check{Kind: "objects that need the unique rule", Run: func(ctx context.Context, q Querier, t Target) ([]Finding, error) {
	if !t.Up {
		return nil, nil
	}
	return query(ctx, q, t, `WITH `+queueColumns+`, `+droppedUnique+`,
rule AS (
    SELECT dropped.idx, 'pg_class'::regclass AS classid, dropped.idx AS objid FROM dropped
    UNION ALL
    SELECT dropped.idx, 'pg_constraint'::regclass, con.oid FROM dropped JOIN pg_constraint con ON con.conindid = dropped.idx AND con.conrelid = dropped.rel AND con.contype = 'u')
SELECT DISTINCT o.type || ' ' || o.identity, format('%s.%s', `+quoted("n.nspname")+`, `+quoted("i.relname")+`)
FROM rule JOIN pg_depend d ON d.refclassid = rule.classid AND d.refobjid = rule.objid
CROSS JOIN LATERAL pg_identify_object(d.classid, d.objid, d.objsubid) AS o
JOIN pg_class i ON i.oid = rule.idx JOIN pg_namespace n ON n.oid = i.relnamespace
WHERE d.deptype NOT IN ('i', 'P', 'S')
  AND NOT (d.classid = 'pg_class'::regclass AND d.objid = rule.idx)
  AND NOT EXISTS (SELECT 1 FROM pg_constraint f WHERE d.classid = 'pg_constraint'::regclass AND f.oid = d.objid AND f.contype = 'f')
ORDER BY 1`, func(rows pgx.Rows) (Finding, error) {
		var object, index string
		if err := rows.Scan(&object, &index); err != nil {
			return Finding{}, err
		}
		return Finding{Kind: "dependent of the unique rule", Object: safe(object), Outcome: Refused,
			Message: fmt.Sprintf("%s depends on the unique rule %s, which up drops: PostgreSQL refuses to drop the rule while it is needed (2BP01), so the cutover could never finish. Before up, drop it or rewrite it without the rule (an ON CONFLICT ON CONSTRAINT goes: the runtime's admission check replaces it)",
				safe(object), safe(index))}, nil
	})
}}
