package migrations

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/layout"
)

// Up migrates the layout's tables online (SPEC section 7): preflight,
// counting indexes built CONCURRENTLY, one short cutover transaction that
// renames the key column and drops the unique rule (saved for Down), the
// runtime's tables, ANALYZE. Every step is idempotent: after a kill, run it
// again. On an already migrated database it changes nothing and returns a
// report whose Before is Migrated.
func Up(ctx context.Context, databaseURL string, l layout.Layout, opts Options) (_ *Report, err error) {
	defer func() { err = interrupted(ctx, err) }()
	start := time.Now()
	r, in, rep, err := begin(ctx, databaseURL, l, opts, "up")
	if err != nil {
		return nil, err
	}
	defer r.close()
	if r.opts.Contract {
		steps, err := r.contractSteps(in)
		if err != nil || steps == nil {
			rep.After = rep.Before
			return rep, err
		}
		after, err := r.run(ctx, steps, rep, start)
		if after != nil && after.version != nil {
			rep.Saved = after.version.saved
		}
		if err == nil {
			r.printf("%s\n", rep.Summary())
		}
		return rep, err
	}
	if rep.Before == Expanded && !r.opts.Expand {
		// Complete: its steps are recorded in this phase, so that status
		// tells a complete stopped before its cutover (still expanded)
		// from an up stopped half-way (completeStoppedBeforeCutover).
		r.phase = completePhase
	}
	if r.opts.Expand && !in.needsCutover() && rep.Before != Expanded {
		r.printf("the cutover is done already: nothing to expand; up goes on as without --expand\n")
	}
	drift := in.drift()
	if rep.Before == Migrated && len(drift) == 0 {
		rep.After = Migrated
		rep.Saved = in.version.saved
		r.printf("already migrated (tool %s, %s); nothing to do\n", in.version.toolVersion, in.version.updatedAt.UTC().Format(time.RFC3339))
		return rep, nil
	}
	for _, d := range drift {
		if rep.Before == Migrated || expanding(in, r.opts) {
			r.printf("drift: %s; repairing it\n", d)
		}
	}
	steps, err := upSteps(in, r.opts)
	if err != nil {
		return nil, err
	}
	if expanding(in, r.opts) {
		r.phase = "expand"
		if expandedNothingToDo(in, steps) {
			rep.After = Expanded
			r.printf("already expanded (version schema %s); nothing to do. Deploy the new version with search_path = %s, %s; once no old version runs, run up to complete\n",
				layout.Ident(in.vs.name), layout.Ident(in.vs.name), layout.Ident(in.l.Schema))
			return rep, nil
		}
	}
	after, err := r.run(ctx, steps, rep, start)
	if after != nil && after.version != nil {
		rep.Saved = after.version.saved
	}
	if err != nil {
		return rep, err
	}
	r.printf("%s\n", rep.Summary())
	return rep, nil
}

// begin opens a run of Up or Down: it connects, takes the layout's run lock
// and runs the preflight, printing its findings. The caller closes r.
func begin(ctx context.Context, databaseURL string, l layout.Layout, opts Options, direction string) (*runner, *inspection, *Report, error) {
	r, err := newRunner(ctx, databaseURL, l, opts, direction)
	if err != nil {
		return nil, nil, nil, err
	}
	r.direction = direction
	if err := r.lock(ctx); err != nil {
		r.close()
		return nil, nil, nil, err
	}
	in, findings, err := r.preflight(ctx, direction)
	if err != nil {
		r.close()
		return nil, nil, nil, err
	}
	r.versionTable = in.versionTable && in.version != nil
	rep := &Report{Direction: direction, Before: in.state(), Findings: findings}
	for _, f := range findings {
		r.printf("preflight %s\n", f)
	}
	return r, in, rep, nil
}

// run executes steps, then inspects the database again for rep.After. The
// inspection is nil when it failed; a failed step's error comes first.
func (r *runner) run(ctx context.Context, steps []step, rep *Report, start time.Time) (*inspection, error) {
	runErr := r.execute(ctx, steps, rep)
	rep.Duration = time.Since(start)
	after, err := r.inspect(ctx)
	if err == nil {
		rep.After = after.state()
	}
	if runErr != nil {
		return after, runErr
	}
	return after, err
}

