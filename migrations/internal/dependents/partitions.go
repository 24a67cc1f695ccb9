package dependents

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// partitionsCheck decides what migrate-unique does about partitioned and
// inherited tables (docs/migration.md, "Partitioned and inherited tables"),
// before any change:
//   - a partitioned table on which the run builds an index or whose unique
//     rule up drops is migrated online: each index built ON ONLY the table,
//     then per partition CONCURRENTLY and attached (migrations,
//     partitions.go); noted. Refused: a unique rule that is a constraint
//     (no online way back: ADD CONSTRAINT ... USING INDEX does not run on
//     a partitioned table), a partition that is itself partitioned or a
//     foreign table (its index cannot be built CONCURRENTLY and attached);
//   - where the run renames the key: a partition named as a queue table, a
//     table that inherits its key column (neither can rename it alone), a
//     table with inheritance children (the rename would reach them, but not
//     the drop of their unique rules nor the counting index): refused.
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
             JOIN pg_namespace kn ON kn.oid = k.relnamespace WHERE i.inhparent = c.oid ORDER BY 1),
       ARRAY(SELECT format('%s (%s)', `+quoted("con.conname")+`, pg_get_constraintdef(con.oid)) FROM pg_constraint con JOIN pg_index x ON x.indexrelid = con.conindid
             WHERE con.conrelid = c.oid AND con.contype = 'u' AND queue.key = ANY (x.indkey::int2[]) ORDER BY 1),
       ARRAY(SELECT format('%s.%s', `+quoted("sn.nspname")+`, `+quoted("s.relname")+`) || CASE s.relkind WHEN 'p' THEN ' (itself partitioned)' ELSE ' (a foreign table)' END
             FROM pg_partition_tree(c.oid) AS pt JOIN pg_class s ON s.oid = pt.relid JOIN pg_namespace sn ON sn.oid = s.relnamespace
             WHERE pt.relid <> c.oid AND s.relkind IN ('p', 'f') ORDER BY 1),
       ARRAY(SELECT format('%s.%s', `+quoted("dn.nspname")+`, `+quoted("d.relname")+`) FROM pg_inherits i JOIN pg_class d ON d.oid = i.inhrelid
             JOIN pg_namespace dn ON dn.oid = d.relnamespace
             WHERE i.inhparent = c.oid AND coalesce((to_jsonb(i) ->> 'inhdetachpending')::bool, false) ORDER BY 1)
FROM queue JOIN pg_class c ON c.oid = queue.rel JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = queue.key
WHERE queue.root AND (c.relkind = 'p' OR c.relispartition OR a.attinhcount > 0 OR EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = c.oid))
ORDER BY 1, 2`, func(rows pgx.Rows) (Finding, error) {
		var schema, name, partKey string
		var partitioned, partition, dropsUnique bool
		var parents, children, constraints, unsupported, pending []string
		if err := rows.Scan(&schema, &name, &partitioned, &partKey, &partition, &dropsUnique, &parents, &children, &constraints, &unsupported, &pending); err != nil {
			return Finding{}, err
		}
		table := qualified(schema, name)
		builds := slices.Contains(t.Concurrent, pgx.Identifier{schema, name}.Sanitize())
		described := fmt.Sprintf("is partitioned (PARTITION BY %s, partitions %s)", safe(partKey), safe(strings.Join(children, ", ")))
		var why string
		switch {
		case partition && t.Rename != "":
			why = fmt.Sprintf("is a partition of %s: its key column can only be renamed through the partitioned table", safe(strings.Join(parents, ", ")))
		case partitioned && (builds || dropsUnique) && len(unsupported) > 0:
			why = fmt.Sprintf("%s and has partitions whose index cannot be built CONCURRENTLY and attached: %s", described, safe(strings.Join(unsupported, ", ")))
		case partitioned && t.Up && len(constraints) > 0:
			why = fmt.Sprintf("%s and its unique rule is a constraint, %s: down could not restore a constraint on a partitioned table online (ALTER TABLE ... ADD CONSTRAINT ... USING INDEX does not run there)",
				described, safe(strings.Join(constraints, ", ")))
		case partitioned && t.Rename != "" && len(pending) > 0:
			why = fmt.Sprintf("%s and partition %s is pending detach (an interrupted DETACH ... CONCURRENTLY): the rename of the key column does not reach a partition pending detach, and on PostgreSQL 18 its detach can then no longer be finished (ALTER TABLE ... FINALIZE fails: could not convert row type). Finish the detach first: ALTER TABLE %s DETACH PARTITION %s FINALIZE; then run again",
				described, safe(strings.Join(pending, ", ")), table, safe(pending[0]))
		case partitioned && (builds || dropsUnique):
			return Finding{Kind: "partitioned table", Object: table, Outcome: Carried,
				Message: fmt.Sprintf("table %s %s: each index the run builds on it is created ON ONLY the table, then built CONCURRENTLY on each partition and attached; a partition created meanwhile gets its own from PostgreSQL%s", table, described, pendingNote(table, pending))}, nil
		case partitioned || t.Rename == "":
			return Finding{}, nil // nothing built on it, or renamed already
		case len(parents) > 0:
			why = fmt.Sprintf("inherits its key column from %s: PostgreSQL cannot rename an inherited column on the child alone", safe(strings.Join(parents, ", ")))
		default:
			why = fmt.Sprintf("has inheritance children (%s): the rename would reach them, but not the drop of their own unique rules nor the counting indexes, and counts over the table would read their rows unindexed",
				safe(strings.Join(children, ", ")))
		}
		return Finding{Kind: "partitioned or inherited table", Object: table, Outcome: Refused,
			Message: fmt.Sprintf("table %s %s. See docs/migration.md, \"Partitioned and inherited tables\", for what migrate-unique migrates and the steps to take by hand otherwise",
				table, why)}, nil
	}, t.Up)
}}

// pendingNote names the partitions pending detach (an interrupted DETACH
// ... CONCURRENTLY, PostgreSQL 14 and later) for a run that renames
// nothing (up --expand): it builds nothing on them, and their detach is
// finished by hand. A run that renames the key refuses them.
func pendingNote(table string, pending []string) string {
	if len(pending) == 0 {
		return ""
	}
	return fmt.Sprintf(". Partition %s is pending detach (an interrupted DETACH ... CONCURRENTLY): queries on the table no longer read it and the run builds nothing on it; finish it with ALTER TABLE %s DETACH PARTITION %s FINALIZE",
		safe(strings.Join(pending, ", ")), table, safe(pending[0]))
}
