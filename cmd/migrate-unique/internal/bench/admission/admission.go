// Package admission measures the compat runtime's admission check in a
// scratch schema of its own, against two baselines measured in the same run:
// a plain INSERT of the same rows, and the naive check (an advisory lock and
// an unbounded count(*)) that the original design proposed. It backs
// `migrate-unique bench admission`.
package admission

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/scratch"
	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/lockid"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// Options sizes the benchmark. Zero values take the defaults.
type Options struct {
	// BacklogRows is the number of active rows of the hot class in the
	// backlog run, a tenth of them in the hot key group. Default 1,000,000.
	BacklogRows int
	// Samples is the number of latency samples per case. Default 200.
	Samples int
	// ContentionClients and ContentionLimit shape the contention run: that
	// many clients on their own connections race for one group with that
	// limit. Defaults 64 and 5.
	ContentionClients, ContentionLimit int
	// ThroughputClients, ThroughputKeys and ThroughputJobs shape the
	// throughput runs. Defaults 16, 1000 and 4000 (4 jobs per key, under the
	// limit 5, so every job is admitted and both runs insert the same rows).
	ThroughputClients, ThroughputKeys, ThroughputJobs int
	// BatchSize and BatchJobs shape the batch throughput runs: BatchJobs
	// jobs in batches of BatchSize (EnqueueMany, and one multi-row INSERT
	// per batch), by ThroughputClients clients, each key four times in all
	// and once per batch. Defaults 100 and 20,000.
	BatchSize, BatchJobs int
	// Progress receives one line per phase; nil prints nothing.
	Progress io.Writer
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.BacklogRows, 1_000_000)
	def(&o.Samples, 200)
	def(&o.ContentionClients, 64)
	def(&o.ContentionLimit, 5)
	def(&o.ThroughputClients, 16)
	def(&o.ThroughputKeys, 1000)
	def(&o.ThroughputJobs, 4000)
	def(&o.BatchSize, 100)
	def(&o.BatchJobs, 20000)
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o
}

