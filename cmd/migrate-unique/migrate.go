package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
)

// Owned by the migration issue: plan, up, down, status, sql.

const databaseFlagUsage = "PostgreSQL URL, e.g. postgres://user@host:5432/dbname (default $" + pgurl.EnvVar + "); the password is never printed"

// migrateFlags are the flags of plan, up, down and status.
type migrateFlags struct {
	layout      *layout.Flags
	database    *string
	lockTimeout *time.Duration
	maxAttempts *int
	longTx      *time.Duration
	// json, summary (plan) and dropOperatorData (down) are nil where the
	// command has no such flag.
	json             *bool
	summary          *bool
	down             *bool
	dropOperatorData *bool
	// Rolling deploys (up, plan): expand, contract, versionSchema, force,
	// oldAppName; (down) drain, drainTimeout. nil where the command has none.
	expand, contract, force *bool
	versionSchema           *string
	oldAppName              *string
	drain, toExpanded       *bool
	drainTimeout            *time.Duration
}

func parseMigrateFlags(e *env, name, usage string, args []string, run bool) (*migrateFlags, error) {
	fs := newFlagSet(e, name, usage)
	f := &migrateFlags{layout: layout.RegisterFlags(fs)}
	f.database = fs.String("database", "", databaseFlagUsage)
	f.json = fs.Bool("json", false, "print one JSON object on stdout instead of text (schema in docs/migration.md); up and down print progress as JSON lines on stderr; the exit status is the same")
	switch name {
	case "plan":
		f.summary = fs.Bool("summary", false, "one line a step (no SQL)")
		f.down = fs.Bool("down", false, "plan down instead of up: down's preflight, its duplicate scan and its steps (exit 1 when down would refuse)")
	}
	if name == "up" || name == "plan" {
		f.expand = fs.Bool("expand", false, "rolling deploy, phase 1: only what the old application version lives with (counting indexes, runtime tables and grants, skip-metadata column) and the version schema of views showing concurrency_key; up without it then completes (docs/migration.md, Rolling deploys)")
		f.contract = fs.Bool("contract", false, "rolling deploy, last phase: drop the version schema of a migrated layout once every instance runs the new version")
		f.versionSchema = fs.String("version-schema", "", "name of the version schema up --expand creates (default <schema>_concurrency); the new version sets search_path = <version schema>, <schema>")
		f.force = fs.Bool("force", false, "complete an expanded layout even while sessions of the old application version still write (their next statement naming unique_key fails)")
		f.oldAppName = fs.String("old-app-name", "", "application_name of the old application version's sessions: complete refuses while any is connected, whatever it last ran")
	}
	if name == "down" {
		f.drain = fs.Bool("drain", false, "before rolling back, set each group the old unique rule would not allow to limit 1 (an override) and wait for its extra jobs to finish; the overrides are restored after the rollback, or when it gives up")
		f.drainTimeout = fs.Duration("drain-timeout", migrations.DefaultDrainTimeout, "longest wait of --drain for the extra jobs to finish")
		f.toExpanded = fs.Bool("to-expanded", false, "roll back to the expanded state only (the reverse of complete): unique rule and unique_key back, counting indexes, runtime tables and version schema kept, so that the old and the new version run side by side again; down without it then rolls back the rest")
	}
	if name == "down" || name == "plan" {
		f.dropOperatorData = fs.Bool("drop-operator-data", false, "drop the runtime's tables and the skip-metadata column even while they hold operator data (limit overrides, class pauses, live slot leases, skip metadata), instead of keeping them; also on a layout an earlier down already rolled back (plan: with --down)")
	}
	if run {
		f.lockTimeout = fs.Duration("lock-timeout", migrations.DefaultLockTimeout, "longest wait for a lock on a queue table per attempt (the first waits an eighth of it, retries double up to it); a writer queued behind the migration waits at most this long")
		f.maxAttempts = fs.Int("max-attempts", migrations.DefaultMaxAttempts, "attempts per step when a lock is not available (55P03) or a deadlock (40P01) occurs, with jittered backoff in between")
		f.longTx = fs.Duration("long-transaction", migrations.DefaultLongTransaction, "refuse to start while another session holding a lock on a queue table has been in (or idle in) a transaction longer than this")
	}
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, &exitError{code: 2, err: fmt.Errorf("unexpected argument %q; every setting is a flag (see -h)", fs.Arg(0))}
	}
	if f.down != nil && !*f.down && *f.dropOperatorData {
		return nil, &exitError{code: 2, err: fmt.Errorf("--drop-operator-data is a flag of down: give plan --down --drop-operator-data to plan that down")}
	}
	if f.expand != nil && *f.expand && *f.contract {
		return nil, &exitError{code: 2, err: fmt.Errorf("--expand and --contract are two phases: give one of them (up --expand, deploy, up, then up --contract)")}
	}
	if f.expand != nil && *f.contract && (*f.force || *f.oldAppName != "") {
		return nil, &exitError{code: 2, err: fmt.Errorf("--force and --old-app-name are flags of the complete phase (up without --expand or --contract)")}
	}
	if f.expand != nil && f.down != nil && *f.down && (*f.expand || *f.contract) {
		return nil, &exitError{code: 2, err: fmt.Errorf("--expand and --contract plan up's phases: leave out --down")}
	}
	if f.versionSchema != nil && *f.versionSchema != "" && len(*f.versionSchema) > 63 {
		return nil, &exitError{code: 2, err: fmt.Errorf("--version-schema %q: longer than PostgreSQL's 63 bytes", *f.versionSchema)}
	}
	if f.drainTimeout != nil && *f.drainTimeout <= 0 {
		return nil, &exitError{code: 2, err: fmt.Errorf("--drain-timeout %s: must be positive, e.g. 10m", *f.drainTimeout)}
	}
	if run {
		if *f.lockTimeout <= 0 {
			return nil, &exitError{code: 2, err: fmt.Errorf("--lock-timeout %s: must be positive, e.g. 2s", *f.lockTimeout)}
		}
		if *f.maxAttempts < 1 {
			return nil, &exitError{code: 2, err: fmt.Errorf("--max-attempts %d: must be at least 1", *f.maxAttempts)}
		}
		if *f.longTx <= 0 {
			return nil, &exitError{code: 2, err: fmt.Errorf("--long-transaction %s: must be positive, e.g. 1m", *f.longTx)}
		}
	}
	return f, nil
}

