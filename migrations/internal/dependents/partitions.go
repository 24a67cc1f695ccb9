package dependents

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// partitionsCheck refuses partitioned queue tables, partitions, and tables
// with inheritance parents or children. migrate-unique does not migrate
// them (docs/migration.md, "Partitioned and inherited tables"): CREATE INDEX
// CONCURRENTLY cannot build a counting index on a partitioned table, the
// unique rule could not be rebuilt CONCURRENTLY on the way back, a partition
// or an inheritance child cannot rename the key column it inherits (a child
// that inherits other columns only is no matter), and the
// children of an inheritance parent would keep their own unique rules. Up
// and down refuse before any change when they would rename the column; a
// down that only cleans up after an up that stopped before its cutover goes
// on.
var partitionsCheck = Check{Kind: "partitioned and inherited tables", Run: func(ctx context.Context, q Querier, t Target) ([]Finding, error) {
	if t.Rename == "" && len(t.Concurrent) == 0 {
		return nil, nil // nothing to rename nor to build: nothing partition-specific to do
	}
	return query(ctx, q, t, `WITH `+queueColumns+`
SELECT n.nspname::text, c.relname::text, c.relkind = 'p', coalesce(pg_get_partkeydef(c.oid), ''), c.relispartition,
       ARRAY(SELECT format('%s.%s', `+quoted("pn.nspname")+`, `+quoted("p.relname")+`) FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent
             JOIN pg_namespace pn ON pn.oid = p.relnamespace WHERE i.inhrelid = c.oid ORDER BY 1),
       ARRAY(SELECT format('%s.%s', `+quoted("kn.nspname")+`, `+quoted("k.relname")+`) FROM pg_inherits i JOIN pg_class k ON k.oid = i.inhrelid
             JOIN pg_namespace kn ON kn.oid = k.relnamespace WHERE i.inhparent = c.oid ORDER BY 1)
FROM queue JOIN pg_class c ON c.oid = queue.rel JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = queue.key
WHERE c.relkind = 'p' OR c.relispartition OR a.attinhcount > 0 OR EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = c.oid)
ORDER BY 1, 2`, func(rows pgx.Rows) (Finding, error) {
		var schema, name, partKey string
		var partitioned, partition bool
		var parents, children []string
		if err := rows.Scan(&schema, &name, &partitioned, &partKey, &partition, &parents, &children); err != nil {
			return Finding{}, err
		}
		table := qualified(schema, name)
		builds := slices.Contains(t.Concurrent, pgx.Identifier{schema, name}.Sanitize())
		var why string
		switch {
		case t.Rename == "" && !(partitioned && builds):
			return Finding{}, nil // renamed already, and no index to build on it
		case partitioned && t.Up:
			why = fmt.Sprintf("is partitioned (PARTITION BY %s, partitions %s): CREATE INDEX CONCURRENTLY cannot build the counting index on a partitioned table",
				safe(partKey), safe(strings.Join(children, ", ")))
		case partitioned:
			why = fmt.Sprintf("is partitioned (PARTITION BY %s, partitions %s): down could neither rebuild the unique rule nor drop the counting index CONCURRENTLY on a partitioned table",
				safe(partKey), safe(strings.Join(children, ", ")))
		case partition:
			why = fmt.Sprintf("is a partition of %s: its key column can only be renamed through the partitioned table", safe(strings.Join(parents, ", ")))
		case len(parents) > 0:
			why = fmt.Sprintf("inherits its key column from %s: PostgreSQL cannot rename an inherited column on the child alone", safe(strings.Join(parents, ", ")))
		default:
			why = fmt.Sprintf("has inheritance children (%s): the rename would reach them, but not the drop of their own unique rules nor the counting indexes, and counts over the table would read their rows unindexed",
				safe(strings.Join(children, ", ")))
		}
		return Finding{Kind: "partitioned or inherited table", Object: table, Outcome: Refused,
			Message: fmt.Sprintf("table %s %s. migrate-unique does not migrate partitioned or inherited queues by itself: see docs/migration.md, \"Partitioned and inherited tables\", for the steps to take by hand",
				table, why)}, nil
	})
}}
