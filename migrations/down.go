package migrations

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/internal/qualify"
	"github.com/migrate-unique/migrate-unique/layout"
)

// Down rolls Up back online. A read-only scan first looks for groups that
// break the saved unique rule; if any does, Down returns a *DuplicatesError
// listing every one of them before any change, deleting nothing. Otherwise it
// rebuilds the saved rule CONCURRENTLY, attaches it as it was (constraint or
// index) and renames the key column back in one short transaction, drops the
// counting indexes Up built, and drops the runtime's tables and column unless
// they hold operator data (Report.Kept lists what stayed). On a legacy
// database it changes nothing.
func Down(ctx context.Context, databaseURL string, l layout.Layout, opts Options) (_ *Report, err error) {
	defer func() { err = interrupted(ctx, err) }()
	start := time.Now()
	r, in, rep, err := begin(ctx, databaseURL, l, opts, "down")
	if err != nil {
		return nil, err
	}
	defer r.close()
	if r.opts.Drain {
		set, derr := r.drain(ctx, in)
		if derr != nil {
			return rep, derr
		}
		if set != nil {
			if in, derr = r.inspect(ctx); derr != nil {
				return rep, derr
			}
			defer func() {
				if err != nil {
					// Put back what the drain set (idempotent when the
					// restore step ran): whoever runs next, up or down,
					// finds the operators' overrides as they were.
					rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pgurl.CancelWait)
					defer cancel()
					if r.restoreDrained(rctx, set) == nil {
						r.printf("drain: restored the limit overrides of %d group(s)\n", len(set))
					}
				}
			}()
		}
	}
	findings, steps, err := r.downWork(ctx, in)
	for _, f := range findings {
		rep.Findings = append(rep.Findings, f)
		r.printf("preflight %s\n", f)
	}
	if err != nil {
		return nil, err
	}
	if len(steps) == 0 && r.opts.ToExpanded && in.state() == Expanded {
		rep.After = Expanded
		r.printf("already expanded: nothing to roll back to it (down without --to-expanded goes on to the legacy layout)\n")
		return rep, nil
	}
	if len(steps) == 0 {
		rep.After = Legacy
		r.printf("not migrated: nothing to roll back\n")
		return rep, nil
	}
	if in.version != nil {
		rep.Saved = in.version.saved
	}
	after, err := r.run(ctx, steps, rep, start)
	if after != nil {
		rep.KeptObjects = kept(ctx, r, after)
		rep.Kept = keptLines(rep.KeptObjects)
	}
	if err != nil {
		return rep, err
	}
	r.printKept(rep)
	r.printf("%s\n", rep.Summary())
	return rep, nil
}

func (r *runner) printKept(rep *Report) {
	for _, k := range rep.Kept {
		r.printf("kept %s\n", k)
	}
	if len(rep.KeptObjects) > 0 {
		r.printf("the queue is rolled back; the runtime is not in use. Run 'migrate-unique down' again once they hold nothing, or 'migrate-unique down --drop-operator-data' to drop them with their rows now; 'migrate-unique up' migrates again and uses them\n")
	}
}

