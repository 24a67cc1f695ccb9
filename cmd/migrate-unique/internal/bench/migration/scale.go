package migration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
)

// ScaleOptions configures RunScale.
type ScaleOptions struct {
	// DatabaseURL points at a server where the benchmark may create (and
	// afterwards drop) its databases.
	DatabaseURL string
	// Sizes are the numbers of pending requests seeded, smallest first
	// (plus a tenth as running processes and a fifth as results). Default
	// 1,000,000 and 8,000,000.
	Sizes []int
	// Partitions is the number of monthly partitions of the partitioned
	// queue's requests and results tables; 0 skips the partitioned queue.
	// Default 8.
	Partitions int
	// LockTimeout is up's and down's lock timeout. Default 2s.
	LockTimeout time.Duration
	// WriterInterval paces the live writer. Default 5ms.
	WriterInterval time.Duration
	// Keep leaves the databases in place.
	Keep bool
	// Out receives progress lines; nil prints nothing.
	Out io.Writer
}

// StepFigures is one step of up or down at one size.
type StepFigures struct {
	// Name is the step's name; Lock the lock it declares.
	Name, Lock string
	// Held is how long the step held its ACCESS EXCLUSIVE lock, as up and
	// down measure it (0 for a step that takes none).
	Held time.Duration
	// Blocking is the longest continuous hold, sampled from pg_locks, of a
	// lock that makes writers wait (SHARE or stronger on a queue table or
	// one of its partitions, ACCESS EXCLUSIVE on one of their indexes),
	// seen while the step ran.
	Blocking time.Duration
	// InsertMax is the application's longest insert while the step ran.
	InsertMax time.Duration
	// Duration is the step's wall time; Skipped says why it did nothing.
	Duration time.Duration
	Skipped  string
	// CPU is the CPU time the run's server backends used during the step,
	// and CPUWait the time they waited, runnable, for a CPU (the machine's
	// load); CPUKnown is false when the server's processes cannot be read
	// (a server on another machine).
	CPU, CPUWait time.Duration
	CPUKnown     bool
}

// ScaleRun is up then down of one queue at one size, under a live writer.
type ScaleRun struct {
	// Queue names the queue; Rows is its size.
	Queue string
	Rows  int
	// Seed is how long seeding took.
	Seed time.Duration
	// Up and Down are each direction's steps in order, and UpInsertMax,
	// DownInsertMax the application's longest insert during each run.
	Up, Down                   []StepFigures
	UpInsertMax, DownInsertMax time.Duration
	UpDuration, DownDuration   time.Duration
	// OldSkipHold is the baseline of down's skip-metadata step: how long
	// the step of earlier versions held ACCESS EXCLUSIVE on the results
	// table while it scanned it for skip metadata (measured between up and
	// down: the lock, the same scan, rolled back), and OldSkipInsertMax the
	// application's longest insert meanwhile.
	OldSkipHold, OldSkipInsertMax time.Duration
	// Writes and FailedWrites count the writer's inserts; FirstFailure is
	// the first failure's error.
	Writes, FailedWrites int
	FirstFailure         string
	// LoadBefore and LoadAfter are this machine's 1-minute load average
	// when up began and when down ended ("" where unknown).
	LoadBefore, LoadAfter string
}

// ScaleResult is every queue at every size.
type ScaleResult struct {
	Options ScaleOptions
	Server  string
	Runs    []ScaleRun
}

func (o ScaleOptions) withDefaults() ScaleOptions {
	if len(o.Sizes) == 0 {
		o.Sizes = []int{1_000_000, 8_000_000}
	}
	if o.Partitions < 0 {
		o.Partitions = 0
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = migrations.DefaultLockTimeout
	}
	if o.WriterInterval <= 0 {
		o.WriterInterval = 5 * time.Millisecond
	}
	return o
}

// scaleQueue is a queue the scale benchmark migrates.
type scaleQueue struct {
	name   string
	layout layout.Resolved
	// seed creates and fills the queue with rows requests.
	seed func(ctx context.Context, url string, rows int) error
	// insert is the application's insert (it never names the key column,
	// or follows its rename: keyColumn).
	insert func(keyColumn string) string
}

