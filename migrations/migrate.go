package migrations

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/migrate-unique/migrate-unique/internal/lockid"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
)

// Defaults of Options.
const (
	DefaultLockTimeout = 2 * time.Second
	// DefaultMaxAttempts: under traffic whose own transactions take the
	// queue's tables in cyclic orders (plain-jobs 0.38's enqueue against
	// its claim), the cutover and the cutover back needed up to 8 attempts
	// in 20 measured rounds each (docs/migration.md, "How many attempts");
	// 10 left almost no margin. 30 attempts wait at most about 3 minutes
	// in all at the default LockTimeout.
	DefaultMaxAttempts     = 30
	DefaultLongTransaction = time.Minute
	DefaultProgressEvery   = 5 * time.Second
	DefaultDrainTimeout    = 10 * time.Minute
)

// Options tunes Up and Down. The zero value is usable.
type Options struct {
	// LockTimeout bounds every wait for a lock on a queue table; a writer
	// queued behind the migration waits at most this long per attempt.
	// Default 2s.
	LockTimeout time.Duration
	// MaxAttempts bounds the retries of a step that hit a lock timeout
	// (55P03) or a deadlock (40P01). Default 10.
	MaxAttempts int
	// LongTransaction: the preflight refuses to start while another session
	// holding a lock on a queue table has been in a transaction (or idle in
	// one) longer than this. Default 1m.
	LongTransaction time.Duration
	// Out receives one line per step and the index builds' progress; nil
	// prints nothing.
	Out io.Writer
	// Terminal redraws a progress bar on Out instead of printing a line
	// every ProgressEvery.
	Terminal bool
	// ProgressEvery is the interval of progress lines. Default 5s.
	ProgressEvery time.Duration
	// OnStep is called after every step, done or skipped.
	OnStep func(StepResult)
	// BeforeStep is called before every step that has work to do, after
	// the run recorded its intent to take the step in the version table.
	// The step runs when it returns; a run whose context is cancelled
	// meanwhile stops there, as after a kill.
	BeforeStep func(ctx context.Context, s StepResult)
	// OnRetry is called when a step could not take a lock (or hit a
	// deadlock) and will be tried again after wait.
	OnRetry func(step string, attempt int, wait time.Duration, err error)
	// StopAfterStep, when > 0, stops the run with ErrStopped right after
	// step number StopAfterStep (1-based): a test hook that simulates a
	// kill between two steps.
	StopAfterStep int
	// Logger receives debug records of retries; nil discards them.
	Logger *slog.Logger
	// OnProgress receives an index build's progress every ProgressEvery
	// (with or without Out), for a caller that renders it itself (the
	// CLI's --json).
	OnProgress func(Progress)
	// DropOperatorData makes Down drop the runtime's tables and the
	// skip-metadata column even while they hold operator data (limit
	// overrides, class pauses, live slot leases, skip records), instead of
	// keeping them.
	DropOperatorData bool

	// Expand makes Up run only the expand phase of a rolling deploy
	// (expand.go): what the old application version lives with (counting
	// indexes, the runtime's tables and their grants, the skip-metadata
	// column) and the version schema of views that show the new column
	// names. Up without it on an expanded layout completes it.
	Expand bool
	// VersionSchema names the version schema Expand creates. Default
	// "<schema>_concurrency" (see DefaultVersionSchema).
	VersionSchema string
	// Contract makes Up drop the version schema of a migrated layout, once
	// no instance of the new version reads it any more.
	Contract bool
	// Force makes Up complete an expanded layout even while sessions of the
	// old application version still write (old_version_writing findings).
	Force bool
	// OldAppName is the application_name of the old application version's
	// sessions: every session with it counts as the old version, whatever
	// its last statement.
	OldAppName string
	// Drain makes Down first set each group the old unique rule would not
	// allow to limit 1 (an override in concurrency_limits) and wait, up to
	// DrainTimeout, for the extra jobs to finish (drain.go).
	Drain bool
	// ToExpanded makes Down stop at the expanded state: the unique rule
	// and the column name back, the counting indexes, the runtime's tables
	// and the version schema (made if missing) kept, so that the new
	// version (through the version schema) and the old one run side by
	// side again; a later Down rolls back the rest.
	ToExpanded bool
	// DrainTimeout bounds Drain's wait. Default 10m.
	DrainTimeout time.Duration
	// DrainPoll is how often Drain counts the groups left. Default 1s.
	DrainPoll time.Duration
}

