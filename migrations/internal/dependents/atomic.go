package dependents

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// atomicBodiesCheck notes SQL-standard function bodies (BEGIN ATOMIC, or
// RETURN expr) that read the key column: PostgreSQL stores them parsed,
// records their dependency on the column, and follows the rename.
var atomicBodiesCheck = Check{Kind: "SQL-standard function bodies", Run: func(ctx context.Context, q Querier, t Target) ([]Finding, error) {
	if t.Rename == "" {
		return nil, nil
	}
	return query(ctx, q, t, `WITH `+queueColumns+`, `+dependsOnKey+`, `+droppedUnique+`
SELECT DISTINCT n.nspname::text, p.proname::text, pg_get_function_identity_arguments(p.oid), pg_get_functiondef(p.oid)
FROM deps JOIN pg_proc p ON deps.classid = 'pg_proc'::regclass AND p.oid = deps.objid
JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE NOT ($4 AND EXISTS (
    SELECT 1 FROM pg_depend d JOIN dropped ON d.refclassid = 'pg_class'::regclass AND d.refobjid = dropped.idx
                                           OR d.refclassid = 'pg_constraint'::regclass AND d.refobjid IN (SELECT oid FROM pg_constraint WHERE conindid = dropped.idx)
    WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid)) -- refused by uniquedependents.go
ORDER BY 1, 2, 3`, func(rows pgx.Rows) (Finding, error) {
		var schema, name, args, def string
		if err := rows.Scan(&schema, &name, &args, &def); err != nil {
			return Finding{}, err
		}
		if refusedOnConflict(t, def) {
			return Finding{}, nil
		}
		return carried(t, "function", fmt.Sprintf("%s(%s)", qualified(schema, name), safe(args)), "has a SQL-standard body that reads the key column"), nil
	}, t.Up)
}}