func (f *migrateFlags) resolve() (string, layout.Resolved, error) {
	l, err := f.layout.Layout()
	if err != nil {
		return "", layout.Resolved{}, &exitError{code: 2, err: err}
	}
	url, err := pgurl.Resolve(*f.database)
	if err != nil {
		return "", layout.Resolved{}, &exitError{code: 2, err: err}
	}
	return url, l, nil
}

func (f *migrateFlags) options(e *env) migrations.Options {
	o := migrations.Options{LockTimeout: *f.lockTimeout, MaxAttempts: *f.maxAttempts, LongTransaction: *f.longTx, Out: e.stdout, Terminal: e.isTerminal,
		BeforeStep: beforeStep, ProgressEvery: progressEvery}
	if f.dropOperatorData != nil {
		o.DropOperatorData = *f.dropOperatorData
	}
	if f.expand != nil {
		o.Expand, o.Contract, o.Force, o.VersionSchema, o.OldAppName = *f.expand, *f.contract, *f.force, *f.versionSchema, *f.oldAppName
	}
	if f.drain != nil {
		o.Drain, o.DrainTimeout, o.ToExpanded = *f.drain, *f.drainTimeout, *f.toExpanded
	}
	if *f.json {
		o.Out = nil
		jsonProgress(e.stderr, &o)
	}
	return o
}

// progressEvery is 0 (the default interval) except in tests.
var progressEvery time.Duration

// beforeStep is nil except in the tests that interrupt a run between two
// steps (they run this command in a child process and stop it there).
var beforeStep func(context.Context, migrations.StepResult)

// describeLayout renders the layout for a heading line.
func describeLayout(l layout.Resolved) string {
	var ts []string
	for _, t := range l.Tables() {
		ts = append(ts, l.Table(t))
	}
	s := strings.Join(ts, ", ")
	if a := l.Args(); a != "" {
		s += " (" + a + ")"
	}
	return s
}