func (o Options) withDefaults() Options {
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.LongTransaction <= 0 {
		o.LongTransaction = DefaultLongTransaction
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = DefaultProgressEvery
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.DrainPoll <= 0 {
		o.DrainPoll = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// StepResult is what one step did.
type StepResult struct {
	// Number is the step's 1-based position in the run.
	Number int
	// Name says what the step does.
	Name string
	// Table is the table the step touches, or "".
	Table string
	// Lock is the strongest lock the step takes on Table.
	Lock string
	// Skipped says why the step had nothing to do, or "".
	Skipped string
	// Attempts counts the tries (more than one after lock timeouts).
	Attempts int
	// Duration is the step's wall time, retries included.
	Duration time.Duration
	// LockHeld is how long the step held its ACCESS EXCLUSIVE lock (0 when
	// it takes none): from the lock to the commit's return or, for a step
	// that drops an index with no online drop, to its COMMIT (see Commit).
	LockHeld time.Duration
	// Commit is, for a step that drops an index with no online drop
	// (PlannedStep.DeletesIndexFiles), how long its COMMIT took: PostgreSQL
	// deletes the index's files there after releasing the locks, so writers
	// do not wait for it (docs/migration.md, "Indexes with no online
	// drop"). 0 for other steps.
	Commit time.Duration
}

// Report is what a run did.
type Report struct {
	// Direction is "up" or "down".
	Direction string
	// Before and After are the layout's states around the run.
	Before, After State
	// Findings are the preflight's notes.
	Findings []Finding
	// Steps lists every step in order.
	Steps []StepResult
	// Duration is the run's wall time.
	Duration time.Duration
	// LongestLock is the longest ACCESS EXCLUSIVE hold of any step, and
	// LongestLockStep names that step.
	LongestLock     time.Duration
	LongestLockStep string
	// Saved lists the unique rules the cutover dropped (up) or restored (down).
	Saved []SavedUnique
	// Kept lists what down left in place because it holds operator data,
	// one line each; KeptObjects says the same field by field.
	Kept        []string
	KeptObjects []KeptObject
}

// Summary is the one-line result: state, duration and longest lock.
func (r *Report) Summary() string {
	s := fmt.Sprintf("%s: %s -> %s in %s, longest lock %s", r.Direction, r.Before, r.After, r.Duration.Round(time.Millisecond), r.LongestLock.Round(time.Microsecond))
	if r.LongestLockStep != "" {
		s += " (" + r.LongestLockStep + ")"
	}
	return s
}

type stepKind int

const (
	// stepTx runs in one transaction with SET LOCAL lock_timeout, retried.
	stepTx stepKind = iota
	// stepConcurrent is one CONCURRENTLY statement, outside any transaction.
	stepConcurrent
	// stepPlain is one statement outside any transaction.
	stepPlain
)

// step is one unit of the migration: resumable on its own.
type step struct {
	name  string
	table string // quoted table, or ""
	lock  string
	kind  stepKind
	sql   string
	// exclusive lists the quoted tables the step locks ACCESS EXCLUSIVE
	// first, under a bounded wait, so the hold can be measured.
	exclusive []string
	skip      string
	// index is the quoted index a concurrent build creates: a leftover that
	// is invalid is dropped before each try.
	index string
	// unique marks down's rebuild of a unique rule: cancelled, its INVALID
	// index is dropped at once (it would reject duplicates meanwhile).
	unique bool
	// onError maps a step's failure to a better error (duplicates).
	onError func(ctx context.Context, err error) error
	// createsVersionTable marks up's first step: intent can be recorded
	// once it is done.
	createsVersionTable bool
	// partitioned, on a concurrent step, builds its index on a partitioned
	// table: ON ONLY the table, then per partition (partitions.go).
	partitioned *partitionedIndex
	// grows says the step's duration grows with the table (an index build
	// reads it all). No step that blocks writers (exclusive, or the
	// moments of a partitioned build) does so for a time that grows with
	// the table: what it must know about the rows it learns before.
	grows bool
	// dropsFiles marks a DROP under ACCESS EXCLUSIVE of an index that has
	// no online drop (a unique constraint's, a partitioned index;
	// docs/migration.md, "Indexes with no online drop"): the lock covers
	// catalog work only, and PostgreSQL deletes the index's files at commit
	// after releasing it, so the step's commit, not its lock, takes a time
	// that grows with the index.
	dropsFiles bool
	// phase marks up's steps that up --expand leaves out or replaces
	// (expand.go).
	phase stepPhase
	// dropViews lists quoted views the step drops first, each with a
	// statement of its own: the first under the attempt's whole lock wait,
	// each later one under laterLockWait, so that the step never waits long
	// for one view while holding another (an application transaction that
	// reads two views in its own order would otherwise be the deadlock
	// victim). sql may name them again (IF EXISTS): plan and the files show
	// it.
	dropViews []string
}

// blocksWriters says the step takes, at some moment, a lock that makes the
// queue's writers wait (always bounded by the lock timeout, and held for a
// time independent of the table's size).
func (s step) blocksWriters() bool { return len(s.exclusive) > 0 || s.partitioned != nil }

// stepPhase says where a step of up stands in a rolling deploy.
type stepPhase int

const (
	// phaseExpand: the old application version lives with it.
	phaseExpand stepPhase = iota
	// phaseComplete: the cutover and what follows it; up --expand leaves
	// it out.
	phaseComplete
	// phaseAnalyze and phaseFinish: ANALYZE and the record of the state.
	phaseAnalyze
	phaseFinish
)

// runner holds a run's connection and options.
type runner struct {
	url  string
	l    layout.Resolved
	opts Options
	conn *pgx.Conn
	pid  uint32
	// appName is the run's application_name (see applicationName).
	appName string
	// direction is "up" or "down" for a run that changes the database.
	direction string
	// deadlockTimeout is the server's deadlock_timeout (see
	// laterLockWait).
	deadlockTimeout time.Duration
	// phase names the steps in the intent a run records, when it is not
	// direction: "expand", "complete" (up on an expanded layout) or
	// "contract" (expand.go).
	phase string
	// versionTable says the version table (with its step columns) exists,
	// so that intent can be recorded in it.
	versionTable bool
	// intentColumns says the version table is known to have its step
	// columns.
	intentColumns bool
	// pooler is set when the connection goes through a pooler (read-only
	// runs go on; up and down refuse).
	pooler *PoolerError
	// locked says the run holds its session advisory lock.
	locked bool
	// pinned is the transaction a read-only run reads in when its session
	// could not start with the pinned search_path (a pooler refused it):
	// its first statement pins it (pgurl.PinTx); inTx nests in it.
	pinned pgx.Tx
	// hiddenSeen is when the run first saw each lock holder it cannot see
	// in pg_stat_activity (see hiddenLongHolder).
	hiddenSeen map[holder]time.Time
	// lockEdges counts, for each pair of tables, how often the
	// application was seen taking the first before the second (lockorder.go).
	lockEdges map[lockEdge]int
	// lastBlockers are the sessions that held the table the last ended
	// lock wait was for.
	lastBlockers []LockHolder
	// lastCommit is the COMMIT's time of the last step that drops an index
	// with no online drop (StepResult.Commit).
	lastCommit time.Duration
}

// connect opens a second connection of the run (progress, cleanup), named
// as the run's own in pg_stat_activity.
func (r *runner) connect(ctx context.Context) (*pgx.Conn, error) {
	return pgurl.Connect(ctx, r.url, r.appName)
}

// applicationName names a run's session in pg_stat_activity, with the
// process and host that started it, so that a later run can tell a session
// whose process is gone (killed while the server went on building an
// index) from a run in progress.
func applicationName(direction string) string {
	host, _ := os.Hostname()
	name := fmt.Sprintf("migrate-unique %s pid=%d host=%s", direction, os.Getpid(), host)
	if len(name) > 63 {
		name = name[:63] // PostgreSQL truncates it there
	}
	return name
}

var applicationNameRE = regexp.MustCompile(`^migrate-unique (\w+) pid=(\d+) host=(.*)$`)

// newRunner resolves l, the one place a database entry point (Up, Down,
// Plan, Status, FilesFor) defaults and validates its layout, and connects.
// direction is "up" or "down" for a run that changes the database, else
// the read-only command's name.
func newRunner(ctx context.Context, url string, l layout.Layout, opts Options, direction string) (*runner, error) {
	rl, err := l.Resolve()
	if err != nil {
		return nil, err
	}
	appName := applicationName(direction)
	conn, err := pgurl.Connect(ctx, url, appName)
	if err != nil {
		return nil, err
	}
	r := &runner{url: url, l: rl, opts: opts.withDefaults(), conn: conn, pid: conn.PgConn().PID(), appName: appName, lockEdges: map[lockEdge]int{}}
	// Through a pooler, the process id the connection was given is the
	// pooler's, not the server process's that runs the statements.
	var serverPID uint32
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.pg_backend_pid()").Scan(&serverPID); err != nil {
		r.close()
		return nil, fmt.Errorf("read the server process id: %w", err)
	}
	if serverPID != r.pid {
		r.pooler = &PoolerError{ServerPID: serverPID, ConnectionPID: r.pid}
	}
	if direction != "up" && direction != "down" {
		// Read-only: no session setting, no lock. A session the pooler
		// would not let start with the pinned search_path reads in one
		// transaction that pins it first, rolled back at close.
		if !pgurl.Pinned(conn) {
			tx, err := pgurl.PinTx(ctx, conn)
			if err != nil {
				r.close()
				return nil, fmt.Errorf("pin the search_path of a session the pooler started without it: %w", err)
			}
			r.pinned = tx
		}
		return r, nil
	}
	if r.pooler != nil {
		r.close()
		return nil, r.pooler
	}
	// A run never depends on the server's or role's defaults for these.
	if _, err := conn.Exec(ctx, "SET lock_timeout = 0; SET statement_timeout = 0; SET idle_in_transaction_session_timeout = 0"); err != nil {
		r.close()
		return nil, fmt.Errorf("configure the session: %w", err)
	}
	var deadlockMS float64
	if err := conn.QueryRow(ctx, "SELECT EXTRACT(epoch FROM pg_catalog.current_setting('deadlock_timeout')::pg_catalog.interval)::float8 * 1000").Scan(&deadlockMS); err != nil {
		r.close()
		return nil, fmt.Errorf("read deadlock_timeout: %w", err)
	}
	r.deadlockTimeout = time.Duration(deadlockMS * float64(time.Millisecond))
	return r, nil
}

// ErrPooler is wrapped by the error of Up and Down through a connection
// pooler or proxy.
var ErrPooler = errors.New("connected through a connection pooler")

// PoolerError says that the connection goes through a pooler or proxy:
// the server process that ran a statement is not the one the connection
// was given at startup. Up and Down refuse before any change, because a
// run needs one server session throughout (its run lock and its session
// settings), and a transaction-mode pooler such as PgBouncer shares server
// sessions between clients transaction by transaction: the lock would stay
// on a pooled connection and the settings would reach other clients.
// errors.Is(err, ErrPooler) holds.
type PoolerError struct {
	// ServerPID is the server process that answered; ConnectionPID the
	// process id the pooler gave the connection.
	ServerPID, ConnectionPID uint32
}

// Is makes errors.Is(err, ErrPooler) true.
func (e *PoolerError) Is(target error) bool { return target == ErrPooler }

// Error says what was found and what to do.
func (e *PoolerError) Error() string {
	return fmt.Sprintf("connected through a connection pooler or proxy (the statements ran in server process %d, the connection was given process id %d): up and down need one server session for the whole run (a run lock and session settings), which a transaction-mode pooler such as PgBouncer shares with other clients between transactions. Connect directly to PostgreSQL (the server's host and port, not the pooler's); nothing was changed", e.ServerPID, e.ConnectionPID)
}

func (r *runner) lockID() int64 { return lockid.For("migrate-unique", r.l.Schema+"/"+layoutID(r.l)) }

// lock takes the layout's run lock (a session advisory lock): no second run.
// When another session holds it, the error is a *BusyError naming it.
func (r *runner) lock(ctx context.Context) error {
	var ok bool
	if err := r.conn.QueryRow(ctx, "SELECT pg_catalog.pg_try_advisory_lock($1::pg_catalog.int8)", r.lockID()).Scan(&ok); err != nil {
		return fmt.Errorf("take the run lock: %w", err)
	}
	if ok {
		r.locked = true
		return nil
	}
	h, err := r.holder(ctx)
	if err != nil {
		return err
	}
	if h == nil {
		return &BusyError{} // released meanwhile: still refuse, the next run goes
	}
	return h
}

// holder describes, read-only, the session that holds the layout's run
// lock, or returns nil when it is free.
func (r *runner) holder(ctx context.Context) (*BusyError, error) {
	var h BusyError
	var age float64
	err := r.conn.QueryRow(ctx, `SELECT a.pid, coalesce(a.application_name, ''), coalesce(a.state, ''), left(coalesce(a.query, ''), 200),
       coalesce(extract(epoch FROM now() - CASE WHEN a.state = 'active' THEN a.query_start ELSE a.state_change END), 0)::float8,
       NOT `+sessionVisible+`
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.pid <> pg_backend_pid()
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid::bigint = ($1::bigint >> 32) & 4294967295 AND l.objid::bigint = $1::bigint & 4294967295
LIMIT 1`, r.lockID()).Scan(&h.PID, &h.Application, &h.State, &h.Query, &age, &h.Hidden)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the run lock's holder: %w", err)
	}
	h.Age = time.Duration(age * float64(time.Second))
	if m := applicationNameRE.FindStringSubmatch(h.Application); m != nil {
		h.ClientPID, _ = strconv.Atoi(m[2])
		h.ClientHost = m[3]
		if host, err := os.Hostname(); err == nil && host == h.ClientHost && h.ClientPID > 0 {
			h.Orphaned = processGone(h.ClientPID)
		}
	}
	return &h, nil
}

// processGone reports whether no process pid exists on this host.
func processGone(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return true
	}
	err = p.Signal(syscall.Signal(0))
	return errors.Is(err, os.ErrProcessDone) || errors.Is(err, syscall.ESRCH)
}

