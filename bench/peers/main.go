// Command peers measures the compat runtime's enqueue side by side with a
// plain INSERT into plain-jobs' requests table, with River's Insert and
// InsertMany, and with the floor (the least an exact admission does), in one
// database, in interleaved rounds, and prints same-round ratios, CPU per job
// (client and server) and latency percentiles.
//
// It is a module of its own (bench/peers/go.mod) so that River never becomes
// a dependency of migrate-unique; a replace directive points it at the
// repository's root. See README.md beside this file.
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	neturl "net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/lockid"
	"github.com/migrate-unique/migrate-unique/internal/qualify"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

const usage = `peers [--database URL] [--clients 8,32] [--rounds 5] [--case-duration 2s] [--batch 100] [--blocked-keys 100] [--cases NAME,...] [--json] [--cpuprofile FILE]

Creates a scratch database (dropped afterwards) holding plain-jobs' tables,
migrated by migrate-unique, and River's tables, migrated by rivermigrate;
then, for each client count, runs every case for --case-duration in each of
--rounds rounds (the order rotates each round; the tables are emptied and the
blocked key sets rebuilt before each round) and prints, per case, the
median over rounds of jobs/s, client and server CPU per job, and p50/p99
per call, then the ratios the issue asks for, each computed within a round
and reported as the median over rounds with its range.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

type options struct {
	url          string
	clients      []int
	rounds       int
	caseDuration time.Duration
	batch        int
	blockedKeys  int
	cases        map[string]bool
	json         bool
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintln(fs.Output(), "Usage: "+usage); fs.PrintDefaults() }
	url := fs.String("database", cmp.Or(os.Getenv("DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/postgres"), "a database on the server to measure (the scratch database is created beside it)")
	clients := fs.String("clients", "8,32", "comma-separated client counts; each runs every round")
	rounds := fs.Int("rounds", 5, "rounds per client count")
	dur := fs.Duration("case-duration", 2*time.Second, "how long each case runs in each round")
	batch := fs.Int("batch", 100, "jobs per batch in the batch cases")
	blocked := fs.Int("blocked-keys", 100, "groups (River: unique args) kept full for the blocked cases")
	only := fs.String("cases", "", "comma-separated case names to run (default: all)")
	asJSON := fs.Bool("json", false, "end with one JSON object of every round's figures")
	cpuProfile := fs.String("cpuprofile", "", "write the client's CPU profile to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	o := options{url: *url, rounds: *rounds, caseDuration: *dur, batch: *batch, blockedKeys: *blocked, json: *asJSON}
	for _, c := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return fmt.Errorf("--clients %q: want positive integers separated by commas", *clients)
		}
		o.clients = append(o.clients, n)
	}
	if *only != "" {
		o.cases = map[string]bool{}
		for _, c := range strings.Split(*only, ",") {
			o.cases[strings.TrimSpace(c)] = true
		}
	}
	if o.rounds < 1 || o.batch < 2 || o.blockedKeys < 1 || o.caseDuration <= 0 {
		return errors.New("--rounds, --blocked-keys and --case-duration must be positive and --batch at least 2")
	}
	return measure(ctx, o, out)
}

// peerArgs is the River job the River cases insert; its JSON is the same
// shape as the compat cases' parameters.
type peerArgs struct {
	Key string `json:"key"`
}

func (peerArgs) Kind() string { return "peer" }

// env is the scratch database and the clients on it.
type env struct {
	o      options
	pool   *pgxpool.Pool
	floor  *pgxpool.Pool // the floor's connections: generic plans and the lock wait set per session
	compat *compat.Client
	river  *river.Client[pgx.Tx]
	fresh  atomic.Int64
	pidsMu sync.Mutex
	pids   map[uint32]bool // the pool's backends, whose CPU is the server's
}

func (e *env) key(prefix string) string { return prefix + strconv.FormatInt(e.fresh.Add(1), 36) }

func measure(ctx context.Context, o options, out io.Writer) error {
	admin, err := pgx.Connect(ctx, o.url)
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "migrate_unique_peers_" + hex.EncodeToString(rnd[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return err
	}
	defer func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}()
	url, err := replaceDatabase(o.url, name)
	if err != nil {
		return err
	}
	if err := legacy.PlainJobs.LoadURL(ctx, url, 0); err != nil {
		return fmt.Errorf("load plain-jobs' tables: %w", err)
	}
	if _, err := migrations.Up(ctx, url, legacy.PlainJobs.Layout, migrations.Options{}); err != nil {
		return fmt.Errorf("migrate-unique up: %w", err)
	}
	fmt.Fprintf(out, "scratch database %s: plain-jobs' tables migrated by migrate-unique, River's by rivermigrate\n", name)
	var all []*roundResult
	for _, n := range o.clients {
		e := &env{o: o, pids: map[uint32]bool{}}
		pcfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			return err
		}
		pcfg.MaxConns, pcfg.MinConns = int32(n), int32(n)
		pcfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			e.pidsMu.Lock()
			e.pids[c.PgConn().PID()] = true
			e.pidsMu.Unlock()
			return nil
		}
		if e.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
			return err
		}
		// The floor sets at connect what compat's guard sets in every
		// transaction (a session setting costs nothing per call): generic
		// plans, and a bounded wait for a group's lock (SPEC 3).
		fcfg := pcfg.Copy()
		fcfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
		fcfg.ConnConfig.RuntimeParams["lock_timeout"] = "5s"
		fcfg.ConnConfig.RuntimeParams["search_path"] = "pg_catalog, pg_temp"
		if e.floor, err = pgxpool.NewWithConfig(ctx, fcfg); err != nil {
			e.pool.Close()
			return err
		}
		if len(all) == 0 {
			m, err := rivermigrate.New(riverpgxv5.New(e.pool), nil)
			if err != nil {
				return err
			}
			if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
				return fmt.Errorf("rivermigrate up: %w", err)
			}
		}
		if e.compat, err = compat.NewClient(compat.Pgx(e.pool), legacy.PlainJobs.Layout); err != nil {
			return err
		}
		if e.river, err = river.NewClient(riverpgxv5.New(e.pool), &river.Config{}); err != nil {
			return err
		}
		rs, err := e.rounds(ctx, n, out)
		e.pool.Close()
		e.floor.Close()
		if err != nil {
			return err
		}
		all = append(all, rs...)
		report(out, n, rs)
	}
	if o.json {
		b, err := json.Marshal(all)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s\n", b)
	}
	return nil
}

// replaceDatabase returns the URL with its database name replaced.
func replaceDatabase(raw, name string) (string, error) {
	u, err := neturl.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("--database: want a postgres:// URL")
	}
	u.Path = "/" + name
	return u.String(), nil
}

// A case is one way of enqueueing; op enqueues once (one job, or one batch)
// and returns how many jobs it handled.
type peerCase struct {
	name string
	op   func(ctx context.Context, e *env) (int, error)
}

func (e *env) cases() []peerCase {
	b := e.o.batch
	blocked := func(prefix string, i int64) string {
		return prefix + strconv.FormatInt(i%int64(e.o.blockedKeys), 10)
	}
	var rr atomic.Int64
	compatJob := func(key string, limit int) compat.Job {
		return compat.Job{Class: "peer", Value: compat.Limit(key, limit), Args: peerArgs{Key: key}}
	}
	insert := `INSERT INTO plainjobs_jobrequest (job_class, concurrency_key, parameters, priority, queue, retries, retry_attempt, start_at, created_at, uuid, source, trace_id, span_id)