// Result holds the figures. The first four fields are the ones the issue
// asks for; the rest say what they were computed from.
type Result struct {
	// OverAdmitted is how many jobs the contention run admitted beyond the
	// limit. It must be 0.
	OverAdmitted int `json:"over_admitted"`
	// BacklogLatencyRatio is the median enqueue-with-check latency with the
	// backlog over the same without it (the worse of a blocked check in the
	// hot group and an admitted job of a fresh key in the hot class).
	BacklogLatencyRatio float64 `json:"backlog_latency_ratio"`
	// NaiveBacklogLatencyRatio is the same ratio for the naive check.
	NaiveBacklogLatencyRatio float64 `json:"naive_backlog_latency_ratio"`
	// ThroughputRatioVsInsert is enqueue-with-check throughput over plain
	// INSERT throughput of the same rows: the median over adjacent pairs.
	ThroughputRatioVsInsert float64 `json:"throughput_ratio_vs_insert"`

	ContentionClients  int `json:"contention_clients"`
	ContentionLimit    int `json:"contention_limit"`
	ContentionAttempts int `json:"contention_attempts"`
	ContentionAdmitted int `json:"contention_admitted"`

	BacklogRows      int `json:"backlog_rows"`
	BacklogGroupRows int `json:"backlog_group_rows"`
	// Median latencies in microseconds: Blocked is an enqueue into the full
	// hot group (limit 5), Admitted one of a fresh key in the hot class.
	CheckBlockedEmptyMicros    float64 `json:"check_blocked_empty_us"`
	CheckBlockedBacklogMicros  float64 `json:"check_blocked_backlog_us"`
	CheckAdmittedEmptyMicros   float64 `json:"check_admitted_empty_us"`
	CheckAdmittedBacklogMicros float64 `json:"check_admitted_backlog_us"`
	NaiveBlockedEmptyMicros    float64 `json:"naive_blocked_empty_us"`
	NaiveBlockedBacklogMicros  float64 `json:"naive_blocked_backlog_us"`
	NaiveAdmittedEmptyMicros   float64 `json:"naive_admitted_empty_us"`
	NaiveAdmittedBacklogMicros float64 `json:"naive_admitted_backlog_us"`

	ThroughputClients      int     `json:"throughput_clients"`
	ThroughputRounds       int     `json:"throughput_rounds"`
	ThroughputJobs         int     `json:"throughput_jobs"`
	InsertPerSecond        float64 `json:"insert_per_second"`
	EnqueueCheckPerSecond  float64 `json:"enqueue_check_per_second"`
	ThroughputAdmittedJobs int     `json:"throughput_admitted_jobs"`

	// BatchRatioVsInsertMany is EnqueueMany throughput (jobs/s) over that of
	// one multi-row INSERT per batch of the same rows: the median over
	// adjacent pairs, as for ThroughputRatioVsInsert.
	BatchRatioVsInsertMany float64 `json:"batch_ratio_vs_insert_many"`
	BatchSize              int     `json:"batch_size"`
	BatchJobs              int     `json:"batch_jobs"`
	InsertManyPerSecond    float64 `json:"insert_many_jobs_per_second"`
	EnqueueManyPerSecond   float64 `json:"enqueue_many_jobs_per_second"`
	// BatchRatios are the pairs' ratios, in order.
	BatchRatios []float64 `json:"batch_ratios"`

	// ByMode is backlog_latency_ratio (and the naive check's) per pgx
	// execution mode and database/sql, each on fresh connections of that
	// mode, with fresh statistics; Stale is the same with statistics taken
	// before the backlog was loaded (default mode). BacklogLatencyRatio
	// above is the default mode's with fresh statistics.
	ByMode []ModeRatio `json:"backlog_latency_ratio_by_mode"`
	Stale  ModeRatio   `json:"backlog_latency_ratio_stale_stats"`
}

// ModeRatio is one execution mode's backlog latency ratios.
type ModeRatio struct {
	Mode                     string  `json:"mode"`
	BacklogLatencyRatio      float64 `json:"backlog_latency_ratio"`
	NaiveBacklogLatencyRatio float64 `json:"naive_backlog_latency_ratio"`
}

const (
	hotClass = "bench.Hot"
	hotKey   = "hot"
)

// bench is one run in two scratch schemas.
type bench struct {
	o    Options
	l    layout.Resolved // the tables of the contention, throughput and backlog runs
	pool *pgxpool.Pool
	c    *compat.Client
	// empty is a second queue, in a schema of its own, that stays (nearly)
	// empty: the latency baseline, sampled interleaved with the backlog so
	// load drift on the machine hits both alike.
	empty  layout.Resolved
	emptyC *compat.Client
	// queues are the scratch queues created, dropped at the end.
	queues []*scratch.Queue
}

// Run creates two scratch queues (plain-jobs' real tables, migrated by the
// real migration, each in a schema of its own), measures, and drops them,
// whatever happens. It never touches any other schema.
func Run(ctx context.Context, url string, o Options) (*Result, error) {
	o = o.withDefaults()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "migrate_unique_bench_admission_" + hex.EncodeToString(rnd[:])
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, pgurl.RedactError(url, fmt.Errorf("parse the database URL: %w", err))
	}
	cfg.MaxConns = int32(max(o.ContentionClients, o.ThroughputClients) + 2)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, pgurl.RedactError(url, err)
	}
	defer pool.Close()
	b := &bench{o: o, pool: pool}
	defer b.drop()
	if err := b.create(ctx, url, name); err != nil {
		return nil, err
	}
	if b.c, err = compat.NewClient(compat.Pgx(pool), b.l.Layout); err != nil {
		return nil, err
	}
	if b.emptyC, err = compat.NewClient(compat.Pgx(pool), b.empty.Layout); err != nil {
		return nil, err
	}
	r := &Result{}
	if err := b.contention(ctx, r); err != nil {
		return nil, fmt.Errorf("contention run: %w", err)
	}
	if err := b.throughput(ctx, r); err != nil {
		return nil, fmt.Errorf("throughput run: %w", err)
	}
	if err := b.batchThroughput(ctx, r); err != nil {
		return nil, fmt.Errorf("batch throughput run: %w", err)
	}
	if err := b.latency(ctx, r); err != nil {
		return nil, fmt.Errorf("latency run: %w", err)
	}
	return r, nil
}