// BusyError says that a session holds the layout's run lock: another run in
// progress, or the server session of a run whose process was killed while
// the server went on with its statement (a CREATE INDEX CONCURRENTLY goes on
// until it finishes, holding the lock). errors.Is(err, ErrBusy) holds.
type BusyError struct {
	// PID is the holding session's backend process id (0 when unknown).
	PID int
	// Application is its application_name; ClientPID and ClientHost the
	// process and host of the migrate-unique run that opened it, when the
	// name says so.
	Application string
	ClientPID   int
	ClientHost  string
	// State is the session's state (active, idle, ...), Query its current
	// or last statement, and Age how long it has been in that state.
	State, Query string
	Age          time.Duration
	// Orphaned says that the run that opened the session was on this host
	// and its process no longer exists: nothing will ever use the session.
	Orphaned bool
	// Hidden says the connected role cannot see the session's state, query
	// and age (another role's session, and no pg_read_all_stats).
	Hidden bool
}

// Is makes errors.Is(err, ErrBusy) true.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// Error names the session, what it runs and since when, and the command
// that ends it.
func (e *BusyError) Error() string {
	if e.PID == 0 {
		return ErrBusy.Error()
	}
	what := fmt.Sprintf("backend pid %d, %s for %s", e.PID, e.State, e.Age.Round(time.Second))
	if e.Query != "" {
		what += fmt.Sprintf(": %q", e.Query)
	}
	if e.Hidden {
		what = fmt.Sprintf("backend pid %d of another role: its state, query and age are hidden from this role without pg_read_all_stats", e.PID)
	}
	end := fmt.Sprintf("SELECT pg_terminate_backend(%d)", e.PID)
	if e.Orphaned {
		return fmt.Sprintf("an orphaned session holds this layout's run lock: the migrate-unique run that opened it (process %d on this host) is gone, but the server goes on with its statement (%s). End it with %s (an index it was building is left INVALID, and the next run drops and rebuilds it), then run again", e.ClientPID, what, end)
	}
	client := "its client"
	if e.ClientPID > 0 {
		client = fmt.Sprintf("process %d on host %s", e.ClientPID, e.ClientHost)
	}
	return fmt.Sprintf("another migrate-unique run is working on this layout (%s; started by %s). Wait for it to finish; if that process is gone (killed), the session is orphaned: end it with %s, then run again", what, client, end)
}

