package dependents

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// partitionsCheck refuses what migrate-unique cannot migrate about
// partitioned and inherited tables (docs/migration.md, "Partitioned and
// inherited tables"), before any change:
//   - a partitioned table on which the run would build or drop an index
//     (CREATE INDEX CONCURRENTLY does not run on a partitioned table: the
//     counting index, down's rebuild of the unique rule), or whose unique
//     rule up drops (down could not rebuild it). A partitioned table with
//     neither, such as a results table, is migrated: the rename and the
//     skip-metadata column reach every partition;
//   - where the run renames the key: a partition named as a queue table, a
//     table that inherits its key column (neither can rename it alone), a
//     table with inheritance children (the rename would reach them, but not
//     the drop of their unique rules nor the counting index).
var partitionsCheck = Check{Kind: "partitioned and inherited tables", Run: func(ctx context.Context, q Querier, t Target) ([]Finding, error) {
	if t.Rename == "" && len(t.Concurrent) == 0 {
		return nil, nil // nothing to rename nor to build: nothing partition-specific to do
	}
	return query(ctx, q, t, `WITH `+queueColumns+`
SELECT n.nspname::text, c.relname::text, c.relkind = 'p', coalesce(pg_get_partkeydef(c.oid), ''), c.relispartition,
       $4 AND EXISTS (SELECT 1 FROM pg_index x WHERE x.indrelid = c.oid AND x.indisunique AND NOT x.indisprimary AND queue.key = ANY (x.indkey::int2[])),
       ARRAY(SELECT format('%s.%s', `+quoted("pn.nspname")+`, `+quoted("p.relname")+`) FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent
             JOIN pg_namespace pn ON pn.oid = p.relnamespace WHERE i.inhrelid = c.oid ORDER BY 1),
       ARRAY(SELECT format('%s.%s', `+quoted("kn.nspname")+`, `+quoted("k.relname")+`) FROM pg_inherits i JOIN pg_class k ON k.oid = i.inhrelid
             JOIN pg_namespace kn ON kn.oid = k.relnamespace WHERE i.inhparent = c.oid ORDER BY 1)
FROM queue JOIN pg_class c ON c.oid = queue.rel JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = queue.key
WHERE c.relkind = 'p' OR c.relispartition OR a.attinhcount > 0 OR EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = c.oid)
ORDER BY 1, 2`, func(rows pgx.Rows) (Finding, error) {
		var schema, name, partKey string
		var partitioned, partition, dropsUnique bool
		var parents, children []string
		if err := rows.Scan(&schema, &name, &partitioned, &partKey, &partition, &dropsUnique, &parents, &children); err != nil {
			return Finding{}, err
		}
		table := qualified(schema, name)
		builds := slices.Contains(t.Concurrent, pgx.Identifier{schema, name}.Sanitize())
		var why string
		switch {
		case partition && t.Rename != "":
			why = fmt.Sprintf("is a partition of %s: its key column can only be renamed through the partitioned table", safe(strings.Join(parents, ", ")))
		case partitioned && builds && t.Up:
			why = fmt.Sprintf("is partitioned (PARTITION BY %s, partitions %s): CREATE INDEX CONCURRENTLY cannot build the counting index on a partitioned table",
				safe(partKey), safe(strings.Join(children, ", ")))
		case partitioned && builds:
			why = fmt.Sprintf("is partitioned (PARTITION BY %s, partitions %s): down could neither rebuild the unique rule nor drop the counting index CONCURRENTLY on a partitioned table",
				safe(partKey), safe(strings.Join(children, ", ")))
		case partitioned && dropsUnique:
			why = fmt.Sprintf("is partitioned (PARTITION BY %s, partitions %s) and has a unique rule on the key, which down could not rebuild CONCURRENTLY on a partitioned table",
				safe(partKey), safe(strings.Join(children, ", ")))
		case partitioned || t.Rename == "":
			return Finding{}, nil // nothing built on it, or renamed already
		case len(parents) > 0:
			why = fmt.Sprintf("inherits its key column from %s: PostgreSQL cannot rename an inherited column on the child alone", safe(strings.Join(parents, ", ")))
		default:
			why = fmt.Sprintf("has inheritance children (%s): the rename would reach them, but not the drop of their own unique rules nor the counting indexes, and counts over the table would read their rows unindexed",
				safe(strings.Join(children, ", ")))
		}
		return Finding{Kind: "partitioned or inherited table", Object: table, Outcome: Refused,
			Message: fmt.Sprintf("table %s %s. migrate-unique does not migrate partitioned or inherited queues by itself: see docs/migration.md, \"Partitioned and inherited tables\", for the steps to take by hand",
				table, why)}, nil
	}, t.Up)
}}
