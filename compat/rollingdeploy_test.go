package compat

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// A rolling deploy, played by both application versions against the real
// plain-jobs tables (testdata/legacy/plainjobs.sql):
//
//   - the old version is plain-jobs 0.37.6's own SQL (github.com/dropseed/plain,
//     tag plain-jobs@0.37.6, commit 253bf8e9ae07513efbbc3229d6231e8f020f6546):
//     plain-jobs/plain/jobs/jobs.py Job.run_in_worker (no transaction, no
//     lock: _in_progress(unique_key) reads the requests and the processes of
//     the key, then JobRequest(...).save(clean_and_validate=False), an
//     IntegrityError (23505) taken as "Job already in progress"), and
//     plain-jobs/plain/jobs/workers.py Worker.run with models.py
//     JobRequest.convert_to_job_process (in one transaction: the next request
//     FOR UPDATE SKIP LOCKED, a process row, the request deleted) and
//     process_job with JobProcess.run and convert_to_result (the process row
//     by uuid, started_at set, in one transaction a result row and the
//     process row deleted). Every statement names unique_key as plain's ORM
//     renders the models' fields, in their order.
//   - the new version is compat (a client made before the first phase, and
//     one through database/sql with pgx's stdlib driver), and
//     plain-jobs 0.38.0's own SQL (tag plain-jobs@0.38.0, commit
//     8d4dae06b26d0533384646f9777ed5224574b936, the code of commit
//     01b6986d798b4df9f80370c8bcbbdbc1b66f4783): jobs.py run_in_worker as
//     interop_test.go plays it (advisory lock, counts, insert), and the same
//     worker with the field renamed concurrency_key (models.py). Its sessions
//     set search_path = <version schema>, public, as a pgroll client does, so
//     its unqualified table names find the version schema's views.
//
// Uuids and timestamps that the ORM computes in Python are computed by the
// server here (gen_random_uuid(), now()); nothing else differs.

// pjVersion is one plain-jobs version's SQL: its key column's name.
type pjVersion struct {
	name string
	key  string
}

var (
	pj037 = pjVersion{"plain-jobs 0.37.6", layout.LegacyKeyColumn}
	pj038 = pjVersion{"plain-jobs 0.38.0", layout.KeyColumn}
)

func (v pjVersion) cols(table string, names ...string) string {
	out := make([]string, len(names))
	for i, n := range names {
		if n == "KEY" {
			n = v.key
		}
		out[i] = `"` + table + `"."` + n + `"`
	}
	return strings.Join(out, ", ")
}

// The models' fields, in their order (models.py of each version).
var (
	requestFields = []string{"id", "created_at", "uuid", "job_class", "parameters", "priority", "source", "queue", "retries", "retry_attempt", "KEY", "start_at", "trace_id", "span_id"}
	processFields = []string{"id", "uuid", "created_at", "started_at", "job_request_uuid", "job_class", "parameters", "priority", "source", "queue", "retries", "retry_attempt", "KEY", "trace_id", "span_id"}
)

// inProgress is _in_progress's two reads (0.37.6 jobs.py).
func (v pjVersion) inProgress(table string) string {
	order := `"` + table + `"."created_at" DESC`
	if table == layout.PlainJobsRequests {
		order = `"` + table + `"."priority" ASC, ` + order
	}
	fields := processFields
	if table == layout.PlainJobsRequests {
		fields = requestFields
	}
	return `SELECT ` + v.cols(table, fields...) + ` FROM "` + table + `" WHERE ("` + table + `"."job_class" = $1 AND "` + table + `"."` + v.key + `" = $2) ORDER BY ` + order
}

// enqueue037 is plain-jobs 0.37.6's run_in_worker: inserted false is a
// duplicate (the in-progress check, or the IntegrityError it catches).
func enqueue037(ctx context.Context, pool *pgxpool.Pool, class, key, queue string) (inserted bool, err error) {
	v := pj037
	if key != "" {
		for _, t := range []string{layout.PlainJobsRequests, layout.PlainJobsProcesses} {
			rows, err := pool.Query(ctx, v.inProgress(t), class, key)
			if err != nil {
				return false, err
			}
			n := 0
			for rows.Next() {
				n++
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return false, err
			}
			if n > 0 {
				return false, nil
			}
		}
	}
	_, err = pool.Exec(ctx, `INSERT INTO "plainjobs_jobrequest" ("created_at", "uuid", "job_class", "parameters", "priority", "source", "queue", "retries", "retry_attempt", "unique_key", "start_at", "trace_id", "span_id")
VALUES (now(), gen_random_uuid(), $1, '{"args": [], "kwargs": {}}', 0, 'app/views.py:12', $2, 0, 0, $3, NULL, NULL, NULL) RETURNING "plainjobs_jobrequest"."id"`, class, queue, key)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return false, nil // IntegrityError: "Job already in progress"
	}
	return err == nil, err
}