func (r *runner) close() {
	if r.conn != nil && r.conn.IsClosed() && r.locked {
		// The server did not answer a cancel request within
		// pgurl.CancelWait (or the connection broke): its session may go on.
		r.printf("the connection to the server was lost before its statement was seen to end: its session (backend pid %d) may still run it and hold the run lock; 'migrate-unique status' shows it, and SELECT pg_cancel_backend(%d) ends the statement\n", r.pid, r.pid)
	}
	if r.pinned != nil && r.conn != nil && !r.conn.IsClosed() {
		_ = r.pinned.Rollback(context.Background()) // it only read
		r.pinned = nil
	}
	if r.conn != nil {
		// Unlock before closing: a backend exits asynchronously, and a run
		// started right after this one must not find the lock still held.
		if r.locked {
			_, _ = r.conn.Exec(context.Background(), "SELECT pg_catalog.pg_advisory_unlock($1::pg_catalog.int8)", r.lockID())
		}
		_ = r.conn.Close(context.Background())
	}
}

func (r *runner) printf(format string, args ...any) {
	if r.opts.Out != nil {
		fmt.Fprintf(r.opts.Out, format, args...)
	}
}

// retryable reports a lock timeout, a deadlock, the statement timeout that
// bounds our own lock acquisition, or a long lock holder we did not queue
// behind.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	var h *HolderError
	return errors.As(err, &h) || errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40P01" || pgErr.Code == "57014")
}

