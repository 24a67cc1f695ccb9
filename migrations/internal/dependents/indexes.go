package dependents

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// indexesCheck notes indexes whose expressions or predicate read the key
// column (an index that merely has it as a column is no news): stored
// parsed, carried. Unique ones on an expression of the key are refused
// (uniqueexpressions.go); unique ones with the key among their columns are
// the rule the cutover replaces; exclusion constraints are refused
// (exclusion.go).
var indexesCheck = Check{Kind: "indexes", Run: func(ctx context.Context, q Querier, t Target) ([]Finding, error) {
	if t.Rename == "" {
		return nil, nil
	}
	return query(ctx, q, t, `WITH `+queueColumns+`, `+dependsOnKey+`
SELECT DISTINCT format('%s.%s', `+quoted("n.nspname")+`, `+quoted("i.relname")+`),
       coalesce(pg_get_expr(x.indexprs, x.indrelid), '') || ' ' || coalesce(pg_get_expr(x.indpred, x.indrelid), '')
FROM deps JOIN pg_index x ON deps.classid = 'pg_class'::regclass AND x.indexrelid = deps.objid
JOIN queue ON queue.rel = x.indrelid
JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_namespace n ON n.oid = i.relnamespace
WHERE NOT i.relispartition AND (x.indexprs IS NOT NULL OR x.indpred IS NOT NULL)
  AND NOT EXISTS (SELECT 1 FROM pg_constraint con WHERE con.conindid = x.indexrelid AND con.contype = 'x')
  AND NOT (x.indisunique AND x.indexprs IS NOT NULL)
  AND NOT (x.indisunique AND NOT x.indisprimary AND queue.key = ANY (x.indkey::int2[]))
ORDER BY 1`, func(rows pgx.Rows) (Finding, error) {
		var object, exprs string
		if err := rows.Scan(&object, &exprs); err != nil {
			return Finding{}, err
		}
		if !containsWord(exprs, t.Column) {
			return Finding{}, nil // the key is a plain column of it
		}
		return carried(t, "index", safe(object), "reads the key column in an expression or its predicate"), nil
	})
}}