const planUsage = `plan [layout flags] [--database URL] [--lock-timeout 2s] [--max-attempts 30] [--long-transaction 1m] [--down [--drop-operator-data]] [--expand | --contract] [--version-schema NAME] [--force] [--old-app-name NAME] [--summary] [--json]

Shows, changing nothing, what up (with --down: down) would do: the preflight
findings, then each step with its SQL, its lock level, the size of the
table it touches and, for up, its phase (expand: the old application version
lives with it; complete: the cutover and what follows it). It takes up's and
down's flags and runs their preflight with them (for down, its duplicate
scan too), so its exit status predicts theirs: 1 when the run with the same
flags would refuse (a fatal finding), 0 when it would go ahead.`

func runPlan(ctx context.Context, e *env, args []string) error {
	f, err := parseMigrateFlags(e, "plan", planUsage, args, true)
	if err != nil {
		return err
	}
	url, l, err := f.resolve()
	if err != nil {
		return err
	}
	direction, planFor := "up", migrations.PlanWith
	if *f.down {
		direction, planFor = "down", migrations.PlanDown
	}
	p, err := planFor(ctx, url, l.Layout, f.options(e))
	if err != nil {
		return pgurl.RedactError(url, err)
	}
	fatal := false
	for _, fd := range p.Findings {
		fatal = fatal || fd.Fatal
	}
	// command names the planned run as the operator types it (the verdict
	// and the refusal); direction stays "up" or "down" in --json.
	command := direction
	switch {
	case f.expand != nil && *f.expand:
		command = "up --expand"
	case f.contract != nil && *f.contract:
		command = "up --contract"
	}
	refuse := &exitError{code: 1, err: fmt.Errorf("%s would refuse: see the preflight findings", command)}
	if *f.json {
		if err := writeJSON(e.stdout, planJSONOf(direction, url, l, p, fatal)); err != nil {
			return err
		}
		if fatal {
			return refuse
		}
		return nil
	}
	fmt.Fprintf(e.stdout, "database: %s\nlayout:   %s\nstate:    %s\n", pgurl.Describe(url), describeLayout(l), p.State)
	if len(p.Findings) > 0 {
		fmt.Fprintf(e.stdout, "\npreflight:\n")
		for _, fd := range p.Findings {
			fmt.Fprintf(e.stdout, "  %s\n", fd)
		}
	}
	if len(p.Steps) == 0 && direction == "down" {
		fmt.Fprintf(e.stdout, "\nnot migrated: down has nothing to do\n")
	} else if len(p.Steps) == 0 {
		fmt.Fprintf(e.stdout, "\nalready migrated: up has nothing to do\n")
	} else if *f.summary {
		fmt.Fprintln(e.stdout)
		for _, s := range p.Steps {
			fmt.Fprintf(e.stdout, "step %d: %s\n", s.Number, summaryLine(s))
		}
	}
	for _, s := range p.Steps {
		if *f.summary {
			break
		}
		fmt.Fprintf(e.stdout, "\nstep %d: %s\n  table: %s", s.Number, s.Name, s.Table)
		if size := stepSize(s); size != "" {
			fmt.Fprintf(e.stdout, " (%s)", size)
		}
		fmt.Fprintf(e.stdout, "\n  lock:  %s; %s\n  time:  %s\n", s.Lock, stepHow(s), stepTime(s))
		if s.Phase != "" {
			fmt.Fprintf(e.stdout, "  phase: %s\n", phaseText[s.Phase])
		}
		if s.Skip != "" {
			fmt.Fprintf(e.stdout, "  skip:  %s\n", s.Skip)
			continue
		}
		fmt.Fprintf(e.stdout, "  sql:\n%s\n", indent(s.SQL, "    "))
	}
	fmt.Fprintf(e.stdout, "\nverdict: %s\n", planVerdict(command, p))
	if fatal {
		refuse.err = fmt.Errorf("%s would refuse: see the preflight findings above", command)
		return refuse
	}
	return nil
}

// phaseText explains a planned step's phase.
var phaseText = map[string]string{
	"expand":   "expand (the old application version lives with it; up --expand runs it)",
	"complete": "complete (after it the old version's statements naming unique_key fail; up on an expanded layout runs it)",
}

