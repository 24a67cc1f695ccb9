package migrations

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/layout"
)

// A partitioned table takes no CREATE INDEX CONCURRENTLY. An index on it is
// built online the way PostgreSQL's documentation describes (CREATE INDEX,
// "Building Indexes Concurrently" on partitioned tables):
//
//  1. CREATE INDEX ... ON ONLY parent: the parent's index, INVALID, empty (a
//     partitioned index has no storage). It takes SHARE on the parent alone
//     for a moment, under the run's bounded lock wait and retries. From then
//     on, a partition created or attached (pg_partman's premake) gets its
//     own index built and attached by PostgreSQL itself.
//  2. For each partition without an attached index: CREATE INDEX
//     CONCURRENTLY on it (writers go on), then ALTER INDEX parent ATTACH
//     PARTITION (a moment's lock on the partition's index, bounded and
//     retried).
//  3. The partition list is read again until none lacks the index: the
//     parent's index is then VALID.
//
// Every part is idempotent: a run stopped anywhere resumes where it stopped.
// A sub-partitioned table or a foreign-table partition is refused before
// any change (package dependents, partitions.go).
type partitionedIndex struct {
	// parent is the quoted partitioned table; schema and name the parent
	// index (created in the parent's schema, the layout's).
	parent, schema, name string
	// parentSQL creates the parent's index ON ONLY parent, IF NOT EXISTS.
	parentSQL string
	// partition returns the name of p's index and the CREATE INDEX
	// CONCURRENTLY statement that builds it.
	partition func(ctx context.Context, q querier, p partitionRef) (name, sql string, err error)
	// unique marks down's rebuild of a unique rule: a cancelled build's
	// INVALID index is dropped at once (it would reject duplicates).
	unique bool
	// building is the quoted partition index being built, for the cleanup
	// of a failed unique build.
	building string
}

func (pi *partitionedIndex) quotedIndex() string {
	return pgx.Identifier{pi.schema, pi.name}.Sanitize()
}

// partitionRef is one partition of a partitioned table.
type partitionRef struct {
	oid          uint32
	schema, name string
	// kind is pg_class.relkind: r (a table), p (itself partitioned) or f
	// (a foreign table).
	kind string
}

func (p partitionRef) quoted() string { return pgx.Identifier{p.schema, p.name}.Sanitize() }

// maxPartitionRounds bounds the rounds of step 3: partitions that keep
// appearing faster than their indexes are built.
const maxPartitionRounds = 20

// errPartitionsKeepAppearing says the partition list never settled.
var errPartitionsKeepAppearing = errors.New("partitions without the index kept appearing")