// RunScale migrates each queue (plain-jobs' columns and unique rule, not
// partitioned and partitioned) up and then down at each size, under a live
// writer, and reports every step's longest writer-blocking lock and
// the application's longest insert side by side.
func RunScale(ctx context.Context, o ScaleOptions) (*ScaleResult, error) {
	o = o.withDefaults()
	o.Out = benchLog(o.Out)
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
	res := &ScaleResult{Options: o}
	if err := admin.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&res.Server); err != nil {
		return nil, err
	}
	queues := []scaleQueue{columnsQueue(0)}
	if o.Partitions > 0 {
		queues = append(queues, columnsQueue(o.Partitions))
	}
	for _, q := range queues {
		for _, rows := range o.Sizes {
			var rnd [4]byte
			_, _ = rand.Read(rnd[:])
			db := "mu_bench_scale_" + hex.EncodeToString(rnd[:])
			dbURL, err := withDatabase(o.DatabaseURL, db)
			if err != nil {
				return nil, err
			}
			if _, err := admin.Exec(ctx, "CREATE DATABASE "+layout.Ident(db)); err != nil {
				return nil, fmt.Errorf("create the benchmark database: %w", err)
			}
			run, err := func() (ScaleRun, error) {
				if !o.Keep {
					defer func() {
						_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+layout.Ident(db)+" WITH (FORCE)")
					}()
				}
				logf("%s, %d requests: seeding %s ...", q.name, rows, db)
				run := ScaleRun{Queue: q.name, Rows: rows}
				start := time.Now()
				if err := q.seed(ctx, dbURL, rows); err != nil {
					return run, fmt.Errorf("seed %s: %w", q.name, err)
				}
				run.Seed = time.Since(start)
				logf("seeded in %s", run.Seed.Round(time.Second))
				return run, scaleRun(ctx, dbURL, q, o, &run)
			}()
			if err != nil {
				return nil, err
			}
			res.Runs = append(res.Runs, run)
		}
	}
	return res, nil
}