// downWork is what Down does from in, for Down and PlanDown alike: the
// findings beyond the preflight's, and the steps (none: nothing to roll
// back); with a *DuplicatesError when groups break a saved unique rule
// (the steps are then those down would run once they are resolved). On a
// legacy layout it is what an earlier down kept (runtime tables, the
// skip-metadata column), dropped again.
func (r *runner) downWork(ctx context.Context, in *inspection) ([]Finding, []step, error) {
	if r.opts.ToExpanded && (in.state() == Expanded || in.state() == Legacy) {
		return nil, nil, nil
	}
	if in.state() == Legacy {
		if !in.runtimeLeft() {
			return nil, nil, nil
		}
		steps, err := r.runtimeDownSteps(in)
		return nil, steps, err
	}
	var saved []SavedUnique
	if in.version != nil {
		saved = in.version.saved
	}
	var fs []Finding
	if len(saved) == 0 && in.needsRenameBack() {
		fs = append(fs, Finding{Kind: "no_saved_rule", Message: "no unique rule was saved for this layout (it was not migrated by this tool, or its cutover never ran): down renames the column back but restores no unique rule"})
	}
	vt := r.l.Table(layout.VersionTable)
	for _, s := range saved {
		if _, err := s.concurrentRebuild(vt); errors.Is(err, ErrSavedRule) {
			fs = append(fs, Finding{Fatal: true, Kind: "saved_rule", Object: layout.Ident(s.Index), Message: err.Error(),
				Action: "rebuild the unique rule by hand from its saved definition, then run down again"})
		}
	}
	if hasFatal(fs) {
		return fs, nil, &PreflightError{Findings: fs}
	}
	groups, err := scanDuplicates(ctx, r.conn, r.l, saved)
	if err != nil {
		return fs, nil, err
	}
	steps, err := r.downSteps(in, saved)
	if err != nil {
		return fs, nil, err
	}
	if len(groups) > 0 {
		// The steps come with the refusal: plan --down lists what down
		// would run once the groups are resolved; Down runs none of them.
		return fs, steps, &DuplicatesError{Groups: groups}
	}
	return fs, steps, nil
}

// runtimeLeft reports runtime tables or the skip-metadata column left in
// place by an earlier down.
func (in *inspection) runtimeLeft() bool {
	for _, t := range runtimeTables {
		if in.runtime[t.name] {
			return true
		}
	}
	return in.skipColumn
}

// concurrentRebuild is the statement that rebuilds s without blocking
// writes: its saved definition, built CONCURRENTLY. versionTable names where
// it was saved, for the error when the definition is not a unique index.
func (s SavedUnique) concurrentRebuild(versionTable string) (string, error) {
	def, ok := strings.CutPrefix(s.Rebuild, "CREATE UNIQUE INDEX ")
	if !ok {
		return "", fmt.Errorf("the saved definition of %s is not a unique index (%q); restore it by hand from %s", s.Index, s.Rebuild, versionTable)
	}
	q, err := concurrentUnique(def)
	if err != nil {
		return "", fmt.Errorf("%w: the saved definition of %s (%q) %v; restore it by hand from %s", ErrSavedRule, s.Index, s.Rebuild, err, versionTable)
	}
	return q, nil
}

// concurrentUnique is CREATE UNIQUE INDEX CONCURRENTLY def, def being what
// follows CREATE UNIQUE INDEX in a pg_get_indexdef read under the pinned
// search_path. That rendering names pg_catalog's operators, functions and
// types bare (and every other schema's with their schema); qualified, the
// statement builds the same index on any search_path: the golang-migrate
// files run on the application's.
func concurrentUnique(def string) (string, error) {
	q, err := qualify.SQL("CREATE UNIQUE INDEX CONCURRENTLY " + def)
	if err != nil {
		return "", fmt.Errorf("cannot be replayed exactly on any search_path: %w", err)
	}
	return q, nil
}