// HolderError says that a step did not even queue for its exclusive lock,
// because another session has held a lock on the table for longer than the
// first attempt's lock wait (see lockWait): queueing behind it would stall
// every writer for a whole attempt. The step is retried as after a lock
// timeout.
type HolderError struct {
	// PID is the holding session's backend process id.
	PID int
	// Table is the locked table and Mode the lock it holds, as pg_locks
	// names them.
	Table, Mode string
	// Age is how long its transaction has been open.
	Age time.Duration
	// Query is the start of its current or last query.
	Query string
}

// Error names the session, its lock and its query.
func (e *HolderError) Error() string {
	return fmt.Sprintf("session pid %d has held %s on %s for %s in a transaction (%q); not queueing behind it", e.PID, e.Mode, e.Table, e.Age.Round(time.Millisecond), e.Query)
}

// longHolder returns the oldest other session that holds a lock on one of
// tables and whose transaction is older than the first attempt's lock wait.
func (r *runner) longHolder(ctx context.Context, tables []string) (*HolderError, error) {
	var h HolderError
	var age float64
	err := r.conn.QueryRow(ctx, `SELECT a.pid, lk.relation::regclass::text, lk.mode, extract(epoch FROM now() - a.xact_start)::float8, left(coalesce(a.query, ''), 120)
FROM pg_locks lk JOIN pg_stat_activity a ON a.pid = lk.pid
WHERE lk.granted AND lk.pid <> pg_backend_pid() AND lk.relation IN (SELECT unnest($1::text[])::regclass) AND `+thisDatabase+`
  AND a.xact_start < now() - make_interval(secs => $2) AND NOT `+yieldingAutovacuum+`
ORDER BY a.xact_start LIMIT 1`, tables, r.lockWait(1).Seconds()).Scan(&h.PID, &h.Table, &h.Mode, &age, &h.Query)
	if errors.Is(err, pgx.ErrNoRows) {
		return r.hiddenLongHolder(ctx, tables)
	}
	if err != nil {
		return nil, fmt.Errorf("read the lock holders: %w", err)
	}
	h.Age = time.Duration(age * float64(time.Second))
	return &h, nil
}