// create builds the two scratch queues: plain-jobs' tables from their real
// DDL, migrated by the real migration, with the runtime's tables.
func (b *bench) create(ctx context.Context, url, name string) error {
	for _, n := range []string{name, name + "_empty"} {
		q, err := scratch.New(ctx, url, n, legacy.PlainJobs)
		if err != nil {
			return err
		}
		b.queues = append(b.queues, q)
		fmt.Fprintf(b.o.Progress, "scratch schema %s created\n", n)
	}
	b.l, b.empty = b.queues[0].Layout, b.queues[1].Layout
	return nil
}

func (b *bench) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, q := range b.queues {
		if err := q.Drop(ctx); err != nil {
			fmt.Fprintf(b.o.Progress, "%v (drop it by hand)\n", err)
			continue
		}
		fmt.Fprintf(b.o.Progress, "scratch schema %s dropped\n", q.Layout.Schema)
	}
}

func (b *bench) truncate(ctx context.Context) error {
	_, err := b.pool.Exec(ctx, "TRUNCATE "+b.l.Table(b.l.RequestsTable)+", "+b.l.Table(b.l.ProcessesTable))
	return err
}

// limitJob is a job value with a key and a limit.
func limitJob(key string, n int) compat.Identity { return compat.Limit(key, n) }