// runPartitioned builds the index of s on every partition of its table and
// attaches it, until the parent's index is valid.
func (r *runner) runPartitioned(ctx context.Context, s step) error {
	pi := s.partitioned
	index := pi.quotedIndex()
	for round := 1; ; round++ {
		exists, valid, err := indexState(ctx, r.conn, index)
		if err != nil {
			return err
		}
		if valid {
			return nil
		}
		if !exists {
			part := step{name: s.name + ": " + index + " ON ONLY " + pi.parent, kind: stepTx, sql: pi.parentSQL}
			if _, _, err := r.runStep(ctx, part); err != nil {
				return err
			}
		}
		missing, err := unindexedPartitions(ctx, r.conn, pi.parent, index)
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			if _, valid, err = indexState(ctx, r.conn, index); err != nil || valid {
				return err
			}
			return fmt.Errorf("index %s on %s stays INVALID although every partition has its index attached; check it with \\d+ %s", index, pi.parent, pi.parent)
		}
		if round > maxPartitionRounds {
			return fmt.Errorf("index %s on %s: %w after %d rounds (%d still lack it: %s); run again once partitions are created less often", index, pi.parent, errPartitionsKeepAppearing, round-1, len(missing), missing[0].quoted())
		}
		for _, p := range missing {
			if p.kind != "r" {
				return fmt.Errorf("partition %s of %s is %s: its index cannot be built CONCURRENTLY and attached; nothing was attached to it", p.quoted(), pi.parent, map[string]string{"p": "itself partitioned", "f": "a foreign table"}[p.kind])
			}
			name, sql, err := pi.partition(ctx, r.conn, p)
			if err != nil {
				return err
			}
			pidx := pgx.Identifier{p.schema, name}.Sanitize()
			if err := r.freeName(ctx, s.name, pidx, p); err != nil {
				return err
			}
			pi.building = pidx
			r.printf("%s: partition %s: %s\n", s.name, p.quoted(), pidx)
			// Through runStep, so that a build PostgreSQL cancels as a
			// deadlock victim is built again (its INVALID leftover dropped
			// first): a CREATE TABLE ... PARTITION OF on a table with a
			// DEFAULT partition waits for the build's lock on the DEFAULT
			// partition while the build waits for the create's snapshot.
			build := step{name: s.name + ": partition " + p.quoted(), kind: stepConcurrent, sql: sql, index: pidx, unique: pi.unique}
			restore := r.deadlockVictimFirst(ctx)
			_, _, err = r.runStep(ctx, build)
			restore()
			if err != nil {
				return fmt.Errorf("build %s on partition %s: %w", pidx, p.quoted(), err)
			}
			attach := step{name: s.name + ": attach " + pidx, kind: stepTx, sql: "ALTER INDEX " + index + " ATTACH PARTITION " + pidx}
			if _, _, err := r.runStep(ctx, attach); err != nil {
				return err
			}
		}
	}
}

// freeName makes sure the quoted index name pidx, which the run is about to
// build on partition p, is free or already p's: an index of that name on
// another table would pass for the build and fail its attach. PostgreSQL
// names the index it builds on a partition created or attached later from
// the partition's name and the index's column names, cut to 63 bytes, and
// the columns keep the name they had when the index was built: on a
// partition whose long name shares its first bytes with another's, the
// index up's counting index gets may take the name of the unique rule up
// dropped on the other, which down rebuilds under that name. Such an index
// of the run's own (attached to a counting, prefix or probe index of the
// layout) is renamed out of the way, to the name the run gives it; any
// other stops the run, naming it.
func (r *runner) freeName(ctx context.Context, stepName, pidx string, p partitionRef) error {
	var table, attachedTo, parentName string
	var onP bool
	err := r.conn.QueryRow(ctx, `SELECT x.indrelid::pg_catalog.regclass::pg_catalog.text, x.indrelid OPERATOR(pg_catalog.=) $2::pg_catalog.int8::pg_catalog.oid,
       coalesce((SELECT pp.relname::pg_catalog.text FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class pp ON pp.oid OPERATOR(pg_catalog.=) i.inhparent
                 WHERE i.inhrelid OPERATOR(pg_catalog.=) x.indexrelid), ''),
       coalesce((SELECT t.relname::pg_catalog.text FROM pg_catalog.pg_class t WHERE t.oid OPERATOR(pg_catalog.=) x.indrelid), '')
FROM pg_catalog.pg_index x WHERE x.indexrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1::pg_catalog.text)`, pidx, int64(p.oid)).Scan(&table, &onP, &attachedTo, &parentName)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && onP {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read index %s: %w", pidx, err)
	}
	suffix := ""
	for _, ci := range ourIndexes(r.l) {
		for _, sfx := range []string{"_concurrency_key_c_idx", "_concurrency_key_idx"} {
			if attachedTo == ci.name && suffix == "" && strings.HasSuffix(ci.name, sfx) {
				suffix = sfx
			}
		}
	}
	if attachedTo == probeIndexName(r.l.SkipTable()) {
		suffix = "_concurrency_skip_probe_idx"
	}
	to := indexName(parentName, suffix)
	if suffix == "" || (pgx.Identifier{p.schema, to}.Sanitize()) == pidx {
		return fmt.Errorf("partition %s: the name of the index to build on it, %s, is taken by an index on %s; rename that index (ALTER INDEX %s RENAME TO ...) and run again",
			p.quoted(), pidx, table, pidx)
	}
	rename := step{name: stepName + ": rename " + pidx + " on " + table + " out of the way", kind: stepTx, sql: "ALTER INDEX " + pidx + " RENAME TO " + layout.Ident(to) + ";"}
	r.printf("%s: %s, the name of the index to build on partition %s, is the name PostgreSQL gave the index it built on %s; renaming it to %s\n", stepName, pidx, p.quoted(), table, layout.Ident(to))
	_, _, err = r.runStep(ctx, rename)
	return err
}