// backoff is the jittered wait before attempt n+1: exponential from 100ms,
// capped at 5s, uniformly drawn from its upper half.
func backoff(n int) time.Duration {
	d := 100 * time.Millisecond << min(n-1, 6)
	d = min(d, 5*time.Second)
	return d/2 + rand.N(d/2+1)
}

// recordIntent writes, before a step, which run is taking which step, so
// that a run killed in the step leaves a trace that status reads ("a down
// stopped at step 2/6, rebuild unique rule ...") and the next run of either
// direction knows the layout is half-way. It commits on its own, before the
// step starts.
func (r *runner) recordIntent(ctx context.Context, n, total int, s step) error {
	if !r.versionTable || r.direction == "" {
		return nil // up's first step creates the table and its row
	}
	if !r.intentColumns {
		// A version table written by an older version of the tool has no
		// step columns yet.
		if _, err := r.conn.Exec(ctx, "ALTER TABLE "+r.l.Table(layout.VersionTable)+
			" ADD COLUMN IF NOT EXISTS step text NULL, ADD COLUMN IF NOT EXISTS step_started_at timestamptz NULL"); err != nil {
			return fmt.Errorf("add the step columns to %s: %w", r.l.Table(layout.VersionTable), err)
		}
		r.intentColumns = true
	}
	state := map[string]string{"up": "migrating", "down": "rolling back"}[r.direction]
	_, err := r.conn.Exec(ctx, "UPDATE "+r.l.Table(layout.VersionTable)+
		" SET state = $1, step = $2, step_started_at = now(), updated_at = now() WHERE layout = $3",
		state, fmt.Sprintf("%s %d/%d: %s", cmp.Or(r.phase, r.direction), n, total, s.name), layoutID(r.l))
	if err != nil {
		return fmt.Errorf("record the intent of step %d (%s) in %s: %w", n, s.name, r.l.Table(layout.VersionTable), err)
	}
	return nil
}

// execute runs steps in order and fills rep.
func (r *runner) execute(ctx context.Context, steps []step, rep *Report) error {
	for i, s := range steps {
		res := StepResult{Number: i + 1, Name: s.name, Table: s.table, Lock: s.lock, Skipped: s.skip}
		start := time.Now()
		if s.skip == "" {
			if err := r.recordIntent(ctx, i+1, len(steps), s); err != nil {
				return err
			}
			if r.opts.BeforeStep != nil {
				r.opts.BeforeStep(ctx, res)
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("before step %d (%s): %w", i+1, s.name, err)
				}
			}
			if r.opts.Terminal {
				// Off a terminal the done line below is the step's one line.
				r.printf("step %d/%d: %s ...\n", i+1, len(steps), s.name)
			}
			var err error
			r.lastCommit = 0
			res.Attempts, res.LockHeld, err = r.runStep(ctx, s)
			res.Commit = r.lastCommit
			if err == nil && s.createsVersionTable {
				r.versionTable, r.intentColumns = true, true
			}
			if err != nil {
				res.Duration = time.Since(start)
				rep.Steps = append(rep.Steps, res)
				return err
			}
			res.Duration = time.Since(start)
			if res.Commit > 0 {
				r.printf("step %d/%d: %s: done in %s (attempts %d, lock held %s up to its COMMIT; the COMMIT took %s, deleting the dropped index's files after releasing the locks)\n", i+1, len(steps), s.name, res.Duration.Round(time.Millisecond), res.Attempts, res.LockHeld.Round(time.Microsecond), res.Commit.Round(time.Microsecond))
			} else {
				r.printf("step %d/%d: %s: done in %s (attempts %d, lock held %s)\n", i+1, len(steps), s.name, res.Duration.Round(time.Millisecond), res.Attempts, res.LockHeld.Round(time.Microsecond))
			}
		} else {
			r.printf("step %d/%d: %s: skipped, %s\n", i+1, len(steps), s.name, s.skip)
		}
		rep.Steps = append(rep.Steps, res)
		if res.LockHeld > rep.LongestLock {
			rep.LongestLock, rep.LongestLockStep = res.LockHeld, s.name
		}
		if r.opts.OnStep != nil {
			r.opts.OnStep(res)
		}
		if r.opts.StopAfterStep > 0 && i+1 == r.opts.StopAfterStep {
			return fmt.Errorf("after step %d (%s): %w", i+1, s.name, ErrStopped)
		}
	}
	return nil
}

