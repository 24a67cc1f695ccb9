package dependents

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// partitionUniqueCheck refuses, for up, a unique index on the key that a
// partition has on its own (not attached to a rule of the partitioned
// table): the cutover replaces the table's unique rules, so it would stay
// and reject a second job of a group in that partition (23505), and down
// would not know it. An INVALID one is what a down stopped by a kill in
// the middle of its rebuild leaves.
var partitionUniqueCheck = Check{Kind: "unique indexes of a partition", Run: func(ctx context.Context, q Querier, t Target) ([]Finding, error) {
	if !t.Up {
		return nil, nil
	}
	return query(ctx, q, t, `WITH `+queueColumns+`
SELECT format('%s.%s', `+quoted("n.nspname")+`, `+quoted("i.relname")+`), format('%s.%s', `+quoted("tn.nspname")+`, `+quoted("tc.relname")+`),
       pg_get_indexdef(x.indexrelid), x.indisvalid
FROM queue JOIN pg_index x ON x.indrelid = queue.rel AND x.indisunique AND NOT x.indisprimary AND queue.key = ANY (x.indkey::int2[])
JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_namespace n ON n.oid = i.relnamespace
JOIN pg_class tc ON tc.oid = x.indrelid JOIN pg_namespace tn ON tn.oid = tc.relnamespace
WHERE NOT queue.root AND NOT i.relispartition
ORDER BY 1`, func(rows pgx.Rows) (Finding, error) {
		var index, table, def string
		var valid bool
		if err := rows.Scan(&index, &table, &def, &valid); err != nil {
			return Finding{}, err
		}
		why := "Drop it (DROP INDEX CONCURRENTLY " + safe(index) + "), or make it a unique index of the partitioned table, which up drops and down restores on every partition"
		if !valid {
			why = "It is INVALID: a down stopped in the middle of rebuilding the unique rule leaves one; run down again to finish it, or drop it (DROP INDEX CONCURRENTLY " + safe(index) + ")"
		}
		return Finding{Kind: "unique index", Object: safe(index), Outcome: Refused,
			Message: fmt.Sprintf("partition %s has its own unique index %s (%s) on the key, not attached to a unique rule of the partitioned table: the cutover replaces the table's rules, so it would stay and reject a second job of a group in that partition (23505). %s",
				safe(table), safe(index), safe(def), why)}, nil
	})
}}
