// Package migration measures the online migration (migrations.Up) against
// a naive one under the same live load, side by side. It backs
// `migrate-unique bench migration`.
package migration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// Options configures Run.
type Options struct {
	// DatabaseURL points at a server where the benchmark may create (and
	// afterwards drop) two databases.
	DatabaseURL string
	// Rows is the number of pending requests seeded (plus a tenth as
	// running processes and a fifth as results). Default 1,000,000.
	Rows int
	// LockTimeout is Up's lock timeout. Default 2s.
	LockTimeout time.Duration
	// Hold is how long the reader holds its lock on the requests table,
	// from just before the cutover. Default 3 x LockTimeout.
	Hold time.Duration
	// WriterInterval paces the live writer. Default 5ms.
	WriterInterval time.Duration
	// KeepExistingIndexes keeps plain-jobs' own (class, key) indexes, which
	// Up reuses; by default they are dropped so that both migrations build
	// their counting indexes under load.
	KeepExistingIndexes bool
	// Keep leaves the two databases in place.
	Keep bool
	// Out receives progress lines; nil prints nothing.
	Out io.Writer
}

// RunFigures is one migration under load.
type RunFigures struct {
	// Name says which migration ran.
	Name string
	// Duration is the migration's wall time.
	Duration time.Duration
	// Writes and FailedWrites count the writer's inserts during the run.
	Writes, FailedWrites int
	// FirstFailure is the first failed write's error, or "".
	FirstFailure string
	// WriterP50, WriterP99 and WriterMax are the writer's insert latencies.
	WriterP50, WriterP99, WriterMax time.Duration
	// ScheduleP99 and ScheduleMax count each write's latency from when it
	// was due on the writer's fixed schedule, so that a stall weighs as
	// much as the writes it delayed (no coordinated omission); LateWrites
	// counts the writes completed more than 100ms after they were due.
	ScheduleP99, ScheduleMax time.Duration
	LateWrites               int
	// Exclusive is the longest ACCESS EXCLUSIVE hold seen per table, sampled
	// from pg_locks (an upper bound within one sampling interval).
	Exclusive map[string]time.Duration
	// Retries counts lock-timeout retries (ours only).
	Retries int
}

// Result is ours and the naive migration side by side.
type Result struct {
	// Options are the options the benchmark ran with, defaults filled in.
	Options Options
	// Ours is Up's run; Naive is the baseline's.
	Ours, Naive RunFigures
	// Server is the PostgreSQL version.
	Server string
}

func (o Options) withDefaults() Options {
	if o.Rows <= 0 {
		o.Rows = 1_000_000
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = migrations.DefaultLockTimeout
	}
	if o.Hold <= 0 {
		o.Hold = 3 * o.LockTimeout
	}
	if o.WriterInterval <= 0 {
		o.WriterInterval = 5 * time.Millisecond
	}
	return o
}