func (r *runner) runStep(ctx context.Context, s step) (attempts int, held time.Duration, err error) {
	for attempts = 1; ; attempts++ {
		switch s.kind {
		case stepTx:
			held, err = r.runTx(ctx, s, attempts, attempts == r.opts.MaxAttempts)
		case stepConcurrent:
			if s.partitioned != nil {
				// Its parts retry on their own (runPartitioned).
				err = r.runPartitioned(ctx, s)
				if err != nil && s.onError != nil {
					err = s.onError(ctx, err)
				}
				if err != nil {
					return attempts, 0, fmt.Errorf("step %q: %w", s.name, err)
				}
				return attempts, 0, nil
			}
			err = r.runConcurrent(ctx, s)
		default:
			_, err = r.conn.Exec(ctx, s.sql)
		}
		if err == nil {
			return attempts, held, nil
		}
		if s.onError != nil {
			if e := s.onError(ctx, err); e != err {
				return attempts, 0, e
			}
		}
		if !retryable(err) || ctx.Err() != nil {
			return attempts, 0, fmt.Errorf("step %q: %w", s.name, err)
		}
		if attempts >= r.opts.MaxAttempts {
			return attempts, 0, &LockError{Step: s.name, Attempts: attempts, Err: err, Blockers: r.lastBlockers}
		}
		wait := backoff(attempts)
		r.opts.Logger.Debug("lock not available, retrying", "step", s.name, "attempt", attempts, "wait", wait, "err", err)
		if r.opts.OnRetry != nil {
			r.opts.OnRetry(s.name, attempts, wait, err)
		}
		by := ""
		if len(r.lastBlockers) > 0 {
			by = " (held by " + blockersString(r.lastBlockers) + ")"
		}
		r.printf("step %s: attempt %d/%d: %v%s; retrying in %s\n", s.name, attempts, r.opts.MaxAttempts, err, by, wait.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return attempts, 0, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// lockWait is how long attempt n of a step waits for its locks: an eighth
// of LockTimeout at first, doubling up to LockTimeout. A lock that is free
// is granted at once; a holder that just started is given a short wait, and
// after that the long-holder check keeps the step from queueing behind it.
func (r *runner) lockWait(n int) time.Duration {
	first := max(r.opts.LockTimeout/8, 10*time.Millisecond)
	return min(r.opts.LockTimeout, first<<min(n-1, 10))
}

// laterLockWait is how long a step waits, in milliseconds, for each of
// its exclusive locks after the first of n, while it holds the earlier
// ones: their waits add up to at most half the server's deadlock_timeout,
// and none is longer than the attempt's wait ms. An application session
// that waits for a table the step holds starts its deadlock check
// deadlock_timeout after it began waiting, which is after the step took
// its first lock: by then the step has stopped waiting (55P03, retried),
// so a deadlock between them is always broken by the step.
func (r *runner) laterLockWait(ms int64, n int) int64 {
	if n <= 1 {
		return ms
	}
	budget := r.deadlockTimeout.Milliseconds() / 2 / int64(n-1)
	return max(min(ms, budget), 1)
}

// runTx runs the step in one transaction. Its exclusive locks are taken
// first, in one statement bounded by both lock_timeout and statement_timeout
// so that a writer queued behind it waits at most LockTimeout in all.
func (r *runner) runTx(ctx context.Context, s step, attempt int, last bool) (held time.Duration, err error) {
	ms := r.lockWait(attempt).Milliseconds()
	r.lastBlockers = nil
	if len(s.exclusive) > 0 && !last {
		// Queueing behind a transaction that is already long would only
		// stall the writers behind us for a whole lock timeout: wait it out
		// without queueing (the last attempt queues anyway).
		if h, err := r.longHolder(ctx, s.exclusive); err != nil || h != nil {
			if err != nil {
				return 0, err
			}
			return 0, h
		}
	}
	var acquired, done time.Time
	err = r.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = '%dms'", ms)); err != nil {
			return err
		}
		if len(s.exclusive) > 0 {
			// Release the exclusive locks at commit without waiting for the
			// WAL flush: a crash can only lose this whole transaction (every
			// later one depends on it in WAL order), and a re-run redoes it.
			// The final "record migrated" step commits synchronously.
			if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
				return err
			}
			// One table at a time. The first waits the attempt's whole
			// wait: the run holds nothing yet. Each later one waits at most
			// laterLockWait: an application session that holds it and
			// waits for a table the run holds already (plain-jobs 0.37's
			// worker takes them in its own order) is in a deadlock with
			// the run, and the run must give way (and retry) before that
			// session's deadlock check makes it the victim.
			// The tables go in the order the application takes them
			// (lockorder.go); each lock after a savepoint, so that when
			// its wait ends the step reads, still holding the earlier
			// ones, who held it and what they wait for.
			order := r.lockOrder(s)
			later := r.laterLockWait(ms, len(order))
			for i, t := range order {
				wait := ms
				if i > 0 {
					wait = later
				}
				if _, err := tx.Exec(ctx, fmt.Sprintf("SAVEPOINT migrate_unique_lock; SET LOCAL lock_timeout = '%dms'; SET LOCAL statement_timeout = '%dms'; LOCK TABLE %s IN ACCESS EXCLUSIVE MODE", wait, wait, t)); err != nil {
					if lockWaitEnded(ctx, err) {
						r.observeBlockers(ctx, tx, t, order[:i])
					}
					return err
				}
				if _, err := tx.Exec(ctx, "RELEASE SAVEPOINT migrate_unique_lock"); err != nil {
					return err
				}
				if i == 0 {
					acquired = time.Now()
				}
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = '%dms'; SET LOCAL statement_timeout = 0", ms)); err != nil {
				return err
			}
		}
		if len(s.dropViews) > 0 {
			later := r.laterLockWait(ms, len(s.dropViews))
			for i, v := range s.dropViews {
				wait := ms
				if i > 0 {
					wait = later
				}
				if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = '%dms'; SET LOCAL statement_timeout = '%dms'; DROP VIEW IF EXISTS %s", wait, wait, v)); err != nil {
					return err
				}
				if i == 0 {
					acquired = time.Now()
				}
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = '%dms'; SET LOCAL statement_timeout = 0", ms)); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, s.sql)
		done = time.Now()
		return err
	})
	if err != nil {
		return 0, err
	}
	switch {
	case acquired.IsZero():
	case s.dropsFiles:
		// PostgreSQL releases the locks before it deletes the dropped
		// index's files in the COMMIT (xact.c, CommitTransaction): the
		// hold writers see ends there, not at the COMMIT's return.
		held, r.lastCommit = done.Sub(acquired), time.Since(done)
	default:
		held = time.Since(acquired)
	}
	return held, nil
}