// scaleRun runs up then down on dbURL under the writer and the sampler.
func scaleRun(ctx context.Context, dbURL string, q scaleQueue, o ScaleOptions, run *ScaleRun) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var writer, sampler, cpuConn *pgx.Conn
	for _, c := range []**pgx.Conn{&writer, &sampler, &cpuConn} {
		conn, err := connect(ctx, dbURL)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		*c = conn
	}
	// step is the name of the step in progress ("" between steps); each
	// figure below is kept per step.
	var mu sync.Mutex
	step := ""
	insertMax := map[string]time.Duration{}
	blocking := map[string]time.Duration{}
	var wg sync.WaitGroup
	stop := make(chan struct{})

	wg.Add(1)
	go func() { // the application: one insert every WriterInterval
		defer wg.Done()
		keyCol := layout.LegacyKeyColumn
		next := time.Now()
		for i := 0; ; i++ {
			next = next.Add(o.WriterInterval)
			select {
			case <-stop:
				return
			case <-time.After(time.Until(next)):
			}
			mu.Lock()
			at := step
			mu.Unlock()
			start := time.Now()
			_, err := writer.Exec(ctx, q.insert(keyCol), fmt.Sprintf("app.jobs.Bench%d", i%4))
			if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "42703" {
				// The key column was renamed: the redeployed code names it anew.
				keyCol = map[string]string{layout.LegacyKeyColumn: layout.KeyColumn, layout.KeyColumn: layout.LegacyKeyColumn}[keyCol]
				_, err = writer.Exec(ctx, q.insert(keyCol), fmt.Sprintf("app.jobs.Bench%d", i%4))
			}
			d := time.Since(start)
			if ctx.Err() != nil {
				return
			}
			mu.Lock()
			run.Writes++
			if err != nil {
				run.FailedWrites++
				if run.FirstFailure == "" {
					run.FirstFailure = err.Error()
				}
			}
			insertMax[at] = max(insertMax[at], d)
			mu.Unlock()
			if time.Until(next) < -time.Second {
				next = time.Now() // after a long stall, do not burst
			}
		}
	}()

	wg.Add(1)
	go func() { // the sampler: writer-blocking locks on the queue's relations
		defer wg.Done()
		since := map[string]time.Time{}
		for {
			select {
			case <-stop:
				return
			default:
			}
			rows, err := sampler.Query(ctx, `WITH queue AS (
    SELECT t.relid FROM unnest($1::text[]) AS q(name)
    CROSS JOIN LATERAL (SELECT q.name::regclass AS relid UNION SELECT p.relid FROM pg_partition_tree(q.name::regclass) AS p) AS t)
SELECT DISTINCT k.relation::regclass::text || ' ' || k.mode
FROM pg_locks k LEFT JOIN pg_index x ON x.indexrelid = k.relation
WHERE k.granted AND k.locktype = 'relation' AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND (k.relation IN (SELECT relid FROM queue) AND k.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
       OR x.indrelid IN (SELECT relid FROM queue) AND k.mode = 'AccessExclusiveLock')`, quoted(q.layout))
			if err != nil {
				return
			}
			held, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return
			}
			now := time.Now()
			mu.Lock()
			at := step
			for _, h := range held {
				if since[h].IsZero() {
					since[h] = now
				}
			}
			for h, t := range since {
				blocking[at] = max(blocking[at], now.Sub(t))
				if !contains(held, h) {
					delete(since, h)
				}
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()

	migrate := func(direction string, f func(context.Context, string, layout.Layout, migrations.Options) (*migrations.Report, error)) ([]StepFigures, time.Duration, error) {
		var steps []StepFigures
		cpu := &backendCPU{conn: cpuConn}
		opts := migrations.Options{LockTimeout: o.LockTimeout, MaxAttempts: 100, Out: o.Out,
			BeforeStep: func(ctx context.Context, s migrations.StepResult) {
				cpu.begin(ctx, direction)
				mu.Lock()
				step = direction + " " + s.Name
				mu.Unlock()
			},
			OnStep: func(s migrations.StepResult) {
				used, waited, known := cpu.end()
				cpu.ok = false // a skipped step has no BeforeStep
				mu.Lock()
				at := direction + " " + s.Name
				steps = append(steps, StepFigures{Name: s.Name, Lock: s.Lock, Held: s.LockHeld, Duration: s.Duration, Skipped: s.Skipped,
					Blocking: blocking[at], InsertMax: insertMax[at], CPU: used, CPUWait: waited, CPUKnown: known})
				step = ""
				mu.Unlock()
			}}
		start := time.Now()
		_, err := f(ctx, dbURL, q.layout.Layout, opts)
		return steps, time.Since(start), err
	}
	// Let the writer settle first.
	time.Sleep(200 * time.Millisecond)
	run.LoadBefore = loadAverage()
	defer func() { run.LoadAfter = loadAverage() }()
	var err error
	mu.Lock()
	clear(insertMax)
	mu.Unlock()
	if run.Up, run.UpDuration, err = migrate("up", migrations.Up); err == nil {
		mu.Lock()
		for _, d := range insertMax {
			run.UpInsertMax = max(run.UpInsertMax, d)
		}
		clear(insertMax)
		step = "old skip scan"
		mu.Unlock()
		run.OldSkipHold, err = oldSkipScan(ctx, dbURL, q.layout)
		mu.Lock()
		run.OldSkipInsertMax = insertMax["old skip scan"]
		clear(insertMax)
		step = ""
		mu.Unlock()
	}
	if err == nil {
		run.Down, run.DownDuration, err = migrate("down", migrations.Down)
		mu.Lock()
		for _, d := range insertMax {
			run.DownInsertMax = max(run.DownInsertMax, d)
		}
		mu.Unlock()
	}
	close(stop)
	cancel()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("%s at %d rows: %w", q.name, run.Rows, err)
	}
	return nil
}