// planVerdict is plan's closing line: whether the run would go ahead, and
// with how many steps.
func planVerdict(direction string, p *migrations.PlanResult) string {
	fatal, run := 0, 0
	for _, fd := range p.Findings {
		if fd.Fatal {
			fatal++
		}
	}
	for _, s := range p.Steps {
		if s.Skip == "" {
			run++
		}
	}
	switch {
	case fatal > 0:
		return fmt.Sprintf("%s would refuse (%s above) and change nothing; exit 1", direction, counted(fatal, "fatal finding", "fatal findings"))
	case run == 0:
		return fmt.Sprintf("%s would change nothing; exit 0", direction)
	}
	return fmt.Sprintf("%s would go ahead: %s to run; exit 0", direction, counted(run, "step", "steps"))
}

// stepHow says how a planned step runs.
func stepHow(s migrations.PlannedStep) string {
	switch {
	case s.Concurrent:
		return "outside any transaction (CONCURRENTLY)"
	case s.Transaction:
		return "in one transaction, lock_timeout bounded, retried"
	}
	return "one statement on its own, outside any transaction"
}

// stepTime says whether a planned step's time grows with the table and
// whether writers wait for it.
func stepTime(s migrations.PlannedStep) string {
	switch {
	case s.DeletesIndexFiles:
		return "writers wait only for its catalog work, independent of the table's size; its commit then returns when PostgreSQL has deleted the dropped index's files, after releasing the locks: that grows with the index (see the lock line)"
	case s.GrowsWithTable && s.BlocksWriters:
		return "grows with the table (writers go on); writers wait only for its moments of locking, independent of the table's size"
	case s.GrowsWithTable:
		return "grows with the table; writers go on"
	case s.BlocksWriters:
		return "independent of the table's size; writers wait for it (at most the lock timeout to get the lock)"
	}
	return "independent of the table's size; writers go on"
}

// stepSize renders the size of the tables a step touches, or "".
func stepSize(s migrations.PlannedStep) string {
	switch {
	case s.RowsUnknown:
		return fmt.Sprintf("%s; row count unknown: never analysed", humanBytes(s.Bytes))
	case s.Rows > 0 || s.Bytes > 0:
		return fmt.Sprintf("~%d rows, %s", s.Rows, humanBytes(s.Bytes))
	}
	return ""
}

// summaryLine is a planned step in one line.
func summaryLine(s migrations.PlannedStep) string {
	line := s.Name
	if size := stepSize(s); size != "" {
		line += " (" + size + ")"
	}
	if s.Skip != "" {
		return line + ": skipped, " + s.Skip
	}
	if s.DeletesIndexFiles {
		return line + ": " + s.Lock
	}
	if s.GrowsWithTable {
		return line + ": " + s.Lock + "; grows with the table"
	}
	return line + ": " + s.Lock
}

const upUsage = `up [layout flags] [--database URL] [--lock-timeout 2s] [--max-attempts 30] [--long-transaction 1m] [--expand [--version-schema NAME] | --contract] [--force] [--old-app-name NAME] [--json]

Runs the migration online: counting indexes built CONCURRENTLY, one short
cutover transaction (rename unique_key to concurrency_key, drop the unique
rule, saved for down), the runtime's tables, ANALYZE. Each step prints its
duration; index builds show progress. Safe to re-run after any failure or
kill: it finishes what is left. Exits 0 when migrated (or already migrated).

Rolling deploys (docs/migration.md): up --expand runs only what the old
application version lives with, plus a version schema of views showing
concurrency_key (the new version sets search_path = <version schema>,
<schema>); up on an expanded layout completes it, refusing while sessions of
the old version still write (--force goes ahead); up --contract drops the
version schema once every instance runs the new version.`

func runUp(ctx context.Context, e *env, args []string) error {
	return runMigration(ctx, e, "up", upUsage, args, migrations.Up)
}