func (r *runner) downSteps(in *inspection, saved []SavedUnique) ([]step, error) {
	l := in.l
	d := newTmplData(l, r.opts.LockTimeout)
	var steps []step
	for _, s := range saved {
		def, err := s.concurrentRebuild(d.VersionTable)
		if err != nil {
			return nil, err
		}
		dd := d
		dd.Definition = def
		sql, err := render("rebuild.down.sql.tmpl", dd)
		if err != nil {
			return nil, err
		}
		index := l.Table(s.Index)
		st := step{name: "rebuild unique rule " + layout.Ident(s.Index), table: s.Table, lock: "SHARE UPDATE EXCLUSIVE (writers go on)",
			kind: stepConcurrent, sql: sql, index: index, unique: true, grows: true}
		if t := in.savedTable(s); t != nil && t.partitioned {
			if err := r.rebuildOnPartitions(&st, s, t); err != nil {
				return nil, err
			}
		}
		st.onError = func(ctx context.Context, err error) error {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
				return err
			}
			// A duplicate arrived after the scan: leave nothing behind.
			if st.partitioned != nil {
				r.dropPartitionedUnique(ctx, st)
			} else {
				_, _ = r.conn.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+index)
			}
			groups, scanErr := scanDuplicates(ctx, r.conn, l, []SavedUnique{s})
			if scanErr != nil || len(groups) == 0 {
				return fmt.Errorf("rebuild %s: %w", s.Index, err)
			}
			return &DuplicatesError{Groups: groups}
		}
		steps = append(steps, st)
	}
	sql, err := render("cutover.down.sql.tmpl", d)
	if err != nil {
		return nil, err
	}
	back := step{name: "cutover back: attach the unique rule, rename " + layout.KeyColumn + " to " + layout.LegacyKeyColumn, table: strings.Join(d.Tables, ", "),
		lock: "ACCESS EXCLUSIVE (short)", kind: stepTx, sql: sql, exclusive: cutoverLockOrder(l)}
	renamed := len(saved) > 0
	for _, t := range in.tables {
		renamed = renamed || t.columns[layout.KeyColumn]
	}
	if !renamed {
		back.skip = "already done"
	}
	// Where a version schema stays or is made, the old version may write
	// again beside the new one: the enqueue lock comes back with the unique
	// rule (enqueuelock.go).
	lockBack := in.vs != nil && (in.vs.exists && in.vs.ours || r.opts.ToExpanded)
	if lockBack {
		sql := enqueueLockCreateSQL(l, in.vs.name)
		if in.vs.asCreator(in) {
			sql = in.access.setRole() + sql + in.access.resetRole()
		}
		back.sql += sql
		back.name += ", the enqueue lock"
	}
	steps = append(steps, back)
	if r.opts.ToExpanded {
		// The reverse of complete: the unique rule and the old column name
		// back, what expand made kept, the version schema made if missing
		// (before the cutover back: the new version reads it throughout).
		if vs := versionSchemaStep(in); vs.skip == "" {
			steps = append([]step{vs}, steps...)
		}
		if rs, ok := restoreStep(in); ok {
			steps = append(steps, rs)
		}
		return append(steps, recordExpandedStep(in)), nil
	}
	for _, ci := range ourIndexes(l) {
		if isPlainJobs0007(l, ci.name) {
			continue // renamed back by the cutover back, or dropped below
		}
		sql, err := dropIndexSQL(l, ci.name)
		if err != nil {
			return nil, err
		}
		st := step{name: "drop counting index " + layout.Ident(ci.name), table: l.Table(ci.table), lock: "SHARE UPDATE EXCLUSIVE (writers go on)", kind: stepConcurrent, sql: sql}
		if t := in.table(ci.table); t != nil && t.partitioned {
			// No DROP INDEX CONCURRENTLY on a partitioned index: a short
			// transaction drops it with its partitions' (catalog work under
			// the lock; the files are deleted after it is released).
			st.kind, st.exclusive, st.sql = stepTx, []string{l.Table(ci.table)}, "DROP INDEX IF EXISTS "+l.Table(ci.name)+";"
			var size int64
			for _, ix := range in.indexes[ci.table] {
				if ix.name == ci.name {
					size = ix.bytes
				}
			}
			st.lock = droppedFilesLock(l.Table(ci.name)+" on the table and its partitions", size)
			st.grows, st.dropsFiles = true, true
		}
		built := false
		for _, ix := range in.ours() {
			built = built || ix.name == ci.name
		}
		if built {
			// An index up never built (an equivalent one was reused, or
			// the key sorts bytewise) is no step of down at all.
			steps = append(steps, st)
		}
	}
	if isPlainJobs(l) {
		pj, err := plainJobsDownSteps(in)
		if err != nil {
			return nil, err
		}
		steps = append(steps, pj...)
	}
	if rs, ok := restoreStep(in); ok {
		steps = append(steps, rs)
	}
	rt, err := r.runtimeDownSteps(in)
	if err != nil {
		return nil, err
	}
	steps = append(steps, rt...)
	if vs := versionSchemaDropStep(in, ""); vs.skip == "" {
		if in.vs.enqueueLock || lockBack && back.skip == "" {
			steps = append(steps, enqueueLockDropStep(in))
		}
		steps = append(steps, vs)
	}
	if sql, err = render("version_table.down.sql.tmpl", d); err != nil {
		return nil, err
	}
	steps = append(steps, step{name: "version table", table: d.VersionTable, lock: "none on the queue", kind: stepTx, sql: sql})
	return steps, nil
}