// contention races ContentionClients clients for one group.
func (b *bench) contention(ctx context.Context, r *Result) error {
	const attempts = 20
	// One connection per client for the whole run, all connected before
	// any client starts (and all released if one cannot connect).
	conns := make([]*pgxpool.Conn, 0, b.o.ContentionClients)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range b.o.ContentionClients {
		conn, err := b.pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("connect client %d of %d: %w", len(conns)+1, b.o.ContentionClients, err)
		}
		conns = append(conns, conn)
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, b.o.ContentionClients)
	for _, conn := range conns {
		c, err := compat.NewClient(compat.Pgx(conn.Conn()), b.l.Layout)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range attempts {
				res, err := c.Enqueue(ctx, compat.Job{Class: hotClass, Value: limitJob(hotKey, b.o.ContentionLimit)})
				if err != nil {
					errc <- err
					return
				}
				if res.Inserted() {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	var rows int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM "+b.l.Table(b.l.RequestsTable)+" WHERE job_class = $1 AND concurrency_key = $2", hotClass, hotKey).Scan(&rows); err != nil {
		return err
	}
	r.ContentionClients, r.ContentionLimit = b.o.ContentionClients, b.o.ContentionLimit
	r.ContentionAttempts, r.ContentionAdmitted = b.o.ContentionClients*attempts, int(admitted.Load())
	r.OverAdmitted = max(0, rows-b.o.ContentionLimit, r.ContentionAdmitted-b.o.ContentionLimit)
	fmt.Fprintf(b.o.Progress, "contention: %d clients x %d attempts on one group with limit %d: %d admitted, %d rows, %d over the limit\n",
		b.o.ContentionClients, attempts, b.o.ContentionLimit, r.ContentionAdmitted, rows, r.OverAdmitted)
	return b.truncate(ctx)
}

// throughput compares plain INSERT and enqueue-with-check of the same rows.
func (b *bench) throughput(ctx context.Context, r *Result) error {
	insertSQL := "INSERT INTO " + b.l.Table(b.l.RequestsTable) +
		" (job_class, concurrency_key, parameters, priority, queue, retries, retry_attempt, start_at, created_at, uuid, source, trace_id, span_id)" +
		" VALUES ($1, $2, $3::jsonb, 0, 'default', 0, 0, NULL, now(), gen_random_uuid(), 'compat', NULL, NULL)"
	const class = "bench.Throughput"
	key := func(i int) string { return fmt.Sprintf("key-%d", i%b.o.ThroughputKeys) }
	run := func(one func(i int) (bool, error)) (float64, int, error) {
		if err := b.truncate(ctx); err != nil {
			return 0, 0, err
		}
		var next, admitted atomic.Int64
		var wg sync.WaitGroup
		errc := make(chan error, b.o.ThroughputClients)
		t0 := time.Now()
		for range b.o.ThroughputClients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= b.o.ThroughputJobs {
						return
					}
					ok, err := one(i)
					if err != nil {
						errc <- err
						return
					}
					if ok {
						admitted.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(t0)
		close(errc)
		if err := <-errc; err != nil {
			return 0, 0, err
		}
		return float64(b.o.ThroughputJobs) / elapsed.Seconds(), int(admitted.Load()), nil
	}
	plain := func(i int) (bool, error) {
		_, err := b.pool.Exec(ctx, insertSQL, class, key(i), fmt.Sprintf(`{"n":%d}`, i))
		return err == nil, err
	}
	checked := func(i int) (bool, error) {
		res, err := b.c.Enqueue(ctx, compat.Job{Class: class, Value: limitJob(key(i), 5), Args: map[string]int{"n": i}})
		return err == nil && res.Inserted(), err
	}
	// The ratio is the median of the pairs' ratios.
	const rounds = 5
	var ratios, inserts, checks []float64
	err := inPairs(rounds, func() (float64, int, error) { return run(plain) }, func() (float64, int, error) { return run(checked) },
		func(round int, ins, chk float64, admitted int) error {
			r.ThroughputAdmittedJobs = admitted
			ratios, inserts, checks = append(ratios, chk/ins), append(inserts, ins), append(checks, chk)
			fmt.Fprintf(b.o.Progress, "throughput round %d: plain INSERT %.0f/s, enqueue with check %.0f/s (%d of %d admitted): ratio %.2f\n", round+1, ins, chk, admitted, b.o.ThroughputJobs, chk/ins)
			return nil
		})
	if err != nil {
		return err
	}
	r.ThroughputClients, r.ThroughputJobs, r.ThroughputRounds = b.o.ThroughputClients, b.o.ThroughputJobs, rounds
	r.InsertPerSecond, r.EnqueueCheckPerSecond = median(inserts), median(checks)
	r.ThroughputRatioVsInsert = median(ratios)
	return b.truncate(ctx)
}

// batchThroughput compares EnqueueMany with one multi-row INSERT per batch
// of the same rows, in adjacent pairs as throughput does.
func (b *bench) batchThroughput(ctx context.Context, r *Result) error {
	insertSQL := "INSERT INTO " + b.l.Table(b.l.RequestsTable) +
		" (job_class, concurrency_key, parameters, priority, queue, retries, retry_attempt, start_at, created_at, uuid, source, trace_id, span_id)" +
		" SELECT $1, k, p::jsonb, 0, 'default', 0, 0, NULL, now(), gen_random_uuid(), 'compat', NULL, NULL FROM unnest($2::text[], $3::text[]) AS u(k, p)"
	const class = "bench.Batch"
	size := b.o.BatchSize
	batches := max(1, b.o.BatchJobs/size)
	keys := max(1, batches*size/4)
	key := func(i int) string { return fmt.Sprintf("key-%d", i%keys) }
	run := func(one func(first int) (int, error)) (float64, int, error) {
		if err := b.truncate(ctx); err != nil {
			return 0, 0, err
		}
		var next, admitted atomic.Int64
		var wg sync.WaitGroup
		errc := make(chan error, b.o.ThroughputClients)
		t0 := time.Now()
		for range b.o.ThroughputClients {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= batches {
						return
					}
					n, err := one(i * size)
					if err != nil {
						errc <- err
						return
					}
					admitted.Add(int64(n))
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(t0)
		close(errc)
		if err := <-errc; err != nil {
			return 0, 0, err
		}
		return float64(batches*size) / elapsed.Seconds(), int(admitted.Load()), nil
	}
	plain := func(first int) (int, error) {
		ks, ps := make([]string, size), make([]string, size)
		for j := range size {
			ks[j], ps[j] = key(first+j), fmt.Sprintf(`{"n":%d}`, first+j)
		}
		_, err := b.pool.Exec(ctx, insertSQL, class, ks, ps)
		return size, err
	}
	checked := func(first int) (int, error) {
		jobs := make([]compat.Job, size)
		for j := range jobs {
			jobs[j] = compat.Job{Class: class, Value: limitJob(key(first+j), 5), Args: map[string]int{"n": first + j}}
		}
		res, err := b.c.EnqueueMany(ctx, jobs)
		n := 0
		for _, x := range res {
			if x.Inserted() {
				n++
			}
		}
		return n, err
	}
	const rounds = 5
	var inserts, checks []float64
	r.BatchRatios = nil
	err := inPairs(rounds, func() (float64, int, error) { return run(plain) }, func() (float64, int, error) { return run(checked) },
		func(round int, ins, chk float64, admitted int) error {
			if admitted != batches*size {
				return fmt.Errorf("EnqueueMany admitted %d of %d jobs, each of a group under its limit", admitted, batches*size)
			}
			r.BatchRatios, inserts, checks = append(r.BatchRatios, chk/ins), append(inserts, ins), append(checks, chk)
			fmt.Fprintf(b.o.Progress, "batch throughput round %d: multi-row INSERT %.0f jobs/s, EnqueueMany %.0f jobs/s (batches of %d): ratio %.2f\n", round+1, ins, chk, size, chk/ins)
			return nil
		})
	if err != nil {
		return err
	}
	r.BatchSize, r.BatchJobs = size, batches*size
	r.InsertManyPerSecond, r.EnqueueManyPerSecond = median(inserts), median(checks)
	r.BatchRatioVsInsertMany = median(r.BatchRatios)
	return b.truncate(ctx)
}

// inPairs runs the plain side and the checked side rounds times in
// adjacent pairs, the order alternating (the machine's load drifts: other
// processes share it), and hands each pair's rates (and the checked side's
// admitted count) to each.
func inPairs(rounds int, plain, checked func() (float64, int, error), each func(round int, ins, chk float64, admitted int) error) error {
	for round := range rounds {
		var ins, chk float64
		var admitted int
		var err error
		if round%2 == 0 {
			if ins, _, err = plain(); err == nil {
				chk, admitted, err = checked()
			}
		} else {
			if chk, admitted, err = checked(); err == nil {
				ins, _, err = plain()
			}
		}
		if err != nil {
			return err
		}
		if err := each(round, ins, chk, admitted); err != nil {
			return err
		}
	}
	return nil
}

// naiveEnqueue is the check the original design proposed: the group's
// advisory lock, then count(*) of every active job of the group, then the
// insert. Correct, but its cost grows with the group's backlog.
func naiveEnqueue(ctx context.Context, pool *pgxpool.Pool, l layout.Resolved, class, key string, limit int) (bool, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockid.For(class, key)); err != nil {
		return false, err
	}
	var n int
	if err := tx.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+l.Table(l.RequestsTable)+" WHERE job_class = $1 AND concurrency_key = $2) + (SELECT count(*) FROM "+
		l.Table(l.ProcessesTable)+" WHERE job_class = $1 AND concurrency_key = $2)", class, key).Scan(&n); err != nil {
		return false, err
	}
	if n >= limit {
		return false, tx.Commit(ctx)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+l.Table(l.RequestsTable)+" (job_class, concurrency_key, created_at, uuid, source, priority, queue, retries, retry_attempt) VALUES ($1, $2, now(), gen_random_uuid(), 'naive', 0, 'default', 0, 0)", class, key); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// latencies are the medians of one table state.
type latencies struct{ checkBlocked, checkAdmitted, naiveBlocked, naiveAdmitted float64 }

// sample measures four cases on both table states, interleaved so load
// drift hits them alike: an enqueue into the full hot group (blocked) and
// one of a fresh key in the hot class (admitted), with the runtime's check
// and with the naive one.
func (b *bench) sample(ctx context.Context, tag string, pool *pgxpool.Pool, emptyC, backlogC *compat.Client, samples int) (empty, backlog latencies, err error) {
	const limit = 5
	type state struct {
		l     layout.Resolved
		c     *compat.Client
		cases [4][]time.Duration
	}
	states := []*state{{l: b.empty, c: emptyC}, {l: b.l, c: backlogC}}
	for i := range samples {
		for si, st := range states {
			for c := range 4 {
				var admitted bool
				key := hotKey
				if c%2 == 1 {
					key = fmt.Sprintf("fresh-%s-%d-%d-%d", tag, si, c, i)
				}
				t0 := time.Now()
				if c < 2 {
					var res compat.Result
					res, err = st.c.Enqueue(ctx, compat.Job{Class: hotClass, Value: limitJob(key, limit)})
					admitted = res.Inserted()
				} else {
					admitted, err = naiveEnqueue(ctx, pool, st.l, hotClass, key, limit)
				}
				d := time.Since(t0)
				if err != nil {
					return empty, backlog, err
				}
				if admitted != (c%2 == 1) {
					return empty, backlog, fmt.Errorf("%s case %d sample %d: admitted = %v, want %v", st.l.RequestsTable, c, i, admitted, c%2 == 1)
				}
				st.cases[c] = append(st.cases[c], d)
			}
		}
	}
	med := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Nanoseconds()) / 1e3
	}
	for si, st := range states {
		l := latencies{med(st.cases[0]), med(st.cases[1]), med(st.cases[2]), med(st.cases[3])}
		if si == 0 {
			empty = l
		} else {
			backlog = l
		}
	}
	return empty, backlog, nil
}