const downUsage = `down [layout flags] [--database URL] [--lock-timeout 2s] [--max-attempts 30] [--long-transaction 1m] [--drop-operator-data] [--drain [--drain-timeout 10m]] [--to-expanded] [--json]

Rolls the migration back online. First a read-only scan: if any group has
more rows than the old unique rule allows, down refuses, lists every such
group (class, key, count) and changes nothing; it never deletes a job. Then
it rebuilds the saved unique rule CONCURRENTLY, attaches it as it was and
renames the column back in one short transaction, and drops what up added,
except tables that hold operator data (limit overrides, class pauses, live
slot leases, skip metadata), which it keeps and names with what to do. On a
rolled-back layout, down drops what an earlier down kept once it holds
nothing; --drop-operator-data drops it with its rows. From an expanded layout
(up --expand) it drops what expand added, the version schema included.
--drain first sets each group the old rule would not allow to limit 1 and
waits (up to --drain-timeout) for its extra jobs to finish, then rolls back
and restores the overrides it replaced (also when it gives up).
--to-expanded stops at the expanded state, the reverse of complete.`

func runDown(ctx context.Context, e *env, args []string) error {
	return runMigration(ctx, e, "down", downUsage, args, migrations.Down)
}

func runMigration(ctx context.Context, e *env, name, usage string, args []string,
	do func(context.Context, string, layout.Layout, migrations.Options) (*migrations.Report, error)) error {
	f, err := parseMigrateFlags(e, name, usage, args, true)
	if err != nil {
		return err
	}
	url, l, err := f.resolve()
	if err != nil {
		return err
	}
	if !*f.json {
		fmt.Fprintf(e.stdout, "database: %s\nlayout:   %s\n", pgurl.Describe(url), describeLayout(l))
	}
	rep, err := do(ctx, url, l.Layout, f.options(e))
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted (%w); every step is resumable: 'migrate-unique status' shows where the run stopped, run %s again to finish it", err, name)
		}
		err = pgurl.RedactError(url, err)
	}
	if *f.json {
		if jerr := writeJSON(e.stdout, runJSONOf(name, url, l, rep, err)); jerr != nil && err == nil {
			return jerr
		}
	}
	return err
}

const statusUsage = `status [layout flags] [--database URL] [--json]

Shows the layout's state (legacy, expanded, partly migrated, migrated), the
version schema of a rolling deploy, the tool's
version and the version recorded in the database, each table's key column,
the unique rules down would restore, and whether any index of ours is
invalid.`

