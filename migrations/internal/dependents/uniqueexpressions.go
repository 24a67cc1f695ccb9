package dependents

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// uniqueExpressionsCheck refuses over a unique index on an expression of
// the key (lower(unique_key), say). The cutover drops the unique rules that
// have the key among their columns; this one it would keep, renamed, and it
// would go on rejecting a second job of a group (23505) once the runtime
// admits up to a limit.
var uniqueExpressionsCheck = Check{Kind: "unique indexes on an expression of the key", Run: func(ctx context.Context, q Querier, t Target) ([]Finding, error) {
	if !t.Up || t.Rename == "" {
		return nil, nil
	}
	return query(ctx, q, t, `WITH `+queueColumns+`, `+dependsOnKey+`
SELECT DISTINCT format('%s.%s', `+quoted("n.nspname")+`, `+quoted("i.relname")+`), format('%s.%s', `+quoted("tn.nspname")+`, `+quoted("tc.relname")+`), pg_get_indexdef(x.indexrelid),
       coalesce(pg_get_expr(x.indexprs, x.indrelid), '')
FROM deps JOIN pg_index x ON deps.classid = 'pg_class'::regclass AND x.indexrelid = deps.objid
JOIN queue ON queue.rel = x.indrelid
JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_namespace n ON n.oid = i.relnamespace
JOIN pg_class tc ON tc.oid = x.indrelid JOIN pg_namespace tn ON tn.oid = tc.relnamespace
WHERE NOT i.relispartition AND x.indisunique AND NOT x.indisprimary AND x.indexprs IS NOT NULL AND NOT (queue.key = ANY (x.indkey::int2[]))
ORDER BY 1`, func(rows pgx.Rows) (Finding, error) {
		var index, table, def, exprs string
		if err := rows.Scan(&index, &table, &def, &exprs); err != nil {
			return Finding{}, err
		}
		if !containsWord(exprs, t.Column) {
			return Finding{}, nil // the key is only in its predicate
		}
		return Finding{Kind: "unique index", Object: safe(index), Outcome: Refused,
			Message: fmt.Sprintf("unique index %s on %s (%s) is on an expression of %s: the cutover replaces the unique rules that have the key as a column, not this one, which would stay and go on rejecting a second job of a group (23505) once the runtime admits more than one. "+
				"Drop it before up (DROP INDEX CONCURRENTLY %s), or make it a unique rule on the column itself; nothing restores it on down",
				safe(index), safe(table), safe(def), t.Column, safe(index))}, nil
	})
}}