// victimDeadlockTimeout is the deadlock_timeout of the run's session while
// it builds a partition's index (see deadlockVictimFirst).
const victimDeadlockTimeout = "50ms"

// deadlockVictimFirst lowers the session's deadlock_timeout for a
// partition's build, where the role may (a superuser, or one granted SET
// on it), and returns what restores it. A build on the DEFAULT partition
// closes a cycle with a CREATE TABLE ... PARTITION OF (it holds ACCESS
// EXCLUSIVE on the parent and waits for the build's lock on the DEFAULT
// partition, which it scans) and the writers queued behind the create
// (the build waits for their snapshots). PostgreSQL cancels the session
// whose deadlock_timeout runs out first once the cycle is closed: the
// build's, which closes it, runs out before a writer's unless that writer
// began waiting within a hair (1s minus 50ms) before; the build is then
// built again (runStep), and the writers and the create go on.
func (r *runner) deadlockVictimFirst(ctx context.Context) (restore func()) {
	if _, err := r.conn.Exec(ctx, "SET deadlock_timeout = '"+victimDeadlockTimeout+"'"); err != nil {
		return func() {}
	}
	return func() { _, _ = r.conn.Exec(ctx, "RESET deadlock_timeout") }
}

// indexState says whether the quoted index exists and is valid.
func indexState(ctx context.Context, q querier, index string) (exists, valid bool, err error) {
	err = q.QueryRow(ctx, `SELECT x.indisvalid FROM pg_catalog.pg_index x WHERE x.indexrelid = pg_catalog.to_regclass($1::pg_catalog.text)`, index).Scan(&valid)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("read index %s: %w", index, err)
	}
	return true, valid, nil
}

// unindexedPartitions lists the partitions of the quoted parent that have no
// index attached to the quoted parent index (every partition when index is
// "").
func unindexedPartitions(ctx context.Context, q querier, parent, index string) ([]partitionRef, error) {
	rows, err := q.Query(ctx, `SELECT p.oid::pg_catalog.int8, pn.nspname::pg_catalog.text, p.relname::pg_catalog.text, p.relkind::pg_catalog.text
FROM pg_catalog.pg_inherits i
JOIN pg_catalog.pg_class p ON p.oid OPERATOR(pg_catalog.=) i.inhrelid
JOIN pg_catalog.pg_namespace pn ON pn.oid OPERATOR(pg_catalog.=) p.relnamespace
WHERE i.inhparent OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1::pg_catalog.text)
  -- A partition pending detach (PostgreSQL 14+: an interrupted DETACH ...
  -- CONCURRENTLY) is no longer read through the parent, the parent's index
  -- is valid without it, and PostgreSQL refuses to attach an index of it.
  AND NOT coalesce((pg_catalog.to_jsonb(i) OPERATOR(pg_catalog.->>) 'inhdetachpending')::pg_catalog.bool, false)
  AND ($2::pg_catalog.text OPERATOR(pg_catalog.=) '' OR NOT EXISTS (
      SELECT 1 FROM pg_catalog.pg_inherits ii JOIN pg_catalog.pg_index cx ON cx.indexrelid OPERATOR(pg_catalog.=) ii.inhrelid
      WHERE ii.inhparent OPERATOR(pg_catalog.=) pg_catalog.to_regclass($2::pg_catalog.text) AND cx.indrelid OPERATOR(pg_catalog.=) p.oid))
ORDER BY 2, 3`, parent, index)
	if err != nil {
		return nil, fmt.Errorf("read the partitions of %s: %w", parent, err)
	}
	defer rows.Close()
	var out []partitionRef
	for rows.Next() {
		var p partitionRef
		var oid int64
		if err := rows.Scan(&oid, &p.schema, &p.name, &p.kind); err != nil {
			return nil, fmt.Errorf("read the partitions of %s: %w", parent, err)
		}
		p.oid = uint32(oid)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the partitions of %s: %w", parent, err)
	}
	return out, nil
}