// claim is Worker.run's transaction: the next request of the queues,
// converted to a process row. It returns the process row's uuid ("" when no
// request is ready).
func (v pjVersion) claim(ctx context.Context, pool *pgxpool.Pool, queues ...string) (uuid string, err error) {
	r := layout.PlainJobsRequests
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+v.cols(r, requestFields...)+` FROM "`+r+`" WHERE ("`+r+`"."queue" = ANY($1) AND ("`+r+`"."start_at" IS NULL OR "`+r+`"."start_at" <= $2)) ORDER BY "`+r+`"."priority" ASC, "`+r+`"."start_at" DESC, "`+r+`"."created_at" DESC LIMIT 1 FOR UPDATE SKIP LOCKED`, queues, time.Now())
		if err != nil {
			return err
		}
		var vals []any
		if rows.Next() {
			vals, err = rows.Values()
		}
		rows.Close()
		if err != nil || rows.Err() != nil || vals == nil {
			return errors.Join(err, rows.Err())
		}
		f := func(name string) any { return vals[fieldIndex(requestFields, name)] }
		if err := tx.QueryRow(ctx, `INSERT INTO "plainjobs_jobprocess" ("uuid", "created_at", "started_at", "job_request_uuid", "job_class", "parameters", "priority", "source", "queue", "retries", "retry_attempt", "`+v.key+`", "trace_id", "span_id")
VALUES (gen_random_uuid(), now(), NULL, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING "plainjobs_jobprocess"."uuid"::text`,
			f("uuid"), f("job_class"), f("parameters"), f("priority"), f("source"), f("queue"), f("retries"), f("retry_attempt"), f("KEY"), f("trace_id"), f("span_id")).Scan(&uuid); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM "plainjobs_jobrequest" WHERE "plainjobs_jobrequest"."id" IN ($1)`, f("id"))
		return err
	})
	return uuid, err
}

func fieldIndex(fields []string, name string) int {
	for i, f := range fields {
		if f == name {
			return i
		}
	}
	panic("no field " + name)
}

// process is process_job for one process row: JobProcess.run (started_at,
// the job, which succeeds) and convert_to_result.
func (v pjVersion) process(ctx context.Context, pool *pgxpool.Pool, uuid string) error {
	p := layout.PlainJobsProcesses
	rows, err := pool.Query(ctx, `SELECT `+v.cols(p, processFields...)+` FROM "`+p+`" WHERE "`+p+`"."uuid" = $1 LIMIT 21`, uuid)
	if err != nil {
		return err
	}
	var vals []any
	if rows.Next() {
		vals, err = rows.Values()
	}
	rows.Close()
	if err != nil || rows.Err() != nil {
		return errors.Join(err, rows.Err())
	}
	if vals == nil {
		return fmt.Errorf("%s: JobProcess.DoesNotExist: uuid %s", v.name, uuid)
	}
	f := func(name string) any { return vals[fieldIndex(processFields, name)] }
	started := time.Now()
	if _, err := pool.Exec(ctx, `UPDATE "plainjobs_jobprocess" SET "started_at" = $1 WHERE "plainjobs_jobprocess"."id" = $2`, started, f("id")); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO "plainjobs_jobresult" ("uuid", "created_at", "job_process_uuid", "started_at", "ended_at", "error", "status", "job_request_uuid", "job_class", "parameters", "priority", "source", "queue", "retries", "retry_attempt", "`+v.key+`", "retry_job_request_uuid", "trace_id", "span_id")
VALUES (gen_random_uuid(), now(), $1, $2, now(), '', 'SUCCESSFUL', $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL, $12, $13) RETURNING "plainjobs_jobresult"."id"`,
			f("uuid"), started, f("job_request_uuid"), f("job_class"), f("parameters"), f("priority"), f("source"), f("queue"), f("retries"), f("retry_attempt"), f("KEY"), f("trace_id"), f("span_id")); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM "plainjobs_jobprocess" WHERE "plainjobs_jobprocess"."id" IN ($1)`, f("id"))
		return err
	})
}

// deploy is the traffic of a rolling deploy: writers and workers of both
// versions, each group started and stopped on its own, and the invariants
// they are checked against.
type deploy struct {
	t      *testing.T
	url    string
	vsName string // the version schema

	mu       sync.Mutex
	failures []string // failed writes and worker statements, by source
	over     []string // compat groups seen above their limit

	inserted atomic.Int64 // jobs inserted, every writer
	// layoutChanged counts the caller's transactions a migration phase
	// aborted (ErrLayoutChanged), each run again.
	layoutChanged atomic.Int64
	skipped       sync.Map // SkipReason -> *atomic.Int64

	compat *Client
}

// The compat-only groups: keyed, limit 3. Nothing but compat writes them and
// workers only move their rows out of the active set, so one above its
// limit is a compat admission's doing.
// syncKeys prefix the keys of syncClass compat writes: the ones every
// version writes, and compat's own.
var syncKeys = [2]string{"sync-", "new-sync-"}

const (
	chargeClass = "go.Charge"
	chargeLimit = 3
	chargeKeys  = 5 // acct-0 ... acct-4
	// syncClass is written by every version: limit 1 per key in compat,
	// plain-jobs' default (one per key) in Python.
	syncClass = "app.jobs.Sync"
)

func (d *deploy) fail(source string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.failures) < 20 {
		d.failures = append(d.failures, fmt.Sprintf("%s: %v", source, err))
	} else {
		d.failures[19] = fmt.Sprintf("... and more, last %s: %v", source, err)
	}
}

// pool opens a pool named app; searchPath "" keeps the server's.
func (d *deploy) pool(app, searchPath string, conns int32) *pgxpool.Pool {
	d.t.Helper()
	return d.poolOn(d.url, app, searchPath, conns, pgx.QueryExecModeCacheStatement)
}

// poolOn opens a pool named app on url in exec mode mode (behind a
// transaction pooler, QueryExecModeExec).
func (d *deploy) poolOn(url, app, searchPath string, conns int32, mode pgx.QueryExecMode) *pgxpool.Pool {
	d.t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		d.t.Fatal(err)
	}
	cfg.MaxConns = conns
	cfg.ConnConfig.DefaultQueryExecMode = mode
	if mode == pgx.QueryExecModeExec {
		// Exec mode (what a transaction pooler needs) infers each
		// parameter's type from its Go type: the ORM's uuids and JSON
		// arrive as pgx reads them back.
		cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
			c.TypeMap().RegisterDefaultPgType([16]uint8{}, "uuid")
			c.TypeMap().RegisterDefaultPgType(map[string]any{}, "jsonb")
			return nil
		}
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	if searchPath != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = searchPath
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(p.Close)
	return p
}

// actors is a group of goroutines stopped together, each between two of
// its steps (never in the middle of one: every error is a failure).
type actors struct {
	stopped atomic.Bool
	wg      sync.WaitGroup
}

// start runs n copies of loop until stop; loop returns after one step.
func (d *deploy) start(n int, loop func(ctx context.Context, i, round int)) *actors {
	ctx := context.Background()
	a := &actors{}
	for i := range n {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			for round := 0; !a.stopped.Load(); round++ {
				loop(ctx, i, round)
			}
		}()
	}
	return a
}

func (a *actors) stop() {
	a.stopped.Store(true)
	a.wg.Wait()
}

// writerPace spaces a writer's enqueues, so that the workers keep up (a
// plain-jobs worker takes the newest request first).
const writerPace = 10 * time.Millisecond

// oldWriters play plain-jobs 0.37.6's run_in_worker on pool.
func (d *deploy) oldWriters(pool *pgxpool.Pool, n int) *actors {
	return d.start(n, func(ctx context.Context, i, round int) {
		time.Sleep(writerPace)
		class, key := syncClass, fmt.Sprintf("sync-%d", round%7)
		if round%10 == 0 {
			class, key = "app.jobs.Report", "" // keyless: no check
		}
		ok, err := enqueue037(ctx, pool, class, key, "default")
		if err != nil {
			d.fail("old writer (0.37.6)", err)
		}
		if ok {
			d.inserted.Add(1)
		}
	})
}

// newWriters play plain-jobs 0.38.0's run_in_worker through the version
// schema, on the old version's keys: plain-jobs 0.38 takes the group's lock
// and counts, 0.37 takes no lock, and while the old unique rule stands the
// expanded layout's enqueue lock (a trigger that takes the group's lock for
// every keyed insert) keeps a 0.37 insert from landing between 0.38's count
// and insert (which plain-jobs 0.38 would not catch: a raw 23505).
func (d *deploy) newWriters(pool *pgxpool.Pool, n int) *actors {
	return d.start(n, func(ctx context.Context, i, round int) {
		time.Sleep(writerPace)
		j := pyJob{class: syncClass, key: fmt.Sprintf("sync-%d", round%7), queue: "default"}
		if round%10 == 0 {
			j = pyJob{class: "app.jobs.Report", queue: "default"}
		}
		uuid, err := pyEnqueueTx(ctx, pool, j)
		if err != nil {
			d.fail("new writer (0.38.0 via the version schema)", err)
		}
		if err == nil && uuid != "" {
			d.inserted.Add(1)
		}
	})
}

// compatWriters enqueue through one compat client made before the deploy:
// single, batch, and in a caller's transaction.
func (d *deploy) compatWriters(pool *pgxpool.Pool, n int) *actors {
	return d.compatWritersWith(d.compat, pool, n)
}

// compatWritersWith are compatWriters through client c, the caller's
// transactions on pool.
func (d *deploy) compatWritersWith(c *Client, pool *pgxpool.Pool, n int) *actors {
	return d.start(n, func(ctx context.Context, i, round int) {
		time.Sleep(writerPace)
		charge := func(k int) Job {
			return Job{Class: chargeClass, Value: Limit(fmt.Sprintf("acct-%d", k%chargeKeys), chargeLimit), Args: PlainArgs{}}
		}
		var res []Result
		var err error
		switch round % 4 {
		case 0:
			res, err = c.EnqueueMany(ctx, []Job{charge(round), charge(round + 1), charge(round), {Class: syncClass, Value: Limit(syncKeys[round%2]+fmt.Sprint(round%7), 1), Args: PlainArgs{}}})
		case 1:
			// The caller's transaction: run again when a migration phase
			// aborted it (ErrLayoutChanged), as the docs say.
			for try := 0; try < 3; try++ {
				err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, `INSERT INTO app_orders (note) VALUES ('order')`); err != nil {
						return err
					}
					var err error
					res, err = c.EnqueueManyTx(ctx, Pgx(tx), []Job{charge(round + i)})
					return err
				})
				if !errors.Is(err, ErrLayoutChanged) {
					break
				}
				d.layoutChanged.Add(1)
			}
		default:
			var r Result
			r, err = c.Enqueue(ctx, charge(round+i))
			res = []Result{r}
		}
		if err != nil {
			d.fail("compat writer", err)
			return
		}
		d.tally(res)
	})
}

// tally counts a writer's results: inserted, or skipped by reason.
func (d *deploy) tally(res []Result) {
	for _, r := range res {
		if r.Inserted() {
			d.inserted.Add(1)
			continue
		}
		c, _ := d.skipped.LoadOrStore(r.Skipped.Reason, new(atomic.Int64))
		c.(*atomic.Int64).Add(1)
	}
}

// compatSQLWriters are compatWriters through database/sql (pgx's stdlib
// driver over pool): a compat client of its own, made on the first phase's
// layout, single and batch enqueues, and the caller's *sql.Tx.
func (d *deploy) compatSQLWriters(pool *pgxpool.Pool, n int) *actors {
	db := stdlib.OpenDBFromPool(pool)
	d.t.Cleanup(func() { db.Close() })
	return d.compatSQLWritersOn(db, "compat writer (database/sql)", n)
}

// compatSQLWritersOn are compatSQLWriters on db, any database/sql driver;
// their failures are reported as source.
func (d *deploy) compatSQLWritersOn(db *sql.DB, source string, n int) *actors {
	c, err := NewClient(SQL(db), legacy.PlainJobs.Layout)
	if err != nil {
		d.t.Fatal(err)
	}
	return d.start(n, func(ctx context.Context, i, round int) {
		time.Sleep(writerPace)
		charge := func(k int) Job {
			return Job{Class: chargeClass, Value: Limit(fmt.Sprintf("acct-%d", k%chargeKeys), chargeLimit), Args: PlainArgs{}}
		}
		var res []Result
		var err error
		switch round % 3 {
		case 0:
			res, err = c.EnqueueMany(ctx, []Job{charge(round), {Class: syncClass, Value: Limit(syncKeys[round%2]+fmt.Sprint(round%7), 1), Args: PlainArgs{}}})
		case 1:
			for try := 0; try < 3; try++ {
				var tx *sql.Tx
				if tx, err = db.BeginTx(ctx, nil); err != nil {
					break
				}
				if _, err = tx.ExecContext(ctx, `INSERT INTO app_orders (note) VALUES ('order via database/sql')`); err == nil {
					res, err = c.EnqueueManyTx(ctx, SQL(tx), []Job{charge(round + i)})
				}
				if err == nil {
					err = tx.Commit()
				} else {
					_ = tx.Rollback()
				}
				if !errors.Is(err, ErrLayoutChanged) {
					break
				}
				d.layoutChanged.Add(1)
			}
		default:
			var r Result
			r, err = c.Enqueue(ctx, charge(round+i))
			res = []Result{r}
		}
		if err != nil {
			d.fail(source, err)
			return
		}
		d.tally(res)
	})
}

// workers play a plain-jobs worker of version v on pool: claim, run.
func (d *deploy) workers(v pjVersion, pool *pgxpool.Pool, n int) *actors {
	return d.start(n, func(ctx context.Context, i, round int) {
		uuid, err := v.claim(ctx, pool, "default")
		if err != nil {
			d.fail(v.name+" worker", err)
			return
		}
		if uuid == "" {
			time.Sleep(2 * time.Millisecond)
			return
		}
		// A claimed job is always finished: the worker stops after it.
		if err := v.process(context.Background(), pool, uuid); err != nil {
			d.fail(v.name+" worker", err)
		}
	})
}

// monitor checks the compat-only groups against their limit without pause
// until stopped. The key column is read by name from the row's JSON (the
// name a parameter), so its statement names neither key column.
func (d *deploy) monitor(pool *pgxpool.Pool) *actors {
	return d.start(1, func(ctx context.Context, _, _ int) {
		rows, err := pool.Query(ctx, `SELECT k, count(*) FROM (
    SELECT coalesce(to_jsonb(r) ->> $2, to_jsonb(r) ->> $3) AS k FROM plainjobs_jobrequest r WHERE job_class = $1
    UNION ALL
    SELECT coalesce(to_jsonb(p) ->> $2, to_jsonb(p) ->> $3) FROM plainjobs_jobprocess p WHERE job_class = $1
) a GROUP BY k HAVING count(*) > $4`, chargeClass, layout.KeyColumn, layout.LegacyKeyColumn, chargeLimit)
		if err != nil {
			d.fail("monitor", err)
			return
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			var n int
			if err := rows.Scan(&k, &n); err != nil {
				d.fail("monitor", err)
				return
			}
			d.mu.Lock()
			d.over = append(d.over, fmt.Sprintf("%s::%s has %d active jobs, limit %d", chargeClass, k, n, chargeLimit))
			d.mu.Unlock()
		}
		time.Sleep(time.Millisecond)
	})
}

// check fails the test on any failed write, worker statement or group over
// its limit so far.
func (d *deploy) check(phase string) {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.failures) > 0 {
		d.t.Fatalf("%s: %d failures, want 0:\n%s", phase, len(d.failures), strings.Join(d.failures, "\n"))
	}
	if len(d.over) > 0 {
		d.t.Fatalf("%s: compat groups over their limit:\n%s", phase, strings.Join(d.over, "\n"))
	}
}

// finishAll runs workers of version v until no job is active, then checks
// that every job inserted has its successful result.
func (d *deploy) finishAll(v pjVersion, pool *pgxpool.Pool) {
	d.t.Helper()
	ctx := d.t.Context()
	w := d.workers(v, pool, 2)
	defer w.stop()
	deadline := time.Now().Add(time.Minute)
	for {
		var active int
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM plainjobs_jobrequest) + (SELECT count(*) FROM plainjobs_jobprocess)`).Scan(&active); err != nil {
			d.t.Fatal(err)
		}
		if active == 0 {
			break
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%d jobs still active after a minute of %s workers", active, v.name)
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.stop()
	var results, other int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'SUCCESSFUL'), count(*) FILTER (WHERE status <> 'SUCCESSFUL') FROM plainjobs_jobresult`).Scan(&results, &other); err != nil {
		d.t.Fatal(err)
	}
	if results != d.inserted.Load() || other != 0 {
		d.t.Fatalf("%d jobs inserted, %d successful results and %d others; want every job finished", d.inserted.Load(), results, other)
	}
}

func (d *deploy) skips(reason SkipReason) int64 {
	c, ok := d.skipped.Load(reason)
	if !ok {
		return 0
	}
	return c.(*atomic.Int64).Load()
}

// newDeploy loads plain-jobs 0.37.6's tables into a fresh database and makes
// the compat client the new version uses throughout.
func newDeploy(t *testing.T) *deploy {
	testdb.Heavy(t)
	url := testdb.New(t)
	if err := legacy.PlainJobs.LoadURL(t.Context(), url, 0); err != nil {
		t.Fatal(err)
	}
	d := &deploy{t: t, url: url, vsName: migrations.DefaultVersionSchema(legacy.PlainJobs.Layout.Schema)}
	admin := d.pool("rolling-deploy-admin", "", 2)
	if _, err := admin.Exec(t.Context(), `CREATE TABLE app_orders (id bigint GENERATED ALWAYS AS IDENTITY, note text)`); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(Pgx(d.pool("new-version-compat", "", 6)), legacy.PlainJobs.Layout)
	if err != nil {
		t.Fatal(err)
	}
	d.compat = c
	return d
}

// phase runs f (a migration) while the traffic runs, and waits a little
// after it so that the traffic meets the new layout.
func (d *deploy) phase(name string, f func() error) {
	d.t.Helper()
	time.Sleep(150 * time.Millisecond)
	start := time.Now()
	if err := f(); err != nil {
		d.t.Fatalf("%s: %v", name, err)
	}
	var backlog int
	_ = d.compat.db.QueryRow(context.Background(), `SELECT count(*) FROM plainjobs_jobrequest`).Scan(&backlog)
	d.t.Logf("%s: %v under traffic (%d requests queued after it)", name, time.Since(start).Round(time.Millisecond), backlog)
	time.Sleep(150 * time.Millisecond)
	d.check(name)
}

// TestRollingDeployExpandCompleteDown: the old version and the new one
// write, and their workers run, across up --expand; the new version alone
// across up (complete), which refuses while a session of the old version is
// still there (known by its last statement, or by --old-app-name for an
// idle worker's); the jobs the old version's worker claimed before complete are
// finished after it; then the new version across down --drain from the
// migrated layout, and the old version again after it. No write fails, no
// compat group is ever over its limit, every job is finished.
func TestRollingDeployExpandCompleteDown(t *testing.T) {
	d := newDeploy(t)
	ctx := t.Context()
	l := legacy.PlainJobs.Layout
	oldApp := d.pool("old-version", "", 4)
	oldWorkerPool := d.pool("old-version-worker", "", 3)
	mon := d.monitor(d.pool("monitor", "", 1))
	defer mon.stop()

	// Legacy: the old version runs; the new version's compat is deployed
	// first and admits what the unique rule allows.
	oldW := d.oldWriters(oldApp, 2)
	oldK := d.workers(pj037, oldWorkerPool, 3)
	cw := d.compatWriters(d.pool("new-version-compat-tx", "", 4), 2)
	defer cw.stop()
	cs := d.compatSQLWriters(d.pool("new-version-compat-sql", "", 4), 1)
	defer cs.stop()

	d.phase("up --expand", func() error {
		_, err := migrations.Up(ctx, d.url, l, d.migrating(migrations.Options{Expand: true}))
		return err
	})
	// Expanded: the new version's code that names concurrency_key starts,
	// through the version schema.
	vsPath := layout.Ident(d.vsName) + ", public"
	newApp := d.pool("new-version", vsPath, 4)
	newWorkerPool := d.pool("new-version-worker", vsPath, 3)
	nw := d.newWriters(newApp, 2)
	nk := d.workers(pj038, newWorkerPool, 3)
	time.Sleep(300 * time.Millisecond)
	d.check("expanded, both versions")

	// The old version is retired: its writers stop, its worker claims three
	// more jobs of its own queue and stops before running them.
	oldW.stop()
	oldK.stop()
	for range 3 {
		if ok, err := enqueue037(ctx, oldApp, "app.jobs.Stranded", "", "old-pods"); err != nil || !ok {
			t.Fatalf("old writer, queue old-pods: %v %v", ok, err)
		}
		d.inserted.Add(1)
	}
	var claimed []string
	for range 3 {
		uuid, err := pj037.claim(ctx, oldWorkerPool, "old-pods")
		if err != nil || uuid == "" {
			t.Fatalf("old worker's claim: %q %v", uuid, err)
		}
		claimed = append(claimed, uuid)
	}
	// While a session of the old version is there, complete refuses,
	// naming it; nothing changed.
	_, err := migrations.Up(ctx, d.url, l, migrations.Options{})
	var pe *migrations.PreflightError
	if !errors.As(err, &pe) || !hasFinding(pe, "old_version_writing", `"old-version"`) {
		t.Fatalf("up (complete) while the old version's session is there: %v; want a refusal naming it (old_version_writing)", err)
	}
	oldApp.Close()
	// The old worker's session is idle after a commit: its last statement
	// names no column, so complete knows it by its application_name
	// (--old-app-name).
	_, err = migrations.Up(ctx, d.url, l, migrations.Options{OldAppName: "old-version-worker"})
	if !errors.As(err, &pe) || !hasFinding(pe, "old_version_writing", `"old-version-worker"`) {
		t.Fatalf("up (complete) while the old version's idle worker session is there, --old-app-name naming it: %v; want a refusal naming it", err)
	}
	oldWorkerPool.Close()

	d.phase("up (complete)", func() error {
		_, err := migrations.Up(ctx, d.url, l, d.migrating(migrations.Options{}))
		return err
	})
	// The jobs the old worker claimed before complete are finished after
	// it, by the new version's worker: nothing in them names the old
	// column.
	for _, uuid := range claimed {
		if err := pj038.process(ctx, newWorkerPool, uuid); err != nil {
			t.Fatalf("the new version's worker finishing process %s, claimed by the old version before complete: %v", uuid, err)
		}
	}
	var finished int
	if err := newWorkerPool.QueryRow(ctx, `SELECT count(*) FROM plainjobs_jobresult WHERE status = 'SUCCESSFUL' AND job_process_uuid::text = ANY($1)`, claimed).Scan(&finished); err != nil || finished != len(claimed) {
		t.Fatalf("%d of the %d jobs claimed by the old version before complete finished after it: %v", finished, len(claimed), err)
	}
	time.Sleep(300 * time.Millisecond)
	d.check("migrated, the new version")

	// Roll back. The operator first holds each group of the compat class
	// at one job (an override): down --drain limits the groups over the
	// old rule at each of its scans, but a group at one job could take a
	// second between its last scan and the rebuild of the unique rule.
	ov, err := NewOverrides(Pgx(newWorkerPool), l)
	if err != nil {
		t.Fatal(err)
	}
	for k := range chargeKeys {
		if err := ov.SetLimit(ctx, layout.GroupName(chargeClass, fmt.Sprintf("acct-%d", k)), 1, "rolling back"); err != nil {
			t.Fatal(err)
		}
	}
	// down --drain under the new version (its worker finishes
	// the extra jobs of the groups above the old rule, compat admits none
	// while drain's overrides hold them at 1); once the columns are
	// back, the new version's code that names concurrency_key is rolled
	// back and the old version is deployed again, before down drops the
	// version schema.
	var oldAgain, oldAgainK *actors
	d.phase("down --drain from the migrated layout", func() error {
		_, err := migrations.Down(ctx, d.url, l, d.migrating(migrations.Options{Drain: true, DrainPoll: 20 * time.Millisecond, OnStep: func(s migrations.StepResult) {
			if strings.HasPrefix(s.Name, "cutover back") && oldAgain == nil {
				nw.stop()
				nk.stop()
				oldAgain = d.oldWriters(d.pool("old-version-again", "", 4), 2)
				oldAgainK = d.workers(pj037, d.pool("old-version-worker-again", "", 2), 2)
			}
		}}))
		return err
	})
	if oldAgain == nil {
		t.Fatal("down ran no cutover back step")
	}
	time.Sleep(300 * time.Millisecond)
	oldAgain.stop()
	oldAgainK.stop()
	cw.stop()
	cs.stop()
	mon.stop()
	d.check("legacy again, both versions")
	d.finishAll(pj037, d.pool("old-version-final-worker", "", 2))
	t.Logf("compat: %d jobs skipped by the unique rule, %d at the limit; %d caller transactions run again after ErrLayoutChanged; %d jobs inserted in all",
		d.skips(SkipUniqueRule), d.skips(SkipLimit), d.layoutChanged.Load(), d.inserted.Load())
	if d.skips(SkipUniqueRule) == 0 || d.skips(SkipLimit) == 0 {
		t.Errorf("compat skipped %d jobs by the unique rule and %d at the limit; the deploy should have met both", d.skips(SkipUniqueRule), d.skips(SkipLimit))
	}
}

// TestRollingDeployExpandThenDown: both versions write, and their workers
// run, across up --expand; the new version's code that names
// concurrency_key is rolled back, and the old version and compat go on
// across down from the expanded layout. No write fails, no compat group is
// ever over its limit, every job is finished.
func TestRollingDeployExpandThenDown(t *testing.T) {
	d := newDeploy(t)
	ctx := t.Context()
	l := legacy.PlainJobs.Layout
	mon := d.monitor(d.pool("monitor", "", 1))
	defer mon.stop()
	oldW := d.oldWriters(d.pool("old-version", "", 4), 2)
	oldK := d.workers(pj037, d.pool("old-version-worker", "", 3), 2)
	cw := d.compatWriters(d.pool("new-version-compat-tx", "", 4), 2)
	defer cw.stop()

	d.phase("up --expand", func() error {
		_, err := migrations.Up(ctx, d.url, l, d.migrating(migrations.Options{Expand: true}))
		return err
	})
	vsPath := layout.Ident(d.vsName) + ", public"
	nw := d.newWriters(d.pool("new-version", vsPath, 4), 2)
	nk := d.workers(pj038, d.pool("new-version-worker", vsPath, 3), 2)
	time.Sleep(300 * time.Millisecond)
	d.check("expanded, both versions")
	nw.stop()
	nk.stop()

	d.phase("down from the expanded layout", func() error {
		_, err := migrations.Down(ctx, d.url, l, d.migrating(migrations.Options{}))
		return err
	})
	time.Sleep(300 * time.Millisecond)
	oldW.stop()
	oldK.stop()
	cw.stop()
	mon.stop()
	d.check("legacy again, both versions")
	d.finishAll(pj037, d.pool("old-version-final-worker", "", 2))
}

// migrating is the migration's options under the deploy's traffic on a
// loaded test machine (two cores, the race detector, other tests): a longer
// lock wait and more attempts than the defaults, each attempt still bounding
// the writers' wait by the lock timeout. Each retry is logged, with the
// sessions that held the table it waited for.
func (d *deploy) migrating(o migrations.Options) migrations.Options {
	o.LockTimeout, o.MaxAttempts = 5*time.Second, 30
	o.Out = retryLog{d.t}
	return o
}

// retryLog logs the retry lines of a migration's output (they name the
// sessions that held the table the attempt waited for).
type retryLog struct{ t *testing.T }

func (w retryLog) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if strings.Contains(line, ": attempt ") {
			w.t.Log(line)
		}
	}
	return len(p), nil
}

// hasFinding reports a fatal finding of kind whose message holds text.
func hasFinding(e *migrations.PreflightError, kind, text string) bool {
	for _, f := range e.Findings {
		if f.Fatal && f.Kind == kind && strings.Contains(f.Message, text) {
			return true
		}
	}
	return false
}

// TestExpandedOldAndNewWritersOfOneKey: on an expanded layout, plain-jobs
// 0.37.6's run_in_worker (no lock, the unique rule's 23505 taken as a
// duplicate) and plain-jobs 0.38.0's (the group's advisory lock, its counts,
// its insert through the version schema, nothing caught) hammer the same
// two keys while a worker keeps freeing them. Every 0.38 write either
// inserts or finds the key in progress (never a 23505: the enqueue lock
// makes 0.37's inserts take the group's lock), every 0.37 write inserts or
// is a duplicate, and no key ever has two pending requests.
func TestExpandedOldAndNewWritersOfOneKey(t *testing.T) {
	d := newDeploy(t)
	ctx := t.Context()
	if _, err := migrations.Up(ctx, d.url, legacy.PlainJobs.Layout, migrations.Options{Expand: true}); err != nil {
		t.Fatal(err)
	}
	old := d.pool("old-version", "", 4)
	newer := d.pool("new-version", layout.Ident(d.vsName)+", public", 4)
	worker := d.pool("worker", "", 1)
	const rounds = 300
	var newInserted, newSkipped, oldInserted, oldDup atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range rounds {
				key := fmt.Sprintf("k-%d", round%2)
				if w%2 == 0 {
					ok, err := enqueue037(ctx, old, syncClass, key, "default")
					switch {
					case err != nil:
						d.fail("0.37 writer", err)
					case ok:
						oldInserted.Add(1)
					default:
						oldDup.Add(1)
					}
					continue
				}
				uuid, err := pyEnqueueTx(ctx, newer, pyJob{class: syncClass, key: key, queue: "default"})
				switch {
				case err != nil:
					d.fail("0.38 writer (version schema)", err)
				case uuid != "":
					newInserted.Add(1)
				default:
					newSkipped.Add(1)
				}
			}
		}()
	}
	stop := make(chan struct{})
	var wwg sync.WaitGroup
	wwg.Add(1)
	go func() {
		defer wwg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var n int
			if err := worker.QueryRow(ctx, `SELECT count(*) FROM (SELECT job_class, unique_key FROM plainjobs_jobrequest WHERE job_class = $1 GROUP BY 1, 2 HAVING count(*) > 1) g`, syncClass).Scan(&n); err != nil {
				d.fail("monitor", err)
			} else if n > 0 {
				d.fail("monitor", fmt.Errorf("%d keys with two pending requests", n))
			}
			if _, err := worker.Exec(ctx, `DELETE FROM plainjobs_jobrequest WHERE job_class = $1`, syncClass); err != nil {
				d.fail("worker", err)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	close(stop)
	wwg.Wait()
	d.check("old and new writers of one key")
	t.Logf("0.38: %d inserted, %d in progress; 0.37: %d inserted, %d duplicates", newInserted.Load(), newSkipped.Load(), oldInserted.Load(), oldDup.Load())
	if newInserted.Load() == 0 || oldInserted.Load() == 0 || newSkipped.Load() == 0 || oldDup.Load() == 0 {
		t.Errorf("the writers did not meet: want inserts and refusals of both versions")
	}
}