// upSteps lists every step of up in a fixed order; a step with nothing to
// do is kept, marked skipped, so step numbers never depend on the state.
func upSteps(in *inspection, opts Options) ([]step, error) {
	l := in.l
	d := newTmplData(l, opts.LockTimeout)
	var steps []step
	sql, err := render("version_table.up.sql.tmpl", d)
	if err != nil {
		return nil, err
	}
	steps = append(steps, step{name: "version table", table: l.Table(layout.VersionTable), lock: "none on the queue", kind: stepTx, sql: in.access.setRoleForVersionTable() + sql, createsVersionTable: true})
	if isPlainJobs(l) {
		// plain-jobs' 0007 indexes, its two (job_class, key) ones the
		// counting indexes (plainjobs0007.go).
		pj, err := plainJobsIndexSteps(in)
		if err != nil {
			return nil, err
		}
		steps = append(steps, pj...)
	}
	for _, ci := range countingIndexes(l) {
		if isPlainJobs(l) {
			break // the steps above
		}
		t := in.table(ci.table)
		sql, err := ci.createSQL(l, t.keyColumn())
		if err != nil {
			return nil, err
		}
		s := step{name: "counting index on " + l.Table(ci.table), table: l.Table(ci.table), lock: "SHARE UPDATE EXCLUSIVE (writers go on)",
			kind: stepConcurrent, sql: sql, index: l.Table(ci.name), grows: true}
		if err := onPartitions(&s, l, ci, t); err != nil {
			return nil, err
		}
		if eq, ok := in.equivalent(ci); ok {
			s.skip = "reuses the equivalent index " + layout.Ident(eq.name)
		}
		for _, ix := range in.indexes[ci.table] {
			if ix.name == ci.name && ix.valid {
				s.skip = "already built"
			}
		}
		steps = append(steps, s)
	}
	for _, ci := range prefixIndexes(l) {
		t := in.table(ci.table)
		if t.keyBytewise() {
			continue
		}
		sql, err := ci.createSQL(l, t.keyColumn())
		if err != nil {
			return nil, err
		}
		s := step{name: "prefix index on " + l.Table(ci.table) + " (the key column sorts by " + t.keyCollation + ", not bytewise: a no-overlap count compares the key's prefix with COLLATE \"C\", a range of this index)",
			table: l.Table(ci.table), lock: "SHARE UPDATE EXCLUSIVE (writers go on)", kind: stepConcurrent, sql: sql, index: l.Table(ci.name), grows: true}
		if err := onPartitions(&s, l, ci, t); err != nil {
			return nil, err
		}
		for _, ix := range in.indexes[ci.table] {
			if ix.name == ci.name && ix.valid {
				s.skip = "already built"
			}
		}
		steps = append(steps, s)
	}
	// The engine drops a bare unique index on a table that is not
	// partitioned after the cutover, CONCURRENTLY (deferredUniqueDrops):
	// dropped in the cutover, the deletion of its files would make the
	// cutover's commit (not its lock) take a time that grows with the index.
	dc := d
	dc.DeferIndexDrop = true
	if sql, err = render("cutover.up.sql.tmpl", dc); err != nil {
		return nil, err
	}
	cut := step{name: "cutover: rename " + layout.LegacyKeyColumn + " to " + layout.KeyColumn + ", drop the unique rule", table: strings.Join(d.Tables, ", "),
		lock: "ACCESS EXCLUSIVE (short)", kind: stepTx, sql: sql, exclusive: cutoverLockOrder(l), phase: phaseComplete}
	if len(d.Renames) > 0 {
		cut.name += ", rename plain-jobs' 0.37 key indexes to 0007's names"
	}
	if st := l.SkipTable(); st != "" {
		// A down stopped after its probe index (partitions.go) leaves it:
		// dropped here, under the lock the cutover holds anyway.
		cut.sql += "DROP INDEX IF EXISTS " + l.Table(probeIndexName(st)) + ";\n"
	}
	if in.vs != nil && in.vs.enqueueLock {
		// The expanded layout's enqueue lock reads the column renamed here.
		cut.sql += enqueueLockDropTriggerSQL(l)
	}
	if !in.needsCutover() {
		cut.skip = "already done"
	}
	if lock := in.cutoverDropGrows(); lock != "" {
		cut.grows, cut.dropsFiles = true, true
		cut.lock = lock
	}
	steps = append(steps, cut)
	drops, err := deferredUniqueDrops(in)
	if err != nil {
		return nil, err
	}
	steps = append(steps, drops...)
	if isPlainJobs(l) {
		leftovers, err := plainJobsLeftoverSteps(in)
		if err != nil {
			return nil, err
		}
		for i := range leftovers {
			leftovers[i].phase = phaseComplete
		}
		steps = append(steps, leftovers...)
	}
	if sql, err = render("runtime.up.sql.tmpl", d); err != nil {
		return nil, err
	}
	grants := in.access.grantSQL(false)
	rt := step{name: "runtime tables", table: runtimeTableList(d), lock: "none on the queue", kind: stepTx,
		sql: in.access.setRole() + sql + in.access.resetRole() + grants, skip: "already created"}
	for _, t := range runtimeTables {
		if !in.runtime[t.name] {
			rt.skip = ""
		}
	}
	if rt.skip != "" && grants != "" {
		rt.name, rt.sql, rt.skip = "runtime tables: grants", grants, ""
	}
	steps = append(steps, rt)
	if d.SkipTable != "" {
		if sql, err = render("skip_column.up.sql.tmpl", d); err != nil {
			return nil, err
		}
		grants := in.access.grantSQL(true)
		sc := step{name: "skip-metadata column", table: d.SkipTable, lock: "ACCESS EXCLUSIVE (short, adds a NULL column)",
			kind: stepTx, sql: sql + grants, exclusive: []string{d.SkipTable}}
		switch {
		case in.skipColumn && grants != "":
			// Only its grants are missing: no lock on the queue.
			sc.name, sc.lock, sc.sql, sc.exclusive = "skip-metadata column: grants", "none on the queue", grants, nil
		case in.skipColumn:
			sc.skip = "already added"
		}
		steps = append(steps, sc)
	}
	if sql, err = render("analyze.up.sql.tmpl", d); err != nil {
		return nil, err
	}
	steps = append(steps, step{name: "analyze", table: strings.Join(d.Tables, ", "), lock: "SHARE UPDATE EXCLUSIVE (writers go on)", kind: stepPlain, sql: sql, phase: phaseAnalyze})
	if sql, err = render("finish.up.sql.tmpl", d); err != nil {
		return nil, err
	}
	steps = append(steps, step{name: "record migrated", table: l.Table(layout.VersionTable), lock: "none on the queue", kind: stepTx, sql: sql, phase: phaseFinish})
	if expanding(in, opts) {
		return expandSteps(in, steps), nil
	}
	return steps, nil
}