// partitionedSQL renders, for plan and the step's record, what the build
// runs: the parent's index, then one build and attach per partition (the
// partitions known now; the run reads them again as it goes).
func partitionedSQL(pi *partitionedIndex, partitions []string, example string) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(pi.parentSQL) + "\n")
	fmt.Fprintf(&b, "-- then, for each partition without it (now %d: %s), one at a time:\n", len(partitions), strings.Join(partitions, ", "))
	b.WriteString("--   " + strings.TrimSpace(example) + "\n")
	fmt.Fprintf(&b, "--   ALTER INDEX %s ATTACH PARTITION <its index>;\n", pi.quotedIndex())
	b.WriteString("-- and again until none lacks it (a partition created meanwhile gets its index from PostgreSQL).")
	return b.String()
}

// countingIndexOn returns ci's build on a partitioned table: the parent's
// index ON ONLY the table, each partition's CONCURRENTLY under its own
// name (<partition>_concurrency_key_idx, as on a table of its own).
func countingIndexOn(l layout.Resolved, ci countingIndex, keyColumn string) (*partitionedIndex, error) {
	parentSQL, err := ci.render(l, keyColumn, l.Table(ci.table), layout.Ident(ci.name), true)
	if err != nil {
		return nil, err
	}
	suffix := "_concurrency_key_idx"
	if ci.prefix {
		suffix = "_concurrency_key_c_idx"
	}
	return &partitionedIndex{parent: l.Table(ci.table), schema: l.Schema, name: ci.name, parentSQL: parentSQL,
		partition: func(_ context.Context, _ querier, p partitionRef) (string, string, error) {
			name := indexName(p.name, suffix)
			sql, err := ci.render(l, keyColumn, p.quoted(), layout.Ident(name), false)
			return name, sql, err
		}}, nil
}

// probeIndexName is the name of down's probe index on the skip-metadata
// table (see probeStep).
func probeIndexName(table string) string { return indexName(table, "_concurrency_skip_probe_idx") }

// probeSQL is the probe index's statement: a partial index over the rows
// that hold skip metadata, so that whether any does is read from it in
// time independent of the table's size.
func probeSQL(head, index, on string) string {
	col := layout.Ident(layout.SkipMetadataColumn)
	return fmt.Sprintf("%s %s %s ((%s IS NOT NULL)) WHERE %s IS NOT NULL;", head, index, on, col, col)
}

// skipProbeQuery is the question the skip-metadata step asks under its
// ACCESS EXCLUSIVE lock: answered from the probe index (enable_seqscan is
// off in that transaction), never by reading the table.
func skipProbeQuery(table string) string {
	return "SELECT EXISTS (SELECT 1 FROM " + table + " WHERE " + layout.Ident(layout.SkipMetadataColumn) + " IS NOT NULL)"
}