func runStatus(ctx context.Context, e *env, args []string) error {
	f, err := parseMigrateFlags(e, "status", statusUsage, args, false)
	if err != nil {
		return err
	}
	url, l, err := f.resolve()
	if err != nil {
		return err
	}
	st, err := migrations.Status(ctx, url, l.Layout)
	if err != nil {
		return pgurl.RedactError(url, err)
	}
	if *f.json {
		return writeJSON(e.stdout, statusJSONOf(url, l, st))
	}
	fmt.Fprintf(e.stdout, "database: %s\nlayout:   %s\nstate:    %s\ntool:     migrate-unique %s", pgurl.Describe(url), describeLayout(l), st.State, st.ToolVersion)
	if st.RecordedVersion != "" {
		fmt.Fprintf(e.stdout, " (database last written by %s at %s)", st.RecordedVersion, st.RecordedAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(e.stdout)
	if st.VersionSchema != "" {
		fmt.Fprintf(e.stdout, "version schema: %s (the new version's search_path: %s, %s)\n", layout.Ident(st.VersionSchema), layout.Ident(st.VersionSchema), layout.Ident(l.Schema))
	}
	if st.Stopped != "" {
		fmt.Fprintf(e.stdout, "stopped:  %s\n", st.Stopped)
	}
	for _, d := range st.Drift {
		fmt.Fprintf(e.stdout, "drift:    %s\n", d)
	}
	if st.Run != nil {
		fmt.Fprintf(e.stdout, "run lock: %v\n", st.Run)
	}
	if st.Next != "" {
		fmt.Fprintf(e.stdout, "next:     %s\n", st.Next)
	}
	if st.Pooler != nil {
		fmt.Fprintf(e.stdout, "pooler:   %v\n", st.Pooler)
	}
	for _, t := range st.Tables {
		rows := fmt.Sprintf("~%d rows", t.Rows)
		if t.RowsUnknown {
			rows = "row count unknown: never analysed"
		}
		fmt.Fprintf(e.stdout, "table:    %s: key column %s, %s\n", t.Table, t.KeyColumn, rows)
	}
	for _, s := range st.Saved {
		fmt.Fprintf(e.stdout, "saved:    %s\n", s.Definition)
	}
	for _, k := range st.Kept {
		what := k.Table
		if k.Column != "" {
			what += "." + k.Column
		}
		fmt.Fprintf(e.stdout, "kept:     %s: %s\n", what, k.Why)
	}
	if len(st.InvalidIndexes) == 0 {
		fmt.Fprintf(e.stdout, "invalid indexes of ours: none\n")
	} else {
		fmt.Fprintf(e.stdout, "invalid indexes of ours: %s (the next run drops and rebuilds them; an INVALID unique index still rejects duplicates of new rows)\n", strings.Join(st.InvalidIndexes, ", "))
	}
	return nil
}

const sqlUsage = `sql [layout flags] [--dir DIR] [--database URL] [--expand]

Writes the migration for the layout as golang-migrate files into DIR, one
statement per file wherever CONCURRENTLY is involved, for teams that apply
migrations with their own tool (give golang-migrate its own version table
with x-migrations-table). Refuses a DIR that holds other .sql files.

Needs no database. With --database it reads (only reads) the layout's
unique rules there, so that the down files rebuild each of them
CONCURRENTLY, for any layout; without it that holds for plain-jobs' layout
only, and other layouts' down rebuilds the rules inside a transaction.
With --database it also reads the roles that use the queue's tables and
writes the GRANTs up makes on the runtime's tables (a grants file);
without it the files grant nothing.

With --expand it writes a rolling deploy's files: the expand phase's first
(ending with the file named expanded: golang-migrate's goto to its version
stops there, both ways), then the complete phase's (the cutover and after).`

func runSQL(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "sql", sqlUsage)
	lf := layout.RegisterFlags(fs)
	dir := fs.String("dir", "migrate-unique-sql", "directory to write the files into (created if missing; files of the same name are replaced, any other .sql file is refused)")
	database := fs.String("database", "", "PostgreSQL URL to read the layout's unique rules from, so that the down files rebuild them CONCURRENTLY (optional; $"+pgurl.EnvVar+" is not read here); the password is never printed")
	expand := fs.Bool("expand", false, "write a rolling deploy's files: the expand phase's first, ending with the file named expanded, then the complete phase's")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &exitError{code: 2, err: fmt.Errorf("unexpected argument %q; use --dir DIR", fs.Arg(0))}
	}
	l, err := lf.Layout()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	var files map[string]string
	switch {
	case *database != "" && *expand:
		files, err = migrations.ExpandFilesFor(ctx, *database, l.Layout)
	case *database != "":
		files, err = migrations.FilesFor(ctx, *database, l.Layout)
	case *expand:
		files, err = migrations.ExpandFiles(l.Layout)
	default:
		files, err = migrations.Files(l.Layout)
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return fmt.Errorf("create --dir %s: %w", *dir, err)
	}
	// golang-migrate reads every file of the directory: one left by another
	// layout or an older version would be applied with ours.
	existing, err := filepath.Glob(filepath.Join(*dir, "*.sql"))
	if err != nil {
		return err
	}
	var stale []string
	for _, p := range existing {
		if _, ours := files[filepath.Base(p)]; !ours {
			stale = append(stale, filepath.Base(p))
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("--dir %s already holds migration files this layout does not produce (%s); golang-migrate would apply them too: write into an empty directory", *dir, strings.Join(stale, ", "))
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(*dir, n), []byte(files[n]), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", n, err)
		}
		fmt.Fprintln(e.stdout, filepath.Join(*dir, n))
	}
	fmt.Fprintf(e.stdout, "wrote %d files for %s\n", len(names), describeLayout(l))
	if *database == "" {
		fmt.Fprintf(e.stdout, "note: written without --database, the files grant the runtime's tables to no role: a role with DML on the queue's tables only would fail to enqueue (42501) until granted; write them with --database to include the grants\n")
	}
	return nil
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