// oldSkipScan is what down's skip-metadata step did before its probe
// index: ACCESS EXCLUSIVE on the table that carries the column, then a scan
// of it for rows with skip metadata. It is rolled back; it returns how long
// the lock was held.
func oldSkipScan(ctx context.Context, dbURL string, l layout.Resolved) (time.Duration, error) {
	conn, err := connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	table := l.Table(l.SkipTable())
	if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '2s'; LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return 0, fmt.Errorf("the old skip scan's lock: %w", err)
	}
	start := time.Now()
	var any bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+table+" WHERE "+layout.Ident(layout.SkipMetadataColumn)+" IS NOT NULL)").Scan(&any); err != nil {
		return 0, fmt.Errorf("the old skip scan: %w", err)
	}
	return time.Since(start), nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func quoted(l layout.Resolved) []string {
	var out []string
	for _, t := range l.Tables() {
		out = append(out, l.Table(t))
	}
	return out
}

// columnsQueue is a two-table queue with plain-jobs' columns (requests,
// processes, results) and its unique rule, plain-jobs' partial unique index.
// With partitions > 0, the requests and results tables are range-partitioned
// by month and the rule has the partition key added, as PostgreSQL requires.
// Its tables carry only their keys and the rule, so that seeding millions
// of rows (INSERT ... SELECT FROM generate_series) takes minutes even on a
// busy machine; what the benchmark measures, the locks, does not depend on
// other indexes.
func columnsQueue(partitions int) scaleQueue {
	raw := layout.Layout{Schema: "pq", RequestsTable: "jobrequest", ProcessesTable: "jobprocess", ResultsTable: "jobresult"}
	l, _ := raw.Resolve()
	first := time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	month := func(i int) string { return first.AddDate(0, i, 0).Format("2006-01-02") }
	name, partitionBy, ruleKey, spread := "plain-jobs' columns, not partitioned", "", "", 1
	if partitions > 0 {
		name, partitionBy, ruleKey, spread = fmt.Sprintf("plain-jobs' columns, %d partitions", partitions), " PARTITION BY RANGE (created_at)", ", created_at", partitions
	}
	return scaleQueue{name: name, layout: l,
		seed: func(ctx context.Context, url string, rows int) error {
			var b strings.Builder
			b.WriteString(`
CREATE SCHEMA pq;
CREATE TABLE pq.jobrequest (id bigint GENERATED BY DEFAULT AS IDENTITY, created_at timestamptz NOT NULL, uuid uuid NOT NULL,
    job_class varchar(255) NOT NULL, parameters jsonb NULL, priority integer NOT NULL, source text NOT NULL, queue varchar(255) NOT NULL,
    retries integer NOT NULL, retry_attempt integer NOT NULL, unique_key varchar(255) NOT NULL, start_at timestamptz NULL,
    PRIMARY KEY (id, created_at))` + partitionBy + `;
CREATE UNIQUE INDEX jobrequest_unique_job_class_key ON pq.jobrequest (job_class, unique_key` + ruleKey + `) WHERE retry_attempt = 0 AND unique_key > '';
CREATE TABLE pq.jobprocess (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, created_at timestamptz NOT NULL, uuid uuid NOT NULL,
    job_class varchar(255) NOT NULL, priority integer NOT NULL, queue varchar(255) NOT NULL, retries integer NOT NULL,
    retry_attempt integer NOT NULL, unique_key varchar(255) NOT NULL);
CREATE TABLE pq.jobresult (id bigint GENERATED BY DEFAULT AS IDENTITY, created_at timestamptz NOT NULL, uuid uuid NOT NULL,
    job_class varchar(255) NOT NULL, status varchar(20) NOT NULL, unique_key varchar(255) NOT NULL,
    PRIMARY KEY (id, created_at))` + partitionBy + `;
`)
			for i := range partitions {
				fmt.Fprintf(&b, "CREATE TABLE pq.jobrequest_p%d PARTITION OF pq.jobrequest FOR VALUES FROM ('%s') TO ('%s');\n", i, month(i), month(i+1))
				fmt.Fprintf(&b, "CREATE TABLE pq.jobresult_p%d PARTITION OF pq.jobresult FOR VALUES FROM ('%s') TO ('%s');\n", i, month(i), month(i+1))
			}
			// The rows spread evenly over the partitions; half carry a key,
			// every tenth is a retry sharing its original's.
			fmt.Fprintf(&b, `
INSERT INTO pq.jobrequest (created_at, uuid, job_class, parameters, priority, source, queue, retries, retry_attempt, unique_key)
SELECT timestamptz '%[1]s' + make_interval(secs => (i %% %[2]d) * %[3]d), gen_random_uuid(),
       (ARRAY['app.jobs.ChargeJob', 'app.jobs.SendEmail', 'app.jobs.SyncAccount', 'app.jobs.BuildReport'])[i %% 4 + 1],
       jsonb_build_object('account_id', i), i %% 5, 'seed', 'default', CASE WHEN i %% 10 = 3 THEN 3 ELSE 0 END, CASE WHEN i %% 10 = 3 THEN 1 ELSE 0 END,
       CASE WHEN i %% 2 = 0 THEN 'key-' || i ELSE '' END
FROM generate_series(1, %[4]d) AS i;
INSERT INTO pq.jobprocess (created_at, uuid, job_class, priority, queue, retries, retry_attempt, unique_key)
SELECT now(), gen_random_uuid(), 'app.jobs.SendEmail', 0, 'default', 0, 0, 'run-' || i FROM generate_series(1, greatest(%[4]d / 10, 1)) AS i;
INSERT INTO pq.jobresult (created_at, uuid, job_class, status, unique_key)
SELECT timestamptz '%[1]s' + make_interval(secs => (i %% %[2]d) * %[3]d), gen_random_uuid(), 'app.jobs.SendEmail', 'SUCCESSFUL', 'key-' || i
FROM generate_series(1, greatest(%[4]d / 5, 1)) AS i;
ANALYZE pq.jobrequest, pq.jobprocess, pq.jobresult;
`, month(0), spread, 31*24*3600, rows)
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			_, err = conn.Exec(ctx, b.String())
			return err
		},
		insert: func(key string) string {
			return `INSERT INTO pq.jobrequest (created_at, uuid, job_class, source, priority, queue, retries, retry_attempt, ` + key + `)
VALUES (timestamptz '` + month(0) + `' + make_interval(secs => (random() * 86400 * 28 * ` + fmt.Sprint(spread) + `)::int), gen_random_uuid(), $1, 'bench-writer', 0, 'default', 0, 0, '')`
		}}
}