// probeStep is down's step before the skip-metadata column's: it builds the
// probe index CONCURRENTLY (per partition on a partitioned table), while
// writers go on, so that the next step, under its ACCESS EXCLUSIVE lock,
// learns whether the column holds skip metadata from the index instead of
// scanning the table.
func probeStep(in *inspection) step {
	l := in.l
	st := l.SkipTable()
	table := l.Table(st)
	name := probeIndexName(st)
	s := step{name: "probe index for skip metadata on " + table + " (so that the next step does not read the table under its lock)", table: table,
		lock: "SHARE UPDATE EXCLUSIVE (writers go on)", kind: stepConcurrent, index: l.Table(name), grows: true}
	if t := in.table(st); t != nil && t.partitioned {
		pi := &partitionedIndex{parent: table, schema: l.Schema, name: name, parentSQL: probeSQL("CREATE INDEX IF NOT EXISTS", layout.Ident(name), "ON ONLY "+table),
			partition: func(_ context.Context, _ querier, p partitionRef) (string, string, error) {
				n := probeIndexName(p.name)
				return n, probeSQL("CREATE INDEX CONCURRENTLY", layout.Ident(n), "ON "+p.quoted()), nil
			}}
		s.partitioned, s.index = pi, ""
		s.lock = partitionedLock
		s.sql = partitionedSQL(pi, t.partitionNames(), probeSQL("CREATE INDEX CONCURRENTLY", "<name>", "ON <partition>"))
	} else {
		s.sql = probeSQL("CREATE INDEX CONCURRENTLY", layout.Ident(name), "ON "+table)
	}
	for _, ix := range in.indexes[st] {
		if ix.name == name && ix.valid {
			s.skip = "already built"
		}
	}
	return s
}

// partitionedLock is the lock line of a build on a partitioned table.
const partitionedLock = "SHARE UPDATE EXCLUSIVE per partition build (writers go on); SHARE on the parent and ACCESS EXCLUSIVE on each partition's new index for a moment (ON ONLY, ATTACH PARTITION: bounded wait, retried)"

// partitionNames lists t's partitions, quoted.
func (t tableInfo) partitionNames() []string {
	var out []string
	for _, p := range t.partitions {
		out = append(out, p.quoted())
	}
	return out
}

// onPartitions turns s, the build of ci, into its build on a partitioned
// table when t is one.
func onPartitions(s *step, l layout.Resolved, ci countingIndex, t *tableInfo) error {
	if !t.partitioned {
		return nil
	}
	pi, err := countingIndexOn(l, ci, t.keyColumn())
	if err != nil {
		return err
	}
	example, err := ci.render(l, t.keyColumn(), "<partition>", "<partition>_"+strings.TrimPrefix(ci.name, ci.table+"_"), false)
	if err != nil {
		return err
	}
	s.partitioned, s.index, s.lock = pi, "", partitionedLock
	s.sql = partitionedSQL(pi, t.partitionNames(), example)
	return nil
}

// savedTable is the table of the layout the saved rule s is on, or nil.
func (in *inspection) savedTable(s SavedUnique) *tableInfo {
	if in.version == nil {
		return nil
	}
	for i, v := range in.version.saved {
		if v.Table != s.Table || v.Index != s.Index {
			continue
		}
		for j, t := range in.tables {
			if t.exists && t.oid == in.version.savedTables[i] {
				return &in.tables[j]
			}
		}
	}
	return nil
}