// runtimeDownSteps are the steps that drop the runtime's tables and the
// skip-metadata column, keeping those that hold operator data unless
// DropOperatorData. The tables are the run's own (no lock on the queue);
// the column's step locks its queue table ACCESS EXCLUSIVE, and learns
// whether any row holds skip metadata from the probe index the step before
// it builds CONCURRENTLY, so that it never reads the table under that lock.
func (r *runner) runtimeDownSteps(in *inspection) ([]step, error) {
	d := newTmplData(in.l, r.opts.LockTimeout)
	name := "runtime tables (unless they hold operator data)"
	if r.opts.DropOperatorData {
		name = "runtime tables, with their operator data (--drop-operator-data)"
		for i := range d.RuntimeTables {
			d.RuntimeTables[i].KeepWhen = ""
		}
		d.DropOperatorData = true
	}
	skipTable := d.SkipTable
	d.SkipTable = "" // its own step below
	sql, err := render("runtime.down.sql.tmpl", d)
	if err != nil {
		return nil, err
	}
	rt := step{name: name, table: runtimeTableList(d), lock: "none on the queue", kind: stepTx, sql: sql, skip: "nothing to drop"}
	for _, t := range runtimeTables {
		if in.runtime[t.name] {
			rt.skip = ""
		}
	}
	steps := []step{rt}
	if !in.skipColumn {
		return steps, nil
	}
	d.SkipTable = skipTable
	d.Index = in.l.Table(probeIndexName(in.l.SkipTable()))
	d.Probe = skipProbeQuery(skipTable)
	if sql, err = render("skip_column.down.sql.tmpl", d); err != nil {
		return nil, err
	}
	sc := step{name: "skip-metadata column (unless it holds skip metadata)", table: skipTable,
		lock: "ACCESS EXCLUSIVE (short: reads the probe index, never the table; drops a column)", kind: stepTx, sql: sql, exclusive: []string{skipTable}}
	if r.opts.DropOperatorData {
		sc.name = "skip-metadata column, with its skip metadata (--drop-operator-data)"
		sc.lock = "ACCESS EXCLUSIVE (short: drops a column)"
	} else {
		steps = append(steps, probeStep(in))
	}
	return append(steps, sc), nil
}

// KeptObject is a runtime table or column that down left in place because
// it holds operator data.
type KeptObject struct {
	// Table is the quoted table; Column the column, or "" for the table.
	Table  string `json:"table"`
	Column string `json:"column"`
	// Rows counts the rows that hold operator data.
	Rows int64 `json:"rows"`
	// Why says what the rows are and why down keeps them; Remove how to
	// get rid of them.
	Why    string `json:"why"`
	Remove string `json:"remove"`
}

func keptLines(ks []KeptObject) []string {
	var out []string
	for _, k := range ks {
		what := k.Table
		if k.Column != "" {
			what += "." + k.Column
		}
		out = append(out, fmt.Sprintf("%s: %s; %s", what, k.Why, k.Remove))
	}
	return out
}