// needsCutover reports a table that still has the legacy key column or a
// unique rule covering the key.
func (in *inspection) needsCutover() bool {
	for _, pi := range plainJobs0007Indexes {
		if isPlainJobs(in.l) && in.renamedAtCutover(pi) {
			return true
		}
	}
	for _, t := range in.tables {
		if t.columns[layout.LegacyKeyColumn] {
			return true
		}
		for _, ix := range in.indexes[t.name] {
			if ix.unique && !ix.primary && ix.coversKey() {
				return true
			}
		}
	}
	return false
}

// readOnly returns a fatal finding of kind "read_only" when the session
// cannot write: a standby in recovery, or default_transaction_read_only
// (set on the server, the database or the role). Up and down would fail at
// their first write (25006); they refuse before any change instead.
func readOnly(ctx context.Context, q *pgx.Conn, direction string) (*Finding, error) {
	var recovery bool
	var setting string
	if err := q.QueryRow(ctx, "SELECT pg_catalog.pg_is_in_recovery(), pg_catalog.current_setting('default_transaction_read_only')").Scan(&recovery, &setting); err != nil {
		return nil, fmt.Errorf("check whether the database is writable: %w", err)
	}
	switch {
	case recovery:
		return &Finding{Fatal: true, Kind: "read_only", Object: "pg_is_in_recovery()",
			Message: fmt.Sprintf("the server is a standby in recovery (pg_is_in_recovery() is true): it accepts no writes, so %s cannot run here; connect to the primary", direction),
			Action:  "connect to the primary"}, nil
	case setting == "on":
		return &Finding{Fatal: true, Kind: "read_only", Object: "default_transaction_read_only",
			Message: fmt.Sprintf("the session is read-only (default_transaction_read_only = on, set on the server, the database or the role): %s would fail at its first write; connect as a role or to a database where it is off (ALTER ROLE ... SET default_transaction_read_only = off), or to the primary", direction),
			Action:  "connect where default_transaction_read_only is off"}, nil
	}
	return nil, nil
}