// interrupted makes the error of a run whose context is done say so to
// errors.Is (context.Canceled or context.DeadlineExceeded), whatever ended
// the run: the server's cancellation of its statement (57014), the context
// itself, or a failure that followed. Its text is err's.
func interrupted(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ctx.Err()) {
		return err
	}
	return &interruptedError{err: err, ctxErr: ctx.Err()}
}

type interruptedError struct{ err, ctxErr error }

func (e *interruptedError) Error() string   { return e.err.Error() }
func (e *interruptedError) Unwrap() []error { return []error{e.err, e.ctxErr} }

// inTx runs fn in a transaction and commits it. On failure it rolls back
// even when ctx is done (an interrupt): rolled back with a done context,
// pgx would drop the connection instead, and the run would lose the
// orderly release of its run lock.
func (r *runner) inTx(ctx context.Context, fn func(pgx.Tx) error) (err error) {
	begin := r.conn.Begin
	if r.pinned != nil {
		begin = r.pinned.Begin // a savepoint in the pinned transaction
	}
	tx, err := begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pgurl.CancelWait)
			defer cancel()
			_ = tx.Rollback(rctx)
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// runConcurrent runs one CONCURRENTLY statement, first dropping an invalid
// leftover of the index it builds, with index build progress on Out.
func (r *runner) runConcurrent(ctx context.Context, s step) error {
	if s.index != "" {
		var invalid bool
		err := r.conn.QueryRow(ctx, "SELECT NOT x.indisvalid FROM pg_index x WHERE x.indexrelid = to_regclass($1)", s.index).Scan(&invalid)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if invalid {
			r.printf("dropping invalid leftover index %s before rebuilding it\n", s.index)
			if _, err := r.conn.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+s.index); err != nil {
				return err
			}
		} else if err == nil {
			return nil // built by an earlier run
		}
	}
	stop := r.watchProgress(ctx, s.name)
	defer stop()
	_, err := r.conn.Exec(ctx, s.sql)
	if err != nil && ctx.Err() != nil && s.unique && s.index != "" {
		r.dropCancelledUnique(s.index)
	}
	return err
}

// dropAfterInterruptWait bounds the wait of dropCancelledUnique.
const dropAfterInterruptWait = 10 * time.Second

// dropCancelledUnique drops the INVALID unique index a cancelled rebuild
// (Ctrl-C during down) left behind: until then it rejects duplicates of new
// rows, so enqueues over a limit of 1 would fail with 23505. It waits at
// most LockTimeout, and never more than dropAfterInterruptWait (DROP INDEX
// CONCURRENTLY waits for older transactions; an interrupted command must
// end soon), then cancels the drop on the server; what it cannot drop,
// status shows and the next run drops.
func (r *runner) dropCancelledUnique(index string) {
	ctx, cancel := context.WithTimeout(context.Background(), min(max(r.opts.LockTimeout, time.Second), dropAfterInterruptWait))
	defer cancel()
	conn, err := r.connect(ctx)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	var invalid bool
	if err := conn.QueryRow(ctx, "SELECT NOT x.indisvalid FROM pg_index x WHERE x.indexrelid = to_regclass($1)", index).Scan(&invalid); err != nil || !invalid {
		return
	}
	if _, err := conn.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+index); err == nil {
		r.printf("dropped the INVALID unique index %s the interrupted rebuild left\n", index)
	}
}