// kept lists what down left in place because it holds operator data.
func kept(ctx context.Context, r *runner, in *inspection) []KeptObject {
	var out []KeptObject
	l := in.l
	count := func(sql string) int64 {
		var n int64
		_ = r.conn.QueryRow(ctx, sql).Scan(&n)
		return n
	}
	for _, rt := range runtimeTables {
		if !in.runtime[rt.name] {
			continue
		}
		t := l.Table(rt.name)
		k := KeptObject{Table: t}
		switch rt.name {
		case layout.LimitsTable:
			k.Rows = count("SELECT count(*) FROM " + t)
			pauses := count("SELECT count(*) FROM " + t + " WHERE right(group_name, 2) = '::'")
			k.Why = fmt.Sprintf("%d limit override(s) and class pause(s) (%d of them pauses) that operators set with 'concurrency set' and 'concurrency pause': down never drops an operator's decision on its own", k.Rows, pauses)
			k.Remove = "clear them ('concurrency set GROUP --clear', 'concurrency resume CLASS') and run down again, or run 'down --drop-operator-data'"
		case layout.SlotsTable:
			k.Rows = count("SELECT count(*) FROM " + t + " WHERE expires_at > now()")
			k.Why = fmt.Sprintf("%d live slot lease(s): jobs that run now under them (workers of the new runtime)", k.Rows)
			k.Remove = "run down again once they have finished or their leases expired, or run 'down --drop-operator-data'"
		default:
			k.Rows = count("SELECT count(*) FROM " + t)
			k.Why = fmt.Sprintf("%d row(s)", k.Rows)
			k.Remove = "run down again"
		}
		out = append(out, k)
	}
	if in.skipColumn {
		st := l.Table(l.SkipTable())
		k := KeptObject{Table: st, Column: layout.Ident(layout.SkipMetadataColumn),
			Rows: count("SELECT count(*) FROM " + st + " WHERE " + layout.Ident(layout.SkipMetadataColumn) + " IS NOT NULL")}
		k.Why = fmt.Sprintf("%d skip record(s) carry skip metadata (why a job was not enqueued); old binaries ignore the column", k.Rows)
		k.Remove = "run 'down --drop-operator-data' to drop the column with that metadata (the records stay)"
		out = append(out, k)
	}
	return out
}

// scanDuplicates finds, read-only, every group with more rows than a saved
// unique rule allows: rows under the rule's predicate, NULL keys excluded
// (unless the rule says NULLS NOT DISTINCT), grouped by its columns.
func scanDuplicates(ctx context.Context, q querier, l layout.Resolved, saved []SavedUnique) ([]DuplicateGroup, error) {
	var out []DuplicateGroup
	class := layout.Ident(l.ClassColumn)
	for _, s := range saved {
		if len(s.Columns) == 0 {
			continue
		}
		var conds []string
		if s.Predicate != "" {
			conds = append(conds, "("+s.Predicate+")")
		}
		if !strings.Contains(s.Rebuild, "NULLS NOT DISTINCT") {
			for _, c := range s.Columns {
				conds = append(conds, c+" IS NOT NULL")
			}
		}
		texts := make([]string, len(s.Columns))
		for i, c := range s.Columns {
			texts[i] = "(" + c + ")::text"
		}
		sql := "SELECT ARRAY[" + strings.Join(texts, ", ") + "], count(*) FROM " + s.Table
		if len(conds) > 0 {
			sql += " WHERE " + strings.Join(conds, " AND ")
		}
		sql += " GROUP BY " + strings.Join(s.Columns, ", ") + " HAVING count(*) > 1 ORDER BY 2 DESC, 1"
		rows, err := q.Query(ctx, sql)
		if err != nil {
			return nil, fmt.Errorf("scan %s for duplicates under %s: %w", s.Table, s.Index, err)
		}
		for rows.Next() {
			var vals []*string
			var n int64
			if err := rows.Scan(&vals, &n); err != nil {
				rows.Close()
				return nil, fmt.Errorf("scan %s for duplicates: %w", s.Table, err)
			}
			g := DuplicateGroup{Table: s.Table, Index: s.Index, Count: n}
			var keys []string
			for i, c := range s.Columns {
				v := "NULL"
				if vals[i] != nil {
					v = *vals[i]
				}
				if quoteIfNeeded(c) == class && g.Class == "" {
					g.Class = v
				} else {
					keys = append(keys, v)
				}
			}
			g.Key = strings.Join(keys, ", ")
			out = append(out, g)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("scan %s for duplicates: %w", s.Table, err)
		}
	}
	return out, nil
}

func (in *inspection) needsRenameBack() bool {
	for _, t := range in.tables {
		if t.columns[layout.KeyColumn] {
			return true
		}
	}
	return false
}