// latency fills the hot group of the empty tables with just its limit (the
// smallest table in which the same check blocks) and loads the backlog into
// the other tables, then samples both.
func (b *bench) latency(ctx context.Context, r *Result) error {
	if err := b.truncate(ctx); err != nil {
		return err
	}
	fill := "INSERT INTO " + b.empty.Table(b.empty.RequestsTable) + " (job_class, concurrency_key, created_at, uuid, source, priority, queue, retries, retry_attempt) SELECT $1, $2, now(), gen_random_uuid(), 'bench', 0, 'default', 0, 0 FROM generate_series(1, 5)"
	if _, err := b.pool.Exec(ctx, fill, hotClass, hotKey); err != nil {
		return err
	}
	// Statistics taken before the burst: both pairs hold a history of
	// other classes when they are analyzed, and the backlog comes after.
	for _, l := range []layout.Resolved{b.l, b.empty} {
		for _, t := range []string{l.RequestsTable, l.ProcessesTable} {
			extra, extraVals := "", ""
			if t == l.ProcessesTable {
				extra, extraVals = ", job_request_uuid", ", gen_random_uuid()"
			}
			if _, err := b.pool.Exec(ctx, "ALTER TABLE "+l.Table(t)+" SET (autovacuum_enabled = false)"); err != nil {
				return err
			}
			if _, err := b.pool.Exec(ctx, "INSERT INTO "+l.Table(t)+" (job_class, concurrency_key, created_at, uuid, source, priority, queue, retries, retry_attempt"+extra+
				") SELECT 'bench.Old' || (i % 50), 'k-' || i, now(), gen_random_uuid(), 'bench', 0, 'default', 0, 0"+extraVals+" FROM generate_series(1, 2000) AS i"); err != nil {
				return err
			}
			if _, err := b.pool.Exec(ctx, "ANALYZE "+l.Table(t)); err != nil {
				return err
			}
		}
	}
	rows := b.o.BacklogRows
	reqRows, procRows := rows-rows/10, rows/10
	fmt.Fprintf(b.o.Progress, "loading %d active rows of %s, %d of them in group %s::%s ...\n", rows, hotClass, rows/10, hotClass, hotKey)
	load := func(tbl string, n int, extra, extraVals string) error {
		_, err := b.pool.Exec(ctx, "INSERT INTO "+b.l.Table(tbl)+" (job_class, concurrency_key, created_at, uuid, source, priority, queue, retries, retry_attempt"+extra+
			") SELECT $1, CASE WHEN i % 10 = 0 THEN $2 ELSE 'k-' || (i % 90000) END, now(), gen_random_uuid(), 'bench', 0, 'default', 0, 0"+extraVals+
			" FROM generate_series(1, $3::integer) AS i ORDER BY i % 10 = 0, i", hotClass, hotKey, n)
		return err
	}
	if err := load(b.l.RequestsTable, reqRows, "", ""); err != nil {
		return err
	}
	if err := load(b.l.ProcessesTable, procRows, ", job_request_uuid", ", gen_random_uuid()"); err != nil {
		return err
	}
	_, _ = b.pool.Exec(ctx, "CHECKPOINT")
	if err := b.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+b.l.Table(b.l.RequestsTable)+" WHERE job_class = $1 AND concurrency_key = $2) + (SELECT count(*) FROM "+
		b.l.Table(b.l.ProcessesTable)+" WHERE job_class = $1 AND concurrency_key = $2)", hotClass, hotKey).Scan(&r.BacklogGroupRows); err != nil {
		return err
	}
	r.BacklogRows = rows
	modeSamples := max(b.o.Samples/4, 1)
	stale, err := b.modeRatio(ctx, "stale", pgx.QueryExecModeCacheStatement, false, modeSamples)
	if err != nil {
		return fmt.Errorf("stale statistics: %w", err)
	}
	r.Stale = stale
	fmt.Fprintf(b.o.Progress, "stale statistics: backlog latency ratio %.2f, naive %.2f (medians of %d)\n", stale.BacklogLatencyRatio, stale.NaiveBacklogLatencyRatio, modeSamples)
	for _, t := range []string{b.l.Table(b.l.RequestsTable), b.l.Table(b.l.ProcessesTable), b.empty.Table(b.empty.RequestsTable), b.empty.Table(b.empty.ProcessesTable)} {
		if _, err := b.pool.Exec(ctx, "VACUUM ANALYZE "+t); err != nil {
			return err
		}
	}
	// Flush the load's WAL now rather than during the samples. It needs a
	// superuser (or pg_checkpoint); without one the interleaved samples
	// share the checkpoint's noise alike.
	_, _ = b.pool.Exec(ctx, "CHECKPOINT")
	empty, backlog, err := b.sample(ctx, "default", b.pool, b.emptyC, b.c, b.o.Samples)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.o.Progress, "empty table: check %.0fus blocked / %.0fus admitted; naive %.0fus / %.0fus (medians of %d)\n",
		empty.checkBlocked, empty.checkAdmitted, empty.naiveBlocked, empty.naiveAdmitted, b.o.Samples)
	fmt.Fprintf(b.o.Progress, "backlog:     check %.0fus blocked / %.0fus admitted; naive %.0fus / %.0fus (medians of %d, interleaved with the above)\n",
		backlog.checkBlocked, backlog.checkAdmitted, backlog.naiveBlocked, backlog.naiveAdmitted, b.o.Samples)
	for _, m := range execModes {
		mr, err := b.modeRatio(ctx, m.name, m.mode, m.sql, modeSamples)
		if err != nil {
			return fmt.Errorf("mode %s: %w", m.name, err)
		}
		r.ByMode = append(r.ByMode, mr)
		fmt.Fprintf(b.o.Progress, "mode %-16s backlog latency ratio %.2f, naive %.2f (medians of %d, fresh connections)\n", m.name, mr.BacklogLatencyRatio, mr.NaiveBacklogLatencyRatio, modeSamples)
	}

	r.CheckBlockedEmptyMicros, r.CheckBlockedBacklogMicros = empty.checkBlocked, backlog.checkBlocked
	r.CheckAdmittedEmptyMicros, r.CheckAdmittedBacklogMicros = empty.checkAdmitted, backlog.checkAdmitted
	r.NaiveBlockedEmptyMicros, r.NaiveBlockedBacklogMicros = empty.naiveBlocked, backlog.naiveBlocked
	r.NaiveAdmittedEmptyMicros, r.NaiveAdmittedBacklogMicros = empty.naiveAdmitted, backlog.naiveAdmitted
	r.BacklogLatencyRatio = max(backlog.checkBlocked/empty.checkBlocked, backlog.checkAdmitted/empty.checkAdmitted)
	r.NaiveBacklogLatencyRatio = max(backlog.naiveBlocked/empty.naiveBlocked, backlog.naiveAdmitted/empty.naiveAdmitted)
	return nil
}