VALUES ('plain', $1, $2::jsonb, 0, 'default', 0, 0, NULL, now(), gen_random_uuid(), 'compat', NULL, NULL)`
	insertMany := `INSERT INTO plainjobs_jobrequest (job_class, concurrency_key, parameters, priority, queue, retries, retry_attempt, start_at, created_at, uuid, source, trace_id, span_id)
SELECT 'plain', k, p::jsonb, 0, 'default', 0, 0, NULL, now(), gen_random_uuid(), 'compat', NULL, NULL FROM unnest($1::text[], $2::text[]) AS u(k, p)`
	single := func(limit int) func(context.Context, *env) (int, error) {
		return func(ctx context.Context, e *env) (int, error) {
			res, err := e.compat.Enqueue(ctx, compatJob(e.key("f"), limit))
			if err == nil && !res.Inserted() {
				err = fmt.Errorf("a fresh key was refused: %+v", res.Skipped)
			}
			return 1, err
		}
	}
	many := func(limit int) func(context.Context, *env) (int, error) {
		return func(ctx context.Context, e *env) (int, error) {
			jobs := make([]compat.Job, b)
			for i := range jobs {
				jobs[i] = compatJob(e.key("f"), limit)
			}
			res, err := e.compat.EnqueueMany(ctx, jobs)
			for _, r := range res {
				if !r.Inserted() {
					return b, fmt.Errorf("a fresh key was refused: %+v", r.Skipped)
				}
			}
			return b, err
		}
	}
	blockedCompat := func(limit int) func(context.Context, *env) (int, error) {
		return func(ctx context.Context, e *env) (int, error) {
			res, err := e.compat.Enqueue(ctx, compatJob(blocked("b"+strconv.Itoa(limit)+"-", rr.Add(1)), limit))
			if err == nil && res.Inserted() {
				err = errors.New("a full group admitted a job")
			}
			return 1, err
		}
	}
	floorSingle := func(limit int) func(context.Context, *env) (int, error) {
		return func(ctx context.Context, e *env) (int, error) {
			ok, err := e.floorEnqueue(ctx, e.key("f"), limit)
			if err == nil && !ok {
				err = errors.New("the floor refused a fresh key")
			}
			return 1, err
		}
	}
	floorBlocked := func(limit int) func(context.Context, *env) (int, error) {
		return func(ctx context.Context, e *env) (int, error) {
			ok, err := e.floorEnqueue(ctx, blocked("b"+strconv.Itoa(limit)+"-", rr.Add(1)), limit)
			if err == nil && ok {
				err = errors.New("the floor admitted a job into a full group")
			}
			return 1, err
		}
	}
	floorMany := func(limit int) func(context.Context, *env) (int, error) {
		return func(ctx context.Context, e *env) (int, error) {
			keys := make([]string, b)
			for i := range keys {
				keys[i] = e.key("f")
			}
			n, err := e.floorEnqueueMany(ctx, keys, limit)
			if err == nil && n != b {
				err = fmt.Errorf("the floor admitted %d of %d fresh keys", n, b)
			}
			return b, err
		}
	}
	unique := &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
	riverMany := func(opts *river.InsertOpts) func(context.Context, *env) (int, error) {
		return func(ctx context.Context, e *env) (int, error) {
			ps := make([]river.InsertManyParams, b)
			for i := range ps {
				ps[i] = river.InsertManyParams{Args: peerArgs{Key: e.key("f")}, InsertOpts: opts}
			}
			res, err := e.river.InsertMany(ctx, ps)
			for _, r := range res {
				if r.UniqueSkippedAsDuplicate {
					return b, errors.New("River skipped a fresh job as a duplicate")
				}
			}
			return b, err
		}
	}
	return []peerCase{
		{"insert", func(ctx context.Context, e *env) (int, error) {
			k := e.key("f")
			_, err := e.pool.Exec(ctx, insert, k, `{"key":"`+k+`"}`)
			return 1, err
		}},
		{"compat_enqueue_limit1", single(1)},
		{"compat_enqueue_limit3", single(3)},
		{"floor_enqueue_limit1", floorSingle(1)},
		{"floor_enqueue_limit3", floorSingle(3)},
		{"river_insert_unique", func(ctx context.Context, e *env) (int, error) {
			res, err := e.river.Insert(ctx, peerArgs{Key: e.key("f")}, unique)
			if err == nil && res.UniqueSkippedAsDuplicate {
				err = errors.New("River skipped a fresh job as a duplicate")
			}
			return 1, err
		}},
		{"river_insert", func(ctx context.Context, e *env) (int, error) {
			_, err := e.river.Insert(ctx, peerArgs{Key: e.key("f")}, nil)
			return 1, err
		}},
		{"compat_blocked_limit1", blockedCompat(1)},
		{"compat_blocked_limit3", blockedCompat(3)},
		{"floor_blocked_limit1", floorBlocked(1)},
		{"floor_blocked_limit3", floorBlocked(3)},
		{"river_blocked_unique", func(ctx context.Context, e *env) (int, error) {
			res, err := e.river.Insert(ctx, peerArgs{Key: blocked("b1-", rr.Add(1))}, unique)
			if err == nil && !res.UniqueSkippedAsDuplicate {
				err = errors.New("River inserted a duplicate")
			}
			return 1, err
		}},
		{"insert_many", func(ctx context.Context, e *env) (int, error) {
			ks, ps := make([]string, b), make([]string, b)
			for i := range ks {
				ks[i] = e.key("f")
				ps[i] = `{"key":"` + ks[i] + `"}`
			}
			_, err := e.pool.Exec(ctx, insertMany, ks, ps)
			return b, err
		}},
		{"compat_enqueue_many_limit1", many(1)},
		{"compat_enqueue_many_limit3", many(3)},
		{"floor_enqueue_many_limit1", floorMany(1)},
		{"floor_enqueue_many_limit3", floorMany(3)},
		{"river_insert_many_unique", riverMany(unique)},
		{"river_insert_many", riverMany(nil)},
	}
}

// The floor: the least work an exact admission must do (SPEC 3), written by
// hand for this benchmark's jobs (a keyed group limited in code; in a batch,
// every group distinct), pipelined in one implicit transaction, on
// connections whose session forces generic plans and bounds the lock wait:
//
//  1. the class's shared lock and the group's exclusive lock (a batch: every
//     group's, in ascending lock-id order), in one statement;
//  2. after them, so that its snapshot sees every job admitted before the
//     locks were granted, one statement that counts each group's active
//     jobs in both tables, stopping at the limit, and inserts the job when
//     the count is below it, returning the new row's id.
//
// It reads no override or class pause, reports no holders, saves and
// restores no caller's settings, and checks no isolation level: the
// distance from compat to the floor is what those cost, with compat's own
// client work.
var (
	floorLockText = qualify.Must(`SELECT pg_advisory_xact_lock_shared($1::int8), pg_advisory_xact_lock($2::int8)`)
	// A batch's locks: the aggregate calls the lock function row by row, in
	// the array's order.
	floorBatchLockText = qualify.Must(`SELECT pg_advisory_xact_lock_shared($1::int8), (SELECT count(pg_advisory_xact_lock(g.id)::text) FROM unnest($2::int8[]) AS g(id))`)
	floorCount         = func(key string) string {
		return `((SELECT count(*) FROM (SELECT FROM public.plainjobs_jobrequest r WHERE r.job_class = 'peer' AND r.concurrency_key = ` + key + ` LIMIT $3) r)` +
			` + (SELECT count(*) FROM (SELECT FROM public.plainjobs_jobprocess p WHERE p.job_class = 'peer' AND p.concurrency_key = ` + key + ` LIMIT $3) p)) < $3`
	}
	floorAdmitText = qualify.Must(`INSERT INTO public.plainjobs_jobrequest (job_class, concurrency_key, parameters, priority, queue, retries, retry_attempt, start_at, created_at, uuid, source, trace_id, span_id)