// Print renders each queue's up and down, every step's figures at each
// size side by side with the ratio of the largest to the smallest.
func (r *ScaleResult) Print(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "bench migration --scale: PostgreSQL %s; a writer inserting every %s (following the key column's rename); lock timeout %s\n", r.Server, o.WriterInterval, o.LockTimeout)
	fmt.Fprintf(w, "per step (steps with nothing to do left out): held = ACCESS EXCLUSIVE hold as up/down measure it; blocking = longest continuous writer-blocking lock on a queue table,\n")
	fmt.Fprintf(w, "a partition or their index, sampled from pg_locks every ~2 ms; insert = the application's longest insert while the step ran; cpu = the run's server backends' CPU time\n")
	fmt.Fprintf(w, "during the step, cpu wait = their time runnable but waiting for a CPU (the load; both from /proc/<pid>/schedstat, - for a server on another machine); last column group = largest size / smallest\n")
	byQueue := map[string][]ScaleRun{}
	var order []string
	for _, run := range r.Runs {
		if _, ok := byQueue[run.Queue]; !ok {
			order = append(order, run.Queue)
		}
		byQueue[run.Queue] = append(byQueue[run.Queue], run)
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	ratio := func(big, small time.Duration) string {
		if small <= 0 || big <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", float64(big)/float64(small))
	}
	for _, name := range order {
		runs := byQueue[name]
		first, last := runs[0], runs[len(runs)-1]
		fmt.Fprintf(w, "\n%s:", name)
		for _, run := range runs {
			fmt.Fprintf(w, " %d rows (seeded in %s, %d writes, %d failed, load average %s to %s)", run.Rows, run.Seed.Round(time.Second), run.Writes, run.FailedWrites, orDash(run.LoadBefore), orDash(run.LoadAfter))
		}
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "step\t")
		for _, run := range runs {
			fmt.Fprintf(tw, "held @%d\tblocking @%d\tinsert @%d\tcpu @%d\tcpu wait @%d\t", run.Rows, run.Rows, run.Rows, run.Rows, run.Rows)
		}
		fmt.Fprintf(tw, "held %d/%d\tblocking\tinsert\tcpu\t\n", last.Rows, first.Rows)
		for _, dir := range []string{"up", "down"} {
			pick := func(run ScaleRun) []StepFigures {
				if dir == "up" {
					return run.Up
				}
				return run.Down
			}
			for i, s := range pick(first) {
				if s.Skipped != "" {
					continue // nothing to do at the smallest size: nothing to compare
				}
				fmt.Fprintf(tw, "%s %d: %s\t", dir, i+1, truncate(s.Name, 56))
				var lastStep StepFigures
				for _, run := range runs {
					steps := pick(run)
					if i >= len(steps) || steps[i].Name != s.Name {
						fmt.Fprintf(tw, "?\t?\t?\t?\t?\t")
						continue
					}
					lastStep = steps[i]
					if steps[i].Skipped != "" {
						fmt.Fprintf(tw, "skipped\t\t\t\t\t")
						continue
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t", ms(steps[i].Held), ms(steps[i].Blocking), ms(steps[i].InsertMax), cpuMs(steps[i], steps[i].CPU), cpuMs(steps[i], steps[i].CPUWait))
				}
				cpuRatio := "-"
				if s.CPUKnown && lastStep.CPUKnown {
					cpuRatio = ratio(lastStep.CPU, s.CPU)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", ratio(lastStep.Held, s.Held), ratio(lastStep.Blocking, s.Blocking), ratio(lastStep.InsertMax, s.InsertMax), cpuRatio)
			}
			fmt.Fprintf(tw, "%s: longest insert\t", dir)
			for _, run := range runs {
				d := run.UpInsertMax
				if dir == "down" {
					d = run.DownInsertMax
				}
				fmt.Fprintf(tw, "\t\t%s\t\t\t", ms(d))
			}
			if dir == "up" {
				fmt.Fprintf(tw, "\t\t%s\t\t\n", ratio(last.UpInsertMax, first.UpInsertMax))
				continue
			}
			fmt.Fprintf(tw, "\t\t%s\t\t\n", ratio(last.DownInsertMax, first.DownInsertMax))
			fmt.Fprintf(tw, "baseline: the old skip step (scan under the lock)\t")
			for _, run := range runs {
				fmt.Fprintf(tw, "%s\t\t%s\t\t\t", ms(run.OldSkipHold), ms(run.OldSkipInsertMax))
			}
			fmt.Fprintf(tw, "%s\t\t%s\t\t\n", ratio(last.OldSkipHold, first.OldSkipHold), ratio(last.OldSkipInsertMax, first.OldSkipInsertMax))
		}
		tw.Flush()
		for _, run := range runs {
			fmt.Fprintf(w, "%d rows: up %s, down %s in all\n", run.Rows, run.UpDuration.Round(time.Millisecond), run.DownDuration.Round(time.Millisecond))
			if run.FirstFailure != "" {
				fmt.Fprintf(w, "%d rows: first failed write: %s\n", run.Rows, run.FirstFailure)
			}
		}
	}
}

// cpuMs prints a CPU figure of step s, "-" when it was not readable.
func cpuMs(s StepFigures, d time.Duration) string {
	if !s.CPUKnown {
		return "-"
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
