package migrations

import (
	"fmt"
	"slices"
	"strings"

	"github.com/migrate-unique/migrate-unique/layout"
)

// On plain-jobs' own tables, up ends in the schema that plain-jobs 0.38.0's
// own migration leaves (0007_remove_jobrequest_plainjobs_jobrequest_unique_job_class_key_and_more,
// github.com/dropseed/plain commit 01b6986d798b4df9f80370c8bcbbdbc1b66f4783),
// so that a plain-jobs user can record 0007 as applied and go on with
// plain-jobs' later migrations. 0007 drops the unique rule and four key
// indexes, renames unique_key on the three tables, and creates seven
// indexes. Up does the same online: the four key indexes 0007 recreates
// under new names are renamed (an index follows its column's rename, so
// plainjobs_j_unique__42f6a6_idx on unique_key is, after the cutover,
// exactly 0007's plainjobs_j_concurr_c10926_idx on concurrency_key), in
// the cutover's transaction; the three uuid indexes are built
// CONCURRENTLY before it. The two (job_class, key) indexes are also the
// counting indexes, so up builds no index of its own on these tables (its
// generic counting index name, plainjobs_jobrequest_concurrency_key_idx,
// is the name plain-jobs 0.46.5 gives to its single-column key index).
//
// 0007 also changes priority, retries and retry_attempt from integer to
// smallint, which rewrites each table under ACCESS EXCLUSIVE; up leaves
// them integer (docs/migration.md, "plain-jobs users", says why and what
// it means).

// plainJobsIndex is one index plain-jobs' 0007 creates.
type plainJobsIndex struct {
	table string // unquoted table
	name  string // the name 0007 gives it
	// columns are its key columns after 0007 (concurrency_key for the key).
	columns []string
	// legacy is the 0.37 index on the same columns (unique_key for the key)
	// that 0007 drops, and up renames instead; "" for none.
	legacy string
}

// plainJobs0007Indexes are 0007's AddIndex operations, in its order.
var plainJobs0007Indexes = []plainJobsIndex{
	{layout.PlainJobsProcesses, "plainjobs_j_concurr_ad4464_idx", []string{layout.KeyColumn}, "plainjobs_j_unique__67172c_idx"},
	{layout.PlainJobsProcesses, "plainjobs_j_uuid_cd8cd3_idx", []string{"uuid"}, ""},
	{layout.PlainJobsProcesses, "job_concurrency_key", []string{"job_class", layout.KeyColumn}, "job_class_unique_key"},
	{layout.PlainJobsRequests, "plainjobs_j_concurr_c10926_idx", []string{layout.KeyColumn}, "plainjobs_j_unique__42f6a6_idx"},
	{layout.PlainJobsRequests, "plainjobs_j_uuid_c41c85_idx", []string{"uuid"}, ""},
	{layout.PlainJobsRequests, "job_request_concurrency_key", []string{"job_class", layout.KeyColumn}, "job_request_class_unique_key"},
	{layout.PlainJobsResults, "plainjobs_j_uuid_b33b4c_idx", []string{"uuid"}, ""},
}

// plainJobsCounting returns the 0007 index that counts on table, the
// (job_class, concurrency_key) one.
func plainJobsCounting(table string) (plainJobsIndex, bool) {
	for _, pi := range plainJobs0007Indexes {
		if pi.table == table && len(pi.columns) == 2 {
			return pi, true
		}
	}
	return plainJobsIndex{}, false
}

// columnsWith renders pi's columns with the key column named key, quoted.
func (pi plainJobsIndex) columnsWith(key string) string {
	cols := make([]string, len(pi.columns))
	for i, c := range pi.columns {
		if c == layout.KeyColumn {
			c = key
		}
		cols[i] = layout.Ident(c)
	}
	return strings.Join(cols, ", ")
}

// matches reports whether ix is a valid plain btree index on pi's columns,
// the key column under either name.
func (pi plainJobsIndex) matches(ix indexInfo) bool {
	if !ix.valid || ix.unique || ix.method != "btree" || ix.predicate != "" || ix.hasExpressionsOrInclude || len(ix.columns) != len(pi.columns) {
		return false
	}
	for i, c := range pi.columns {
		got := strings.Trim(ix.columns[i], `"`)
		if got != c && !(c == layout.KeyColumn && got == layout.LegacyKeyColumn) {
			return false
		}
	}
	return true
}

