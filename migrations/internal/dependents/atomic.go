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
	return query(ctx, q, t, `WITH `+queueColumns+`, `+dependsOnKey+`
SELECT DISTINCT n.nspname::text, p.proname::text, pg_get_function_identity_arguments(p.oid)
FROM deps JOIN pg_proc p ON deps.classid = 'pg_proc'::regclass AND p.oid = deps.objid
JOIN pg_namespace n ON n.oid = p.pronamespace
ORDER BY 1, 2, 3`, func(rows pgx.Rows) (Finding, error) {
		var schema, name, args string
		if err := rows.Scan(&schema, &name, &args); err != nil {
			return Finding{}, err
		}
		return carried(t, "function", fmt.Sprintf("%s(%s)", qualified(schema, name), safe(args)), "has a SQL-standard body that reads the key column"), nil
	})
}}