// rebuildOnPartitions turns st, down's rebuild of the saved unique rule s,
// into its build on the partitioned table t: the parent's index ON ONLY
// (its saved definition), each partition's CONCURRENTLY under its saved
// name and definition; a partition created since up gets the parent's
// definition under the name <partition>_unique_rule_idx.
func (r *runner) rebuildOnPartitions(st *step, s SavedUnique, t *tableInfo) error {
	rest, ok := strings.CutPrefix(s.Rebuild, "CREATE UNIQUE INDEX ")
	if !ok || !strings.Contains(rest, " ON ONLY ") {
		return fmt.Errorf("the saved definition of %s on the partitioned table %s is not a unique index ON ONLY the table (%q); restore it by hand from %s",
			s.Index, s.Table, s.Rebuild, r.l.Table(layout.VersionTable))
	}
	pi := &partitionedIndex{parent: r.l.Table(t.name), schema: r.l.Schema, name: s.Index, parentSQL: "CREATE UNIQUE INDEX IF NOT EXISTS " + rest + ";", unique: true}
	pi.partition = func(ctx context.Context, q querier, p partitionRef) (string, string, error) {
		for _, sp := range s.Partitions {
			var oid int64
			err := q.QueryRow(ctx, "SELECT coalesce(pg_catalog.to_regclass($1::pg_catalog.text)::pg_catalog.oid::pg_catalog.int8, 0)", sp.Table).Scan(&oid)
			if err != nil {
				return "", "", fmt.Errorf("read partition %s: %w", sp.Table, err)
			}
			def, ok := strings.CutPrefix(sp.Rebuild, "CREATE UNIQUE INDEX ")
			if oid == int64(p.oid) && ok {
				return sp.Index, "CREATE UNIQUE INDEX CONCURRENTLY " + def + ";", nil
			}
		}
		// A partition created since up: the parent's definition, on it.
		var tail string
		var matches bool
		err := q.QueryRow(ctx, `SELECT pg_catalog.starts_with($1::pg_catalog.text, h.head), pg_catalog.substr($1::pg_catalog.text, pg_catalog.length(h.head) OPERATOR(pg_catalog.+) 1)
FROM (SELECT 'CREATE UNIQUE INDEX ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident($2::pg_catalog.text) OPERATOR(pg_catalog.||) ' ON ONLY '
             OPERATOR(pg_catalog.||) pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname) AS head
      FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
      WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($3::pg_catalog.text)) AS h`, s.Rebuild, s.Index, pi.parent).Scan(&matches, &tail)
		if err != nil {
			return "", "", fmt.Errorf("derive the unique rule %s for partition %s: %w", s.Index, p.quoted(), err)
		}
		if !matches || !strings.HasPrefix(tail, " USING ") {
			return "", "", fmt.Errorf("derive the unique rule %s for partition %s, created after up: its saved definition %q does not read as expected; build it by hand", s.Index, p.quoted(), s.Rebuild)
		}
		name := indexName(p.name, "_unique_rule_idx")
		return name, "CREATE UNIQUE INDEX CONCURRENTLY " + layout.Ident(name) + " ON " + p.quoted() + tail + ";", nil
	}
	var example string
	if len(s.Partitions) > 0 {
		example = "CREATE UNIQUE INDEX CONCURRENTLY " + strings.TrimPrefix(s.Partitions[0].Rebuild, "CREATE UNIQUE INDEX ") + ";"
	}
	st.partitioned, st.index, st.lock = pi, "", partitionedLock
	st.sql = partitionedSQL(pi, t.partitionNames(), example)
	return nil
}

// dropPartitionedUnique leaves nothing of a failed rebuild on a partitioned
// table: the parent's index with every partition's attached to it (in a
// short transaction, bounded wait), then the INVALID index of the build
// that failed (CONCURRENTLY). Until then they would reject duplicates.
func (r *runner) dropPartitionedUnique(ctx context.Context, st step) {
	pi := st.partitioned
	drop := step{name: st.name + ": drop what the failed build left", kind: stepTx, exclusive: []string{pi.parent}, sql: "DROP INDEX IF EXISTS " + pi.quotedIndex() + ";"}
	_, _, _ = r.runStep(ctx, drop)
	if pi.building != "" {
		_, _ = r.conn.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+pi.building)
	}
}