// find returns the index named name on pi's table.
func (in *inspection) find(table, name string) (indexInfo, bool) {
	for _, ix := range in.indexes[table] {
		if ix.name == name {
			return ix, true
		}
	}
	return indexInfo{}, false
}

// renamedAtCutover reports whether the cutover gives pi its name by
// renaming its 0.37 index: pi does not exist yet and the 0.37 index is
// equivalent.
func (in *inspection) renamedAtCutover(pi plainJobsIndex) bool {
	if pi.legacy == "" {
		return false
	}
	if _, ok := in.find(pi.table, pi.name); ok {
		return false
	}
	old, ok := in.find(pi.table, pi.legacy)
	return ok && pi.matches(old)
}

// laterName returns a valid index equivalent to pi under another name than
// 0007's and 0.37's: plain-jobs' later migrations (0010, plain-jobs 0.46.5)
// and its index convergence (0.47.1+) rename 0007's indexes, and up must
// then not build them again.
func (in *inspection) laterName(pi plainJobsIndex) (indexInfo, bool) {
	for _, ix := range in.indexes[pi.table] {
		if ix.name != pi.name && ix.name != pi.legacy && pi.matches(ix) {
			return ix, true
		}
	}
	return indexInfo{}, false
}

// plainJobsIndexSteps are up's steps for 0007's indexes on plain-jobs'
// tables: each is there already, renamed from its 0.37 index at the
// cutover, or built CONCURRENTLY under 0007's name. Once the cutover is
// done, an equivalent index under a later plain-jobs name counts too.
func plainJobsIndexSteps(in *inspection) ([]step, error) {
	l := in.l
	var steps []step
	for _, pi := range plainJobs0007Indexes {
		t := in.table(pi.table)
		sql := fmt.Sprintf("CREATE INDEX CONCURRENTLY %s ON %s (%s);", layout.Ident(pi.name), l.Table(pi.table), pi.columnsWith(t.keyColumn()))
		s := step{name: "plain-jobs 0007 index " + layout.Ident(pi.name) + " on " + l.Table(pi.table), table: l.Table(pi.table),
			lock: "SHARE UPDATE EXCLUSIVE (writers go on)", kind: stepConcurrent, sql: sql, index: l.Table(pi.name), grows: true}
		ix, exists := in.find(pi.table, pi.name)
		later, hasLater := in.laterName(pi)
		switch {
		case exists && ix.valid && pi.matches(ix):
			s.skip = "already there"
		case !exists && t.partitioned:
			// CREATE INDEX CONCURRENTLY does not run on a partitioned
			// table (plain-jobs' own tables are not partitioned).
			s.skip = "the table is partitioned, where CREATE INDEX CONCURRENTLY does not run: build it by hand (docs/migration.md, \"plain-jobs users\")"
		case !exists && hasLater && !in.needsCutover():
			s.skip = "there as " + layout.Ident(later.name) + ", the name plain-jobs' later migrations give it"
		case in.renamedAtCutover(pi):
			s.skip = "the cutover renames " + layout.Ident(pi.legacy) + " to it (the same index once the key column is renamed)"
		case exists && ix.valid:
			// Some other index holds 0007's name: building would fail, and
			// dropping it is not ours to do.
			return nil, fmt.Errorf("index %s on %s is not plain-jobs 0007's (%s) but %s: rename or drop it (DROP INDEX CONCURRENTLY), then run up again; nothing was changed",
				layout.Ident(pi.name), l.Table(pi.table), pi.columnsWith(layout.KeyColumn), ix.definition)
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// plainJobsLeftoverSteps drop, CONCURRENTLY, a 0.37 index that 0007 drops
// and the cutover did not rename (0007's index was there already, or had
// to be built because the 0.37 one was not equivalent).
func plainJobsLeftoverSteps(in *inspection) ([]step, error) {
	l := in.l
	var steps []step
	for _, pi := range plainJobs0007Indexes {
		if pi.legacy == "" {
			continue
		}
		sql, err := dropIndexSQL(l, pi.legacy)
		if err != nil {
			return nil, err
		}
		s := step{name: "drop plain-jobs 0.37 index " + layout.Ident(pi.legacy) + " (0007 drops it)", table: l.Table(pi.table),
			lock: "SHARE UPDATE EXCLUSIVE (writers go on)", kind: stepConcurrent, sql: sql}
		if _, ok := in.find(pi.table, pi.legacy); !ok || in.renamedAtCutover(pi) {
			s.skip = "not there, or renamed at the cutover"
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// indexRename is one ALTER INDEX ... RENAME the cutover (From to To) or
// the cutover back (To to From) makes, when the old name exists and the new
// one does not. From and To are bare names, FromQ and ToQ schema-qualified,
// all quoted.
type indexRename struct{ From, To, FromQ, ToQ string }

// plainJobsRenames are the renames of l's cutover: none unless l is
// plain-jobs' layout.
func plainJobsRenames(l layout.Resolved) []indexRename {
	if !isPlainJobs(l) {
		return nil
	}
	var out []indexRename
	for _, pi := range plainJobs0007Indexes {
		if pi.legacy != "" {
			out = append(out, indexRename{From: layout.Ident(pi.legacy), To: layout.Ident(pi.name), FromQ: l.Table(pi.legacy), ToQ: l.Table(pi.name)})
		}
	}
	return out
}

// plainJobsDrift lists 0007's indexes that a migrated plain-jobs layout
// lacks (up builds them again).
func (in *inspection) plainJobsDrift() []string {
	if !isPlainJobs(in.l) {
		return nil
	}
	var out []string
	for _, pi := range plainJobs0007Indexes {
		if _, ok := in.laterName(pi); ok {
			continue
		}
		if t := in.table(pi.table); t != nil && t.partitioned {
			continue // not built by up (plainJobsIndexSteps)
		}
		if ix, ok := in.find(pi.table, pi.name); !ok || !pi.matches(ix) {
			out = append(out, fmt.Sprintf("plain-jobs 0007 index %s on %s is missing or not (%s)", layout.Ident(pi.name), in.l.Table(pi.table), pi.columnsWith(layout.KeyColumn)))
		}
	}
	return out
}

// plainJobsDownSteps drop, CONCURRENTLY, the 0007 indexes that 0.37 does
// not have (the uuid ones); the others are renamed back by the cutover
// back.
func plainJobsDownSteps(in *inspection) ([]step, error) {
	l := in.l
	var steps []step
	for _, pi := range plainJobs0007Indexes {
		if pi.legacy != "" {
			continue
		}
		sql, err := dropIndexSQL(l, pi.name)
		if err != nil {
			return nil, err
		}
		s := step{name: "drop plain-jobs 0007 index " + layout.Ident(pi.name) + " (0.37 has none)", table: l.Table(pi.table),
			lock: "SHARE UPDATE EXCLUSIVE (writers go on)", kind: stepConcurrent, sql: sql}
		if _, ok := in.find(pi.table, pi.name); !ok {
			s.skip = "not there"
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// plainJobsOurs lists the 0007 index names up may create or rename.
func plainJobsOurs(l layout.Resolved) []countingIndex {
	if !isPlainJobs(l) {
		return nil
	}
	var out []countingIndex
	for _, pi := range plainJobs0007Indexes {
		if len(pi.columns) != 2 { // the counting ones are in countingIndexes
			out = append(out, countingIndex{table: pi.table, name: pi.name})
		}
	}
	return out
}

// isPlainJobs0007 reports whether name is one of 0007's indexes on l,
// plain-jobs' layout.
func isPlainJobs0007(l layout.Resolved, name string) bool {
	return isPlainJobs(l) && slices.ContainsFunc(plainJobs0007Indexes, func(pi plainJobsIndex) bool { return pi.name == name })
}

// plainJobsFileIndexes are the 0007 indexes the golang-migrate files build:
// the uuid ones always, a renamed one only when in (the database FilesFor
// read) shows its 0.37 index missing.
func plainJobsFileIndexes(in *inspection) []plainJobsIndex {
	var out []plainJobsIndex
	for _, pi := range plainJobs0007Indexes {
		if pi.legacy == "" || in != nil && !in.renamedAtCutover(pi) && !slices.ContainsFunc(in.indexes[pi.table], func(ix indexInfo) bool { return ix.name == pi.name }) {
			out = append(out, pi)
		}
	}
	return out
}