// preflight inspects the database read-only and returns its findings; any
// fatal one becomes a *PreflightError (or *NotFoundError).
func (r *runner) preflight(ctx context.Context, direction string) (*inspection, []Finding, error) {
	in, err := r.inspect(ctx)
	if err != nil {
		return nil, nil, err
	}
	l := r.l
	var missing []string
	if !in.schemaExists {
		missing = append(missing, fmt.Sprintf("schema %s does not exist (--schema)", layout.Ident(l.Schema)))
	} else {
		for _, t := range in.tables {
			if !t.exists {
				missing = append(missing, fmt.Sprintf("table %s does not exist", l.Table(t.name)))
			}
		}
	}
	if len(missing) > 0 {
		nf := &NotFoundError{Missing: missing}
		nf.Candidates, nf.Missing, nf.listErr = findCandidates(ctx, r.conn, l, in.schemaExists, nf.Missing)
		return nil, nil, nf
	}
	var fs []Finding
	fatal := func(kind, format string, args ...any) {
		fs = append(fs, Finding{Fatal: true, Kind: kind, Message: fmt.Sprintf(format, args...)})
	}
	note := func(kind, format string, args ...any) {
		fs = append(fs, Finding{Kind: kind, Message: fmt.Sprintf(format, args...)})
	}
	for _, t := range in.tables {
		if !t.columns[l.ClassColumn] {
			fatal("class_column", "table %s has no class column %s (set --class-column)", l.Table(t.name), layout.Ident(l.ClassColumn))
		}
		if l.SingleTable() && !t.columns[l.StateColumn] {
			fatal("state_column", "table %s has no state column %s (set --state-column)", l.Table(t.name), layout.Ident(l.StateColumn))
		}
		switch {
		case t.columns[layout.LegacyKeyColumn] && t.columns[layout.KeyColumn]:
			fatal("key_column", "table %s has both %s and %s; the tool cannot tell which one is the key: drop or rename the one that is not", l.Table(t.name), layout.LegacyKeyColumn, layout.KeyColumn)
		case !t.columns[layout.LegacyKeyColumn] && !t.columns[layout.KeyColumn]:
			fatal("key_column", "table %s has no key column %s (nor %s): is this the right table?", l.Table(t.name), layout.LegacyKeyColumn, layout.KeyColumn)
		}
	}
	if direction == "up" || direction == "down" {
		ro, err := readOnly(ctx, r.conn, direction)
		if err != nil {
			return nil, nil, err
		}
		if ro != nil {
			fs = append(fs, *ro)
		}
	}
	if !hasFatal(fs) && (direction == "up" || direction == "down") && !(direction == "up" && r.opts.Contract) {
		deps, err := r.dependentFindings(ctx, in, direction)
		if err != nil {
			return nil, nil, err
		}
		fs = append(fs, deps...)
	}
	if !hasFatal(fs) && (direction == "up" || direction == "down") {
		vsf, err := r.versionSchemaFindings(ctx, in, direction)
		if err != nil {
			return nil, nil, err
		}
		fs = append(fs, vsf...)
	}
	if in.version != nil && in.version.state != "migrated" {
		switch stopped := in.stoppedRun(); {
		case stopped == "": // expanded: a resting state, not a stopped run
		case in.direction() == direction:
			note("stopped_run", "%s; this run finishes it", stopped)
		case direction == "up" || direction == "down":
			note("stopped_run", "%s; %s takes the layout the other way from where it stopped", stopped, direction)
		}
	}
	for _, d := range in.drift() {
		by := "up"
		if in.state() == Expanded {
			by = "up --expand"
		}
		note("drift", "drift: %s; %s repairs it", d, by)
	}
	for _, name := range in.invalidOurs() {
		note("invalid_leftover", "index %s is an invalid leftover of an interrupted build; it will be dropped and rebuilt", name)
	}
	for _, t := range in.tables {
		for _, ix := range in.indexes[t.name] {
			if !ix.valid && ix.coversKey() && !isOurs(l, ix) {
				note("invalid_index", "index %s on %s is INVALID and not ours; the migration ignores it (drop it with DROP INDEX CONCURRENTLY)", layout.Ident(ix.name), l.Table(t.name))
			}
			if direction == "up" && ix.unique && !ix.primary && ix.coversKey() {
				what := "unique index"
				if ix.constraint != "" {
					what = "unique constraint"
				}
				note("unique_rule", "%s %s (%s) will be dropped at the cutover and saved for down", what, layout.Ident(ix.name), ix.definition)
				if def, err := renameKeyInIndexDef(ix.definition); err == nil {
					if _, err := concurrentUnique(def); err != nil {
						fatal("saved_rule", "%s %s (%s) %v, so down could not restore it exactly: rewrite its predicate without that construct (NULLIF(a, b) as CASE WHEN a = b THEN NULL ELSE a END, IS DISTINCT FROM as an explicit comparison) before the migration", what, layout.Ident(ix.name), ix.definition, err)
					}
				}
			}
		}
	}
	fs = append(fs, in.access.findings(in, direction)...)
	for _, s := range in.sessions {
		if direction == "sql" {
			break // writing files takes no lock
		}
		if !s.visible {
			continue // checkHidden watches it in pg_locks
		}
		switch {
		case s.state == "idle in transaction" && s.idleAge > r.opts.LongTransaction:
			fatal("long_transaction", "session pid %d is idle in a transaction for %s holding %s on %s; it would stall the index builds and the cutover: end it (SELECT pg_terminate_backend(%d)) or wait", s.pid, s.idleAge.Round(time.Second), s.mode, l.Table(s.table), s.pid)
		case s.xactAge > r.opts.LongTransaction:
			fatal("long_transaction", "session pid %d has been in a transaction for %s holding %s on %s (%q); it would stall the index builds and the cutover: wait for it or end it", s.pid, s.xactAge.Round(time.Second), s.mode, l.Table(s.table), s.query)
		}
	}
	if direction == "up" || direction == "down" {
		hidden, err := r.checkHidden(ctx, in, direction)
		if err != nil {
			return nil, nil, err
		}
		fs = append(fs, hidden...)
	}
	if hasFatal(fs) {
		return nil, fs, &PreflightError{Findings: fs}
	}
	return in, fs, nil
}

func hasFatal(fs []Finding) bool {
	for _, f := range fs {
		if f.Fatal {
			return true
		}
	}
	return false
}

func isOurs(l layout.Resolved, ix indexInfo) bool {
	for _, ci := range ourIndexes(l) {
		if ci.table == ix.table && ci.name == ix.name {
			return true
		}
	}
	return false
}

// IsNotFound reports whether err says the layout was not found.
func IsNotFound(err error) bool {
	var nf *NotFoundError
	return errors.As(err, &nf)
}

func runtimeTableList(d tmplData) string {
	var ts []string
	for _, t := range d.RuntimeTables {
		ts = append(ts, t.Table)
	}
	return strings.Join(ts, ", ")
}
