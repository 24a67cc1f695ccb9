package dependents

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// replicaIdentityCheck refuses over a queue table whose REPLICA IDENTITY is
// a unique index up drops: the table would be left with no replica
// identity, so UPDATE and DELETE fail as soon as a publication publishes
// them (55000), and down would restore the index but not the identity.
var replicaIdentityCheck = Check{Kind: "replica identities", Run: func(ctx context.Context, q Querier, t Target) ([]Finding, error) {
	if !t.Up {
		return nil, nil
	}
	return query(ctx, q, t, `WITH `+queueColumns+`, `+droppedUnique+`
SELECT format('%s.%s', `+quoted("n.nspname")+`, `+quoted("c.relname")+`), format('%s.%s', `+quoted("n.nspname")+`, `+quoted("i.relname")+`)
FROM dropped JOIN pg_index x ON x.indexrelid = dropped.idx AND x.indisreplident
JOIN pg_class c ON c.oid = dropped.rel AND c.relreplident = 'i'
JOIN pg_class i ON i.oid = dropped.idx JOIN pg_namespace n ON n.oid = c.relnamespace
ORDER BY 1`, func(rows pgx.Rows) (Finding, error) {
		var table, index string
		if err := rows.Scan(&table, &index); err != nil {
			return Finding{}, err
		}
		return Finding{Kind: "replica identity", Object: safe(table), Outcome: Refused,
			Message: fmt.Sprintf("table %s has REPLICA IDENTITY USING INDEX %s, a unique rule up drops: the table would be left with no replica identity, so every UPDATE and DELETE fails while a publication publishes them (55000), and down would not restore the identity. "+
				"Before up, give it another one: ALTER TABLE %s REPLICA IDENTITY DEFAULT (its primary key) or FULL",
				safe(table), safe(index), safe(table))}, nil
	})
}}