SELECT 'peer', $1::text, $2::jsonb, 0, 'default', 0, 0, NULL, now(), gen_random_uuid(), 'compat', NULL, NULL
WHERE ` + floorCount("$1::text") + `
RETURNING id`)
	floorBatchAdmitText = qualify.Must(`INSERT INTO public.plainjobs_jobrequest (job_class, concurrency_key, parameters, priority, queue, retries, retry_attempt, start_at, created_at, uuid, source, trace_id, span_id)
SELECT 'peer', j.k, j.p::jsonb, 0, 'default', 0, 0, NULL, now(), gen_random_uuid(), 'compat', NULL, NULL
FROM unnest($1::text[], $2::text[]) AS j(k, p)
WHERE ` + floorCount("j.k") + `
RETURNING id`)
)

// floorClassID is the lock id of the benchmark's class ("peer", key "").
var floorClassID = lockid.For("peer", "")

// floorEnqueue admits one job of group key at limit through the floor's
// statements; it reports whether the job was inserted.
func (e *env) floorEnqueue(ctx context.Context, key string, limit int) (bool, error) {
	b := &pgx.Batch{}
	b.Queue(floorLockText, floorClassID, lockid.For("peer", key))
	b.Queue(floorAdmitText, key, `{"key":"`+key+`"}`, limit)
	br := e.floor.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return false, err
	}
	var id int64
	switch err := br.QueryRow().Scan(&id); {
	case errors.Is(err, pgx.ErrNoRows):
		return false, br.Close()
	case err != nil:
		return false, err
	}
	return true, br.Close()
}

// floorEnqueueMany admits jobs of distinct groups (keys) at limit through
// the floor's statements; it returns how many were inserted.
func (e *env) floorEnqueueMany(ctx context.Context, keys []string, limit int) (int, error) {
	ids := make([]int64, len(keys))
	params := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = lockid.For("peer", k)
		params[i] = `{"key":"` + k + `"}`
	}
	slices.Sort(ids)
	b := &pgx.Batch{}
	b.Queue(floorBatchLockText, floorClassID, ids)
	b.Queue(floorBatchAdmitText, keys, params, limit)
	br := e.floor.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return 0, err
	}
	rows, err := br.Query()
	if err != nil {
		return 0, err
	}
	n := 0
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	return n, br.Close()
}

// caseResult is one case's figures in one round.
type caseResult struct {
	Case            string  `json:"case"`
	Jobs            int     `json:"jobs"`
	Calls           int     `json:"calls"`
	Seconds         float64 `json:"seconds"`
	JobsPerSecond   float64 `json:"jobs_per_second"`
	ClientCPUPerJob float64 `json:"client_cpu_us_per_job"`
	ServerCPUPerJob float64 `json:"server_cpu_us_per_job"`
	P50Micros       float64 `json:"p50_us"`
	P99Micros       float64 `json:"p99_us"`
}

type roundResult struct {
	Clients int                    `json:"clients"`
	Round   int                    `json:"round"`
	Load1   float64                `json:"loadavg_1m"`
	Cases   map[string]*caseResult `json:"cases"`
}

func (e *env) rounds(ctx context.Context, clients int, out io.Writer) ([]*roundResult, error) {
	cases := e.cases()
	if e.o.cases != nil {
		cases = slices.DeleteFunc(cases, func(c peerCase) bool { return !e.o.cases[c.name] })
	}
	var rs []*roundResult
	for r := range e.o.rounds {
		if err := e.reset(ctx); err != nil {
			return nil, err
		}
		rr := &roundResult{Clients: clients, Round: r + 1, Load1: loadavg(), Cases: map[string]*caseResult{}}
		// Rotate the order so no case always runs first or last.
		for i := range cases {
			c := cases[(i+r)%len(cases)]
			res, err := e.runCase(ctx, c, clients)
			if err != nil {
				return nil, fmt.Errorf("%d clients, round %d, %s: %w", clients, r+1, c.name, err)
			}
			rr.Cases[c.name] = res
		}
		fmt.Fprintf(out, "%d clients, round %d done (load %.1f at its start)\n", clients, r+1, rr.Load1)
		rs = append(rs, rr)
	}
	return rs, nil
}

// reset empties the tables and fills the blocked sets: each compat group
// at its limit (1 and 3), and River's unique args once each.
func (e *env) reset(ctx context.Context) error {
	if _, err := e.pool.Exec(ctx, "TRUNCATE plainjobs_jobrequest, river_job"); err != nil {
		return err
	}
	for i := range e.o.blockedKeys {
		for _, limit := range []int{1, 3} {
			key := "b" + strconv.Itoa(limit) + "-" + strconv.Itoa(i)
			for range limit {
				if _, err := e.compat.Enqueue(ctx, compat.Job{Class: "peer", Value: compat.Limit(key, limit), Args: peerArgs{Key: key}}); err != nil {
					return err
				}
			}
		}
		if _, err := e.river.Insert(ctx, peerArgs{Key: "b1-" + strconv.Itoa(i)}, &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}); err != nil {
			return err
		}
	}
	_, err := e.pool.Exec(ctx, "ANALYZE plainjobs_jobrequest, river_job")
	return err
}

func (e *env) runCase(ctx context.Context, c peerCase, clients int) (*caseResult, error) {
	// A short warm-up on every connection (statement caches, plans).
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() { _, _ = c.op(ctx, e) })
	}
	wg.Wait()
	var jobs, calls atomic.Int64
	lat := make([][]time.Duration, clients)
	errs := make(chan error, clients)
	cpu0, srv0 := clientCPU(), e.serverCPU()
	start := time.Now()
	deadline := start.Add(e.o.caseDuration)
	for w := range clients {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				t0 := time.Now()
				n, err := c.op(ctx, e)
				if err != nil {
					errs <- err
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
				jobs.Add(int64(n))
				calls.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu, srv := clientCPU()-cpu0, e.serverCPU()-srv0
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	n := float64(jobs.Load())
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds())
	}
	return &caseResult{Case: c.name, Jobs: int(n), Calls: int(calls.Load()), Seconds: elapsed.Seconds(),
		JobsPerSecond: n / elapsed.Seconds(), ClientCPUPerJob: float64(cpu.Microseconds()) / n, ServerCPUPerJob: float64(srv.Microseconds()) / n,
		P50Micros: pct(0.50), P99Micros: pct(0.99)}, nil
}

// clientCPU is this process's user and system time.
func clientCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the time the pool's backends have spent on a CPU, from
// /proc/PID/schedstat (nanoseconds; the server must run on this machine).
func (e *env) serverCPU() time.Duration {
	e.pidsMu.Lock()
	defer e.pidsMu.Unlock()
	var total time.Duration
	for pid := range e.pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/schedstat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, _ := strconv.ParseInt(f[0], 10, 64)
		total += time.Duration(ns)
	}
	return total
}

func loadavg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}

// comparison is one row of the side-by-side tables: a case and the three
// baselines it is read against (River's equivalent, a plain INSERT of the
// same rows, and the floor); "" where a baseline does not apply.
type comparison struct {
	name, river, insert, floor string
}

var comparisons = []comparison{
	{"compat_enqueue_limit1", "river_insert_unique", "insert", "floor_enqueue_limit1"},
	{"compat_enqueue_limit3", "river_insert_unique", "insert", "floor_enqueue_limit3"},
	{"compat_blocked_limit1", "river_blocked_unique", "insert", "floor_blocked_limit1"},
	{"compat_blocked_limit3", "river_blocked_unique", "insert", "floor_blocked_limit3"},
	{"compat_enqueue_many_limit1", "river_insert_many_unique", "insert_many", "floor_enqueue_many_limit1"},
	{"compat_enqueue_many_limit3", "river_insert_many_unique", "insert_many", "floor_enqueue_many_limit3"},
	{"floor_enqueue_limit1", "river_insert_unique", "insert", ""},
	{"floor_blocked_limit1", "river_blocked_unique", "insert", ""},
	{"floor_enqueue_many_limit1", "river_insert_many_unique", "insert_many", ""},
}

// ratio is a goal of issue 30: num over den of one figure, where higher is
// better for num.
type ratio struct {
	name     string
	num, den string
	cpu      bool // compare CPU per job (den's over num's) instead of jobs/s
	goal     string
}

var ratios = []ratio{
	{"batch (limit 1) vs River unique InsertMany, jobs/s", "compat_enqueue_many_limit1", "river_insert_many_unique", false, ">= 1.2"},
	{"batch (limit 3) vs River unique InsertMany, jobs/s", "compat_enqueue_many_limit3", "river_insert_many_unique", false, ">= 1.2"},
	{"batch (limit 1) vs plain multi-row INSERT, jobs/s", "compat_enqueue_many_limit1", "insert_many", false, ">= 0.8"},
	{"batch (limit 3) vs plain multi-row INSERT, jobs/s", "compat_enqueue_many_limit3", "insert_many", false, ">= 0.8"},
	{"single admitted (limit 1) vs plain INSERT, CPU per job", "compat_enqueue_limit1", "insert", true, ">= 0.77 (CPU <= 1.3x)"},
	{"single admitted (limit 3) vs plain INSERT, CPU per job", "compat_enqueue_limit3", "insert", true, ">= 0.77 (CPU <= 1.3x)"},
	{"blocked (limit 1) vs River blocked unique Insert, jobs/s", "compat_blocked_limit1", "river_blocked_unique", false, ">= 3"},
	{"blocked (limit 3) vs River blocked unique Insert, jobs/s", "compat_blocked_limit3", "river_blocked_unique", false, ">= 3"},
}

// sameRound returns num's figure over den's in each round that ran both:
// jobs/s, or (cpu) den's total CPU per job over num's.
func sameRound(rs []*roundResult, num, den string, cpu bool) []float64 {
	var v []float64
	for _, r := range rs {
		a, b := r.Cases[num], r.Cases[den]
		if a == nil || b == nil {
			continue
		}
		if cpu {
			v = append(v, (b.ClientCPUPerJob+b.ServerCPUPerJob)/(a.ClientCPUPerJob+a.ServerCPUPerJob))
		} else {
			v = append(v, a.JobsPerSecond/b.JobsPerSecond)
		}
	}
	return v
}

// spread renders the median of v with its range ("-" when empty).
func spread(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f [%.2f-%.2f]", median(v), slices.Min(v), slices.Max(v))
}

func report(out io.Writer, clients int, rs []*roundResult) {
	loads := make([]float64, len(rs))
	for i, r := range rs {
		loads[i] = r.Load1
	}
	fmt.Fprintf(out, "\n%d clients, %d rounds, load average (1 min) at the rounds' starts: %v\n", clients, len(rs), loads)
	fmt.Fprintf(out, "%-28s %10s %12s %12s %10s %10s\n", "case (median of rounds)", "jobs/s", "client us/job", "server us/job", "p50 us", "p99 us")
	var names []string
	for name := range rs[0].Cases {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		med := func(f func(*caseResult) float64) float64 {
			var v []float64
			for _, r := range rs {
				if c := r.Cases[name]; c != nil {
					v = append(v, f(c))
				}
			}
			return median(v)
		}
		fmt.Fprintf(out, "%-28s %10.0f %12.1f %12.1f %10.0f %10.0f\n", name,
			med(func(c *caseResult) float64 { return c.JobsPerSecond }), med(func(c *caseResult) float64 { return c.ClientCPUPerJob }),
			med(func(c *caseResult) float64 { return c.ServerCPUPerJob }), med(func(c *caseResult) float64 { return c.P50Micros }),
			med(func(c *caseResult) float64 { return c.P99Micros }))
	}
	for _, cpu := range []bool{false, true} {
		what := "jobs/s, the case's over the baseline's"
		if cpu {
			what = "CPU per job (client + server), the baseline's over the case's"
		}
		fmt.Fprintf(out, "\nsame-round ratios, %s (median [min-max] over rounds; higher is better):\n", what)
		fmt.Fprintf(out, "  %-28s %-20s %-20s %-20s\n", "case", "vs River", "vs plain INSERT", "vs floor")
		for _, c := range comparisons {
			if rs[0].Cases[c.name] == nil {
				continue
			}
			cell := func(den string) string {
				if den == "" {
					return "-"
				}
				return spread(sameRound(rs, c.name, den, cpu))
			}
			fmt.Fprintf(out, "  %-28s %-20s %-20s %-20s\n", c.name, cell(c.river), cell(c.insert), cell(c.floor))
		}
	}
	fmt.Fprintf(out, "\nissue 30's goals (same-round ratios, median [min-max]):\n")
	for _, q := range ratios {
		v := sameRound(rs, q.num, q.den, q.cpu)
		if len(v) == 0 {
			continue
		}
		fmt.Fprintf(out, "  %-58s %s  (goal %s)\n", q.name, spread(v), q.goal)
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