// Run seeds plain-jobs' tables, copies the database, and runs
// migrations.Up on one copy and a naive migration (plain CREATE INDEX, unguarded
// renames) on the other, each under the same load: a live writer that does
// not name the key column, and a reader that holds a lock on the requests
// table for Hold, taken just before the cutover.
func Run(ctx context.Context, o Options) (*Result, error) {
	o = o.withDefaults()
	// One writer for every goroutine of the run: the migration's progress,
	// the writer's and the sampler's lines interleave whole.
	o.Out = benchLog(o.Out)
	res := &Result{Options: o}
	logf := func(format string, args ...any) {
		if o.Out != nil {
			fmt.Fprintf(o.Out, format+"\n", args...)
		}
	}
	admin, err := connect(ctx, o.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer admin.Close(context.Background())
	if err := admin.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&res.Server); err != nil {
		return nil, err
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	suffix := hex.EncodeToString(rnd[:])
	oursDB, naiveDB := "mu_bench_migration_ours_"+suffix, "mu_bench_migration_naive_"+suffix
	oursURL, err := withDatabase(o.DatabaseURL, oursDB)
	if err != nil {
		return nil, err
	}
	naiveURL, _ := withDatabase(o.DatabaseURL, naiveDB)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+layout.Ident(oursDB)); err != nil {
		return nil, fmt.Errorf("create the benchmark database: %w", err)
	}
	if !o.Keep {
		defer func() {
			for _, db := range []string{oursDB, naiveDB} {
				_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+layout.Ident(db)+" WITH (FORCE)")
			}
		}()
	}
	logf("seeding %d requests into %s ...", o.Rows, oursDB)
	start := time.Now()
	if err := legacy.PlainJobs.LoadURL(ctx, oursURL, o.Rows); err != nil {
		return nil, err
	}
	if !o.KeepExistingIndexes {
		conn, err := connect(ctx, oursURL)
		if err != nil {
			return nil, err
		}
		_, err = conn.Exec(ctx, "DROP INDEX job_request_class_unique_key; DROP INDEX job_class_unique_key")
		conn.Close(context.Background())
		if err != nil {
			return nil, err
		}
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+layout.Ident(naiveDB)+" TEMPLATE "+layout.Ident(oursDB)); err != nil {
		return nil, fmt.Errorf("copy the benchmark database: %w", err)
	}
	logf("seeded and copied in %s", time.Since(start).Round(time.Second))

	l := legacy.PlainJobs.Resolved
	logf("ours: Up under load ...")
	res.Ours, err = benchRun(ctx, oursURL, l, o, "ours (online)", func(ctx context.Context, beforeCutover func()) (int, error) {
		var retries atomic.Int64
		// Up's first step is its version table, then one counting index
		// per active table, then the cutover.
		indexSteps := len(l.ActiveTables())
		_, err := migrations.Up(ctx, oursURL, l.Layout, migrations.Options{
			LockTimeout: o.LockTimeout,
			MaxAttempts: 100,
			Out:         o.Out,
			OnStep: func(r migrations.StepResult) {
				if r.Number == 1+indexSteps {
					beforeCutover()
				}
			},
			OnRetry: func(string, int, time.Duration, error) { retries.Add(1) },
		})
		return int(retries.Load()), err
	})
	if err != nil {
		return nil, err
	}
	logf("naive: CREATE INDEX and bare renames under the same load ...")
	res.Naive, err = benchRun(ctx, naiveURL, l, o, "naive (CREATE INDEX, bare rename)", func(ctx context.Context, beforeCutover func()) (int, error) {
		return 0, naiveMigration(ctx, naiveURL, l, beforeCutover)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// naiveMigration is what a hand-written migration does: plain CREATE INDEX,
// then renames and a DROP INDEX with no lock timeout, each autocommitted.
func naiveMigration(ctx context.Context, dbURL string, l layout.Resolved, beforeCutover func()) error {
	conn, err := connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	exec := func(sql string) error {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("naive migration: %s: %w", sql, err)
		}
		return nil
	}
	for _, t := range l.ActiveTables() {
		if err := exec("CREATE INDEX " + layout.Ident(t+"_concurrency_key_idx") + " ON " + l.Table(t) + " (" + layout.Ident(l.ClassColumn) + ", " + layout.Ident(layout.LegacyKeyColumn) + ")"); err != nil {
			return err
		}
	}
	beforeCutover()
	for _, t := range l.Tables() {
		if err := exec("ALTER TABLE " + l.Table(t) + " RENAME COLUMN " + layout.Ident(layout.LegacyKeyColumn) + " TO " + layout.Ident(layout.KeyColumn)); err != nil {
			return err
		}
	}
	if err := exec("DROP INDEX " + l.Table("plainjobs_jobrequest_unique_job_class_key")); err != nil {
		return err
	}
	for _, stmt := range l.RuntimeDDL() {
		if err := exec(stmt); err != nil {
			return err
		}
	}
	return exec("ANALYZE " + strings.Join(quotedTables(l), ", "))
}

func quotedTables(l layout.Resolved) []string {
	var ts []string
	for _, t := range l.Tables() {
		ts = append(ts, l.Table(t))
	}
	return ts
}

// benchRun runs migrate under a paced writer, with a reader that takes its
// lock when migrate calls beforeCutover, and a pg_locks sampler.
func benchRun(ctx context.Context, dbURL string, l layout.Resolved, o Options, name string,
	migrate func(ctx context.Context, beforeCutover func()) (int, error)) (RunFigures, error) {
	run := RunFigures{Name: name, Exclusive: map[string]time.Duration{}}
	log := o.Out
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup

	// Every connection is opened before any goroutine starts, so that a
	// failed connect never returns while a goroutine still uses one.
	var writer, sampler, reader *pgx.Conn
	for _, c := range []**pgx.Conn{&writer, &sampler, &reader} {
		conn, err := connect(ctx, dbURL)
		if err != nil {
			return run, err
		}
		defer conn.Close(context.Background())
		*c = conn
	}

	// The writer: one insert every WriterInterval, never naming the key.
	var mu sync.Mutex
	var lat, sched []time.Duration
	// The writer stops taking new writes once the migration is over
	// (stopAt), but still sends the ones that were due before, so that
	// the writes a stall delayed are all counted.
	var stopAt atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		next := time.Now()
		keyCol := layout.LegacyKeyColumn
		for i := 0; ; i++ {
			// An open-loop schedule: a stall delays every write due meanwhile,
			// and each one's latency counts from when it was due.
			next = next.Add(o.WriterInterval)
			if at := stopAt.Load(); at != 0 && next.UnixNano() > at {
				return
			}
			if d := time.Until(next); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
			if ctx.Err() != nil {
				return
			}
			start := time.Now()
			// plain-jobs' tables have no column default: the writer names
			// every NOT NULL column, the key column by the name it has (it
			// follows the cutover's rename, as redeployed code does).
			insert := func() error {
				_, err := writer.Exec(ctx, `INSERT INTO `+l.Table(l.RequestsTable)+` (created_at, uuid, job_class, source, priority, queue, retries, retry_attempt, `+keyCol+`)
VALUES (now(), gen_random_uuid(), $1, 'bench-writer', 0, 'default', 0, 0, '')`, fmt.Sprintf("app.jobs.Bench%d", i%4))
				return err
			}
			err := insert()
			if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "42703" && keyCol == layout.LegacyKeyColumn {
				keyCol = layout.KeyColumn
				err = insert()
			}
			d, late := time.Since(start), time.Since(next)
			if ctx.Err() != nil {
				return
			}
			mu.Lock()
			if err != nil {
				run.FailedWrites++
				if run.FirstFailure == "" {
					run.FirstFailure = pgurl.RedactError(dbURL, err).Error()
				}
			} else {
				lat = append(lat, d)
				sched = append(sched, late)
				if d > 100*time.Millisecond && log != nil {
					fmt.Fprintf(log, "slow write: %s (due %s before it completed)\n", d.Round(time.Millisecond), late.Round(time.Millisecond))
				}
			}
			mu.Unlock()
		}
	}()

	// The sampler: who holds ACCESS EXCLUSIVE on which table, every ~2ms.
	tables := l.Tables()
	wg.Add(1)
	go func() {
		defer wg.Done()
		since := map[string]time.Time{}
		for ctx.Err() == nil && stopAt.Load() == 0 {
			rows, err := sampler.Query(ctx, `SELECT c.relname::text FROM pg_locks k JOIN pg_class c ON c.oid = k.relation
WHERE k.mode = 'AccessExclusiveLock' AND k.granted AND c.relname = ANY ($1) AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())`, tables)
			if err != nil {
				return
			}
			held, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return
			}
			now := time.Now()
			mu.Lock()
			for _, t := range tables {
				if slices.Contains(held, t) {
					if since[t].IsZero() {
						since[t] = now
					}
					run.Exclusive[t] = max(run.Exclusive[t], now.Sub(since[t]))
				} else if !since[t].IsZero() {
					run.Exclusive[t] = max(run.Exclusive[t], now.Sub(since[t]))
					since[t] = time.Time{}
				}
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()

	// The reader: ACCESS SHARE on the requests table for Hold.
	readerDone := make(chan error, 1)
	beforeCutover := func() {
		acquired := make(chan error, 1)
		go func() {
			tx, err := reader.Begin(ctx)
			if err == nil {
				_, err = tx.Exec(ctx, "SELECT 1 FROM "+l.Table(l.RequestsTable)+" LIMIT 1")
			}
			acquired <- err
			if err != nil {
				readerDone <- err
				return
			}
			select {
			case <-time.After(o.Hold):
			case <-ctx.Done():
			}
			readerDone <- tx.Commit(context.Background())
		}()
		<-acquired
	}

	// Let the writer settle, then migrate.
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	lat, sched = lat[:0], sched[:0]
	mu.Unlock()
	start := time.Now()
	retries, migErr := migrate(ctx, beforeCutover)
	run.Duration = time.Since(start)
	run.Retries = retries
	stopAt.Store(time.Now().UnixNano())
	wg.Wait()
	select {
	case err := <-readerDone:
		if err != nil && !errors.Is(err, context.Canceled) && migErr == nil {
			migErr = fmt.Errorf("the lock-holding reader: %w", err)
		}
	default:
	}
	if migErr != nil {
		return run, fmt.Errorf("%s: %w", name, migErr)
	}
	slices.Sort(lat)
	slices.Sort(sched)
	run.Writes = len(lat) + run.FailedWrites
	if n := len(lat); n > 0 {
		run.WriterP50 = lat[n/2]
		run.WriterP99 = lat[min(n-1, n*99/100)]
		run.WriterMax = lat[n-1]
		run.ScheduleP99 = sched[min(n-1, n*99/100)]
		run.ScheduleMax = sched[n-1]
		for _, d := range sched {
			if d > 100*time.Millisecond {
				run.LateWrites++
			}
		}
	}
	return run, nil
}

func withDatabase(raw, db string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("the benchmark needs a postgres:// URL (it creates its own databases on that server)")
	}
	u.Path = "/" + db
	return u.String(), nil
}

// Print renders the two runs side by side with the targets of the issue.
func (r *Result) Print(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "bench migration: PostgreSQL %s, plain-jobs with %d requests (+%d processes, +%d results)\n", r.Server, o.Rows, o.Rows/10, o.Rows/5)
	fmt.Fprintf(w, "load: a writer inserting every %s without naming the key; a reader holding ACCESS SHARE on the requests table for %s from just before the cutover; lock timeout %s\n", o.WriterInterval, o.Hold, o.LockTimeout)
	if !o.KeepExistingIndexes {
		fmt.Fprintf(w, "plain-jobs' own (class, key) indexes dropped first, so both migrations build their counting indexes under load\n")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	ratio := func(naive, ours time.Duration) string {
		if ours <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.1fx", float64(naive)/float64(ours))
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	fmt.Fprintf(tw, "\t%s\t%s\tnaive/ours\t\n", r.Ours.Name, r.Naive.Name)
	fmt.Fprintf(tw, "migration duration\t%s\t%s\t%s\t\n", r.Ours.Duration.Round(time.Millisecond), r.Naive.Duration.Round(time.Millisecond), ratio(r.Naive.Duration, r.Ours.Duration))
	fmt.Fprintf(tw, "writes during the run\t%d\t%d\t\t\n", r.Ours.Writes, r.Naive.Writes)
	fmt.Fprintf(tw, "failed writes\t%d\t%d\t\t\n", r.Ours.FailedWrites, r.Naive.FailedWrites)
	fmt.Fprintf(tw, "writer p50\t%s\t%s\t%s\t\n", ms(r.Ours.WriterP50), ms(r.Naive.WriterP50), ratio(r.Naive.WriterP50, r.Ours.WriterP50))
	fmt.Fprintf(tw, "writer p99\t%s\t%s\t%s\t\n", ms(r.Ours.WriterP99), ms(r.Naive.WriterP99), ratio(r.Naive.WriterP99, r.Ours.WriterP99))
	fmt.Fprintf(tw, "writer max\t%s\t%s\t%s\t\n", ms(r.Ours.WriterMax), ms(r.Naive.WriterMax), ratio(r.Naive.WriterMax, r.Ours.WriterMax))
	fmt.Fprintf(tw, "writer p99 from schedule\t%s\t%s\t%s\t\n", ms(r.Ours.ScheduleP99), ms(r.Naive.ScheduleP99), ratio(r.Naive.ScheduleP99, r.Ours.ScheduleP99))
	fmt.Fprintf(tw, "writer max from schedule\t%s\t%s\t%s\t\n", ms(r.Ours.ScheduleMax), ms(r.Naive.ScheduleMax), ratio(r.Naive.ScheduleMax, r.Ours.ScheduleMax))
	fmt.Fprintf(tw, "writes > 100 ms late\t%d\t%d\t\t\n", r.Ours.LateWrites, r.Naive.LateWrites)
	for _, t := range legacy.PlainJobs.Layout.Tables() {
		fmt.Fprintf(tw, "longest ACCESS EXCLUSIVE on %s\t%s\t%s\t%s\t\n", t, ms(r.Ours.Exclusive[t]), ms(r.Naive.Exclusive[t]), ratio(r.Naive.Exclusive[t], r.Ours.Exclusive[t]))
	}
	fmt.Fprintf(tw, "lock retries (timeouts, long holders)\t%d\t-\t\t\n", r.Ours.Retries)
	tw.Flush()
	fmt.Fprintln(w)
	check := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	maxAE := time.Duration(0)
	for _, d := range r.Ours.Exclusive {
		maxAE = max(maxAE, d)
	}
	limit := o.LockTimeout + o.LockTimeout/10
	fmt.Fprintf(w, "targets (ours): writer max <= %s: %s; p99 <= 250 ms: %s; ACCESS EXCLUSIVE <= 100 ms per table: %s; 0 failed writes: %s\n",
		limit, check(r.Ours.WriterMax <= limit), check(r.Ours.WriterP99 <= 250*time.Millisecond), check(maxAE <= 100*time.Millisecond), check(r.Ours.FailedWrites == 0))
	if r.Ours.FirstFailure != "" || r.Naive.FirstFailure != "" {
		fmt.Fprintf(w, "first failed write: ours %q, naive %q\n", r.Ours.FirstFailure, r.Naive.FirstFailure)
	}
}

// benchLog prefixes every line written to w with the time of day, so that
// slow writes line up with the migration's steps; nil stays nil.
func benchLog(w io.Writer) io.Writer {
	if w == nil {
		return nil
	}
	return &stampWriter{w: w}
}

type stampWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *stampWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stamp := time.Now().Format("15:04:05.000 ")
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line == "" {
			continue
		}
		if _, err := io.WriteString(s.w, stamp+line); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// connect opens a connection to url; errors never carry the password.
func connect(ctx context.Context, url string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, pgurl.RedactError(url, fmt.Errorf("connect to %s: %w", pgurl.Describe(url), err))
	}
	return conn, nil
}