// partitionedForFiles refuses, for the golang-migrate files, a partitioned
// table on which the migration builds an index (a counting index, the
// unique rule down rebuilds): each partition's build and attach depend on
// the partitions that exist when the files run, which fixed files cannot
// know. Up and Down do it.
func (in *inspection) partitionedForFiles() []Finding {
	var out []Finding
	for _, t := range in.tables {
		if !t.partitioned {
			continue
		}
		builds := slices.Contains(in.l.ActiveTables(), t.name)
		for _, ix := range in.indexes[t.name] {
			builds = builds || ix.unique && !ix.primary && ix.coversKey()
		}
		if in.version != nil {
			for _, s := range in.version.saved {
				st := in.savedTable(s)
				builds = builds || st != nil && st.name == t.name
			}
		}
		if builds {
			table := in.l.Table(t.name)
			out = append(out, Finding{Fatal: true, Kind: "partitioned_or_inherited_table", Object: table,
				Message: fmt.Sprintf("table %s is partitioned: golang-migrate files cannot build its indexes online (ON ONLY the table, then CONCURRENTLY and ATTACH PARTITION for each partition that exists when they run); migrate it with migrate-unique up and down, which do", table),
				Action:  "use migrate-unique up and down"})
		}
	}
	return out
}

// cutoverDropGrows names the unique rules the cutover drops that have no
// online drop: a unique constraint (there is no DROP CONSTRAINT
// CONCURRENTLY) or a unique index on a partitioned table (no DROP INDEX
// CONCURRENTLY there). PostgreSQL deletes their files at commit after it
// has released the cutover's locks (xact.c, CommitTransaction), so the
// writers' wait stays independent of their size and only the cutover's
// commit grows with it. "" when there is none.
func (in *inspection) cutoverDropGrows() string {
	var names []string
	var bytes int64
	for _, t := range in.tables {
		for _, ix := range in.indexes[t.name] {
			if ix.unique && !ix.primary && ix.coversKey() && (ix.constraint != "" || t.partitioned) {
				names = append(names, in.l.Table(ix.name))
				bytes += ix.bytes
			}
		}
	}
	if len(names) == 0 {
		return ""
	}
	return droppedFilesLock(strings.Join(names, ", "), bytes)
}

// droppedFilesLock is the lock line of a step that drops, under ACCESS
// EXCLUSIVE, the quoted indexes (bytes in all) that have no online drop:
// the locks cover catalog work only, and PostgreSQL deletes the files at
// commit once it has released them (docs/migration.md, "Indexes with no
// online drop", measured).
func droppedFilesLock(indexes string, bytes int64) string {
	return fmt.Sprintf("ACCESS EXCLUSIVE (short), bounded wait; drops %s, %s, which has no online drop: the lock covers catalog work only, and PostgreSQL deletes the files at commit after releasing it, so writers do not wait for that, while this step's commit returns only when it is done (about 0.25 to 1.3 ms per MB measured; docs/migration.md, \"Indexes with no online drop\")",
		indexes, megabytes(bytes))
}

// megabytes renders a size in MB, one decimal.
func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }

// deferredUniqueDrops are the steps after the cutover that drop, with DROP
// INDEX CONCURRENTLY, the bare unique indexes on the key of tables that are
// not partitioned: the cutover renamed the column and saved their
// definitions but left them, so that the cutover's commit does not wait
// for the deletion of their files (PostgreSQL deletes them after releasing
// the locks, but the commit returns only then). Until the step ends the old rule still holds (the compat
// runtime admits what it allows and reports the rest as skips).
func deferredUniqueDrops(in *inspection) ([]step, error) {
	var out []step
	seen := map[string]bool{}
	add := func(table, name string) error {
		q := in.l.Table(name)
		if seen[q] {
			return nil
		}
		seen[q] = true
		sql, err := dropIndexSQL(in.l, name)
		if err != nil {
			return err
		}
		out = append(out, step{name: "drop the unique rule " + layout.Ident(name) + " CONCURRENTLY (saved at the cutover)", table: in.l.Table(table),
			lock: "SHARE UPDATE EXCLUSIVE (writers go on)", kind: stepConcurrent, sql: sql, phase: phaseComplete})
		return nil
	}
	for _, t := range in.tables {
		if t.partitioned {
			continue
		}
		for _, ix := range in.indexes[t.name] {
			if ix.unique && !ix.primary && ix.coversKey() && ix.constraint == "" {
				if err := add(t.name, ix.name); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}
