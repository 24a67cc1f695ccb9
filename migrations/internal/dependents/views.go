package dependents

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// viewsCheck notes views and materialized views that read the key column:
// PostgreSQL stores their query parsed and follows the rename. Their own
// column keeps its name (a view that selects unique_key still has a column
// unique_key after up), so the view's readers go on.
var viewsCheck = Check{Kind: "views", Run: func(ctx context.Context, q Querier, t Target) ([]Finding, error) {
	if t.Rename == "" {
		return nil, nil
	}
	return query(ctx, q, t, `WITH `+queueColumns+`, `+dependsOnKey+`
SELECT DISTINCT v.relkind = 'm', format('%s.%s', `+quoted("n.nspname")+`, `+quoted("v.relname")+`)
FROM deps JOIN pg_rewrite r ON deps.classid = 'pg_rewrite'::regclass AND r.oid = deps.objid AND r.rulename = '_RETURN'
JOIN pg_class v ON v.oid = r.ev_class JOIN pg_namespace n ON n.oid = v.relnamespace
ORDER BY 2`, func(rows pgx.Rows) (Finding, error) {
		var materialized bool
		var object string
		if err := rows.Scan(&materialized, &object); err != nil {
			return Finding{}, err
		}
		kind := "view"
		if materialized {
			kind = "materialized view"
		}
		return carried(t, kind, safe(object), "reads the key column",
			"its definition then reads "+t.Rename+"; its own columns keep their names, so a view column "+t.Column+" stays "+t.Column+" and its readers go on"), nil
	})
}}