// execModes are the driver configurations the backlog ratio is reported
// for: pgx's execution modes, and database/sql (pgx's stdlib).
var execModes = []struct {
	name string
	mode pgx.QueryExecMode
	sql  bool
}{
	{"cache_statement", pgx.QueryExecModeCacheStatement, false},
	{"cache_describe", pgx.QueryExecModeCacheDescribe, false},
	{"describe_exec", pgx.QueryExecModeDescribeExec, false},
	{"exec", pgx.QueryExecModeExec, false},
	{"simple_protocol", pgx.QueryExecModeSimpleProtocol, false},
	{"database/sql", pgx.QueryExecModeCacheStatement, true},
}

// modeRatio samples both table states through fresh connections in one
// execution mode (the naive check through a pgx pool in the same mode).
func (b *bench) modeRatio(ctx context.Context, tag string, mode pgx.QueryExecMode, viaSQL bool, samples int) (ModeRatio, error) {
	cfg := b.pool.Config()
	cfg.ConnConfig.DefaultQueryExecMode = mode
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return ModeRatio{}, err
	}
	defer pool.Close()
	var db compat.DB = compat.Pgx(pool)
	if viaSQL {
		sdb := stdlib.OpenDB(*cfg.ConnConfig)
		sdb.SetMaxOpenConns(2)
		defer sdb.Close()
		db = compat.SQL(sdb)
	}
	emptyC, err := compat.NewClient(db, b.empty.Layout)
	if err != nil {
		return ModeRatio{}, err
	}
	backlogC, err := compat.NewClient(db, b.l.Layout)
	if err != nil {
		return ModeRatio{}, err
	}
	empty, backlog, err := b.sample(ctx, tag, pool, emptyC, backlogC, samples)
	if err != nil {
		return ModeRatio{}, err
	}
	return ModeRatio{Mode: tag,
		BacklogLatencyRatio:      max(backlog.checkBlocked/empty.checkBlocked, backlog.checkAdmitted/empty.checkAdmitted),
		NaiveBacklogLatencyRatio: max(backlog.naiveBlocked/empty.naiveBlocked, backlog.naiveAdmitted/empty.naiveAdmitted)}, nil
}
