package compat

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/internal/lockid"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// plain-jobs' Python protocol, statement by statement, from its source at
// github.com/dropseed/plain:
//
//   - plain-jobs 0.38.0 (commit 01b6986d798b4df9f80370c8bcbbdbc1b66f4783):
//     plain-jobs/plain/jobs/jobs.py Job.run_in_worker: in transaction.atomic(),
//     get_enqueue_lock(key) (None for an empty key; locks.py
//     postgres_advisory_lock: "SELECT pg_advisory_xact_lock(%s)" with the
//     first 8 bytes of md5(f"{job_class_name}::{concurrency_key}") as a
//     big-endian signed int), should_enqueue(key) (True for an empty key;
//     else get_processing_jobs(...).count() == 0 and
//     get_requested_jobs(...).count() == 0, with include_retries=True: no
//     retry_attempt filter), then JobRequest(...).save().
//   - the same commit, plain-jobs/plain/jobs/models.py
//     JobResultQuerySet.retryable / retry_failed_jobs and JobResult.retry_job
//     (called by workers.py Worker.rescue_job_results with
//     JobResult.query.filter(queue__in=self.queues)): the retryable results,
//     read without a row lock, then per result in transaction.atomic():
//     run_in_worker(queue, delay, priority, retries, retry_attempt + 1,
//     concurrency_key) and, when it returned a request,
//     save(update_fields=["retry_job_request_uuid"]).
//   - plain-jobs 0.37.6 (commit 253bf8e9ae07513efbbc3229d6231e8f020f6546):
//     plain-jobs/plain/jobs/jobs.py Job.run_in_worker: no lock;
//     _in_progress(unique_key) reads the requests and processes with the
//     key, then JobRequest(...).save(clean_and_validate=False), relying on
//     the partial unique index (IntegrityError: "Job already in progress").
//
// The statements are what the ORM sends for those calls on PostgreSQL.
const (
	pyLock          = `SELECT pg_advisory_xact_lock($1)`
	pyCountProcess  = `SELECT COUNT(*) AS "__count" FROM "plainjobs_jobprocess" WHERE ("plainjobs_jobprocess"."concurrency_key" = $1 AND "plainjobs_jobprocess"."job_class" = $2)`
	pyCountRequests = `SELECT COUNT(*) AS "__count" FROM "plainjobs_jobrequest" WHERE ("plainjobs_jobrequest"."concurrency_key" = $1 AND "plainjobs_jobrequest"."job_class" = $2)`
	pyInsert        = `INSERT INTO "plainjobs_jobrequest" ("created_at", "uuid", "job_class", "parameters", "priority", "source", "queue", "retries", "retry_attempt", "concurrency_key", "start_at", "trace_id", "span_id")
VALUES (now(), gen_random_uuid(), $1, $2::jsonb, $3, $4, $5, $6, $7, $8, NULL, NULL, NULL) RETURNING "plainjobs_jobrequest"."id", "plainjobs_jobrequest"."uuid"::text`
	pyRetryableSQL = `SELECT "id", "job_class", "parameters"::text, "priority", "queue", "retries", "retry_attempt", "concurrency_key" FROM "plainjobs_jobresult"
WHERE ("queue" IN ('default') AND "status" IN ('ERRORED', 'LOST', 'CANCELLED') AND "retry_job_request_uuid" IS NULL AND "retries" > 0 AND "retry_attempt" < ("retries"))
ORDER BY "created_at" DESC`
	pyLink = `UPDATE "plainjobs_jobresult" SET "retry_job_request_uuid" = $1::uuid WHERE "plainjobs_jobresult"."id" = $2`

	py037InProgressRequests = `SELECT "id" FROM "plainjobs_jobrequest" WHERE ("plainjobs_jobrequest"."job_class" = $1 AND "plainjobs_jobrequest"."unique_key" = $2)`
	py037InProgressProcess  = `SELECT "id" FROM "plainjobs_jobprocess" WHERE ("plainjobs_jobprocess"."job_class" = $1 AND "plainjobs_jobprocess"."unique_key" = $2)`
	py037Insert             = `INSERT INTO "plainjobs_jobrequest" ("created_at", "uuid", "job_class", "parameters", "priority", "source", "queue", "retries", "retry_attempt", "unique_key", "start_at", "trace_id", "span_id")
VALUES (now(), gen_random_uuid(), $1, '{"args": [], "kwargs": {}}', 0, 'python', 'default', 0, 0, $2, NULL, NULL, NULL) RETURNING "id"`
)

// pyLockID is locks.py's lock id, computed as Python does.
func pyLockID(class, key string) int64 {
	sum := md5.Sum([]byte(class + "::" + key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// pyJob is what run_in_worker writes.
type pyJob struct {
	class, key, queue     string
	retries, retryAttempt int
}

// pyEnqueue is plain-jobs 0.38's run_in_worker on tx (its atomic block).
func pyEnqueue(ctx context.Context, tx pgx.Tx, j pyJob) (uuid string, err error) {
	if j.key != "" {
		if _, err := tx.Exec(ctx, pyLock, pyLockID(j.class, j.key)); err != nil {
			return "", err
		}
		var n int
		if err := tx.QueryRow(ctx, pyCountProcess, j.key, j.class).Scan(&n); err != nil || n > 0 {
			return "", err
		}
		if err := tx.QueryRow(ctx, pyCountRequests, j.key, j.class).Scan(&n); err != nil || n > 0 {
			return "", err
		}
	}
	var id int64
	err = tx.QueryRow(ctx, pyInsert, j.class, `{"args": [], "kwargs": {}}`, 0, "python", j.queue, j.retries, j.retryAttempt, j.key).Scan(&id, &uuid)
	return uuid, err
}

// pyEnqueueTx is pyEnqueue in its own transaction.
func pyEnqueueTx(ctx context.Context, pool *pgxpool.Pool, j pyJob) (uuid string, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		uuid, err = pyEnqueue(ctx, tx, j)
		return err
	})
	return uuid, err
}

type pyFailed struct {
	id                              int64
	class, queue, key               string
	params                          *string
	priority, retries, retryAttempt int
}

// pyRetryable is the sweeper's read (no row lock).
func pyRetryable(ctx context.Context, pool *pgxpool.Pool) ([]pyFailed, error) {
	rows, err := pool.Query(ctx, pyRetryableSQL)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pyFailed
	for rows.Next() {
		var f pyFailed
		if err := rows.Scan(&f.id, &f.class, &f.params, &f.priority, &f.queue, &f.retries, &f.retryAttempt, &f.key); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// pyRetry is JobResult.retry_job for one result read by pyRetryable.
func pyRetry(ctx context.Context, pool *pgxpool.Pool, f pyFailed) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		uuid, err := pyEnqueue(ctx, tx, pyJob{class: f.class, key: f.key, queue: f.queue, retries: f.retries, retryAttempt: f.retryAttempt + 1})
		if err != nil || uuid == "" {
			return err
		}
		_, err = tx.Exec(ctx, pyLink, uuid, f.id)
		return err
	})
}

func pyPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// keyedOne is a Go job limited as plain-jobs' default: one active job per
// non-empty key.
type keyedOne struct{ Account string }

func (j keyedOne) ConcurrencyKey() string        { return j.Account }
func (j keyedOne) ConcurrencyLimit() (int, bool) { return 1, j.Account != "" }

// What docs/runtime.md ("Go and Python writers") says Go and Python share
// holds: the lock id is plain-jobs' own, and a keyed group limited to 1 in
// Go stays exact against plain-jobs' Python protocol, both enqueueing at
// once, many times over.
func TestInteropKeyedGroupsAreExactAgainstPython(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	ctx := t.Context()
	py := pyPool(t, q.url)
	for _, k := range []string{"acct-1", "", "ü::x", "a very long key " + strings.Repeat("x", 200)} {
		var sqlID int64
		if err := q.pool.QueryRow(ctx, `SELECT ('x' || left(md5($1 || '::' || $2), 16))::bit(64)::bigint`, "app.jobs.Sync", k).Scan(&sqlID); err != nil {
			t.Fatal(err)
		}
		if got, want := lockid.For("app.jobs.Sync", k), pyLockID("app.jobs.Sync", k); got != want || got != sqlID {
			t.Errorf("lock id of key %q: Go %d, Python %d, SQL %d", k, got, want, sqlID)
		}
	}

	const rounds, goWriters, pyWriters = 12, 6, 6
	for r := range rounds {
		key := fmt.Sprintf("acct-%d", r)
		var wg sync.WaitGroup
		start := make(chan struct{})
		var mu sync.Mutex
		inserted := 0
		errs := make(chan error, goWriters+pyWriters)
		for range goWriters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := q.c.Enqueue(ctx, Job{Class: "app.jobs.Sync", Value: keyedOne{key}, Args: PlainArgs{Args: []any{key}}})
				if err != nil {
					errs <- err
					return
				}
				if res.Inserted() {
					mu.Lock()
					inserted++
					mu.Unlock()
				}
			}()
		}
		for range pyWriters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				uuid, err := pyEnqueueTx(ctx, py, pyJob{class: "app.jobs.Sync", key: key, queue: "default"})
				if err != nil {
					errs <- err
					return
				}
				if uuid != "" {
					mu.Lock()
					inserted++
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		var active int
		if err := q.pool.QueryRow(ctx, `SELECT count(*) FROM plainjobs_jobrequest WHERE job_class = 'app.jobs.Sync' AND concurrency_key = $1`, key).Scan(&active); err != nil {
			t.Fatal(err)
		}
		if inserted != 1 || active != 1 {
			t.Fatalf("round %d: %d writers admitted %d jobs of group app.jobs.Sync::%s, %d active; want exactly 1", r, goWriters+pyWriters, inserted, key, active)
		}
	}
}

// What the docs say Go and Python do not share holds as stated: plain-jobs
// takes no lock for an empty key, so a Go class-wide limit does not see a
// Python insert in flight; a Go limit above 1 admits what Python's
// should_enqueue (one per key) would refuse, and Python refuses its own
// job while the Go group holds any.
func TestInteropClassWideLimitsBindGoOnly(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	ctx := t.Context()
	py := pyPool(t, q.url)

	tx, err := py.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if uuid, err := pyEnqueue(ctx, tx, pyJob{class: "app.jobs.Report", queue: "default"}); err != nil || uuid == "" {
		t.Fatalf("python keyless enqueue: %q %v", uuid, err)
	}
	// Python holds no lock: Go's class-wide limit 1 admits, not waiting.
	res, err := q.c.Enqueue(ctx, Job{Class: "app.jobs.Report", Value: Limit("", 1)})
	if err != nil || !res.Inserted() {
		t.Fatalf("go class-wide limit 1 while python's insert is in flight: %+v %v; want admitted (plain-jobs takes no lock for an empty key)", res, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := q.count(t, "plainjobs_jobrequest"); n != 2 {
		t.Fatalf("%d active jobs of the class, want 2: the class-wide limit binds Go writers only", n)
	}

	// A Go limit of 3 on a key; Python's default refuses while any is active.
	for i := range 3 {
		if res, err := q.c.Enqueue(ctx, Job{Class: "app.jobs.Export", Value: Limit("acct-9", 3)}); err != nil || !res.Inserted() {
			t.Fatalf("go export %d: %+v %v", i, res, err)
		}
	}
	if uuid, err := pyEnqueueTx(ctx, py, pyJob{class: "app.jobs.Export", key: "acct-9", queue: "default"}); err != nil || uuid != "" {
		t.Fatalf("python export: %q %v; want refused (should_enqueue: one active job per key)", uuid, err)
	}
}

// Retries never happen twice when the Go sweeper is given its own classes:
// Go's and plain-jobs' sweepers run at once over failed results of both
// (Go's classes in a queue no Python worker serves), and each result gets
// exactly one retry. RetrySweep without classes retries nothing; with
// AllClasses next to plain-jobs' sweeper, which locks no row, a result is
// retried twice, as the docs warn.
func TestInteropRetrySweepsNeverDoubleRetry(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	ctx := t.Context()
	py := pyPool(t, q.url)
	failResult := func(class, key, queue string) int64 {
		t.Helper()
		var id int64
		err := q.pool.QueryRow(ctx, `INSERT INTO plainjobs_jobresult (created_at, uuid, job_class, parameters, priority, source, queue, retries, retry_attempt, concurrency_key, started_at, job_request_uuid, job_process_uuid, ended_at, error, status)
VALUES (now(), gen_random_uuid(), $1, '{"args": [], "kwargs": {}}', 0, 'test', $3, 3, 0, $2, now(), gen_random_uuid(), gen_random_uuid(), now(), 'boom', 'ERRORED') RETURNING id`, class, key, queue).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	var results []int64
	for i := range 20 {
		key := ""
		if i%2 == 0 {
			key = fmt.Sprintf("k-%d", i)
		}
		results = append(results, failResult("app.jobs.PySend", key, "default"), failResult("go.Charge", key, "go"))
	}
	if _, err := q.c.RetrySweep(ctx, RetryOptions{}); !errors.Is(err, ErrRetryScope) {
		t.Fatalf("RetrySweep without classes: %v, want ErrRetryScope", err)
	}
	// Three Go sweepers and one plain-jobs worker's sweeper (plain-jobs'
	// own sweepers, one per worker, lock no row and race each other on a
	// keyless result: that is plain-jobs' behaviour, not this runtime's).
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := q.c.RetrySweep(ctx, RetryOptions{ClassNames: []string{"go.Charge"}, Backoff: func(int) time.Duration { return 0 }}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 2 {
			fs, err := pyRetryable(ctx, py)
			if err != nil {
				errs <- err
				return
			}
			for _, f := range fs {
				if err := pyRetry(ctx, py, f); err != nil {
					errs <- err
					return
				}
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var retries, linked int
	if err := q.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM plainjobs_jobrequest WHERE retry_attempt = 1), (SELECT count(*) FROM plainjobs_jobresult WHERE retry_job_request_uuid IS NOT NULL)`).Scan(&retries, &linked); err != nil {
		t.Fatal(err)
	}
	if retries != len(results) || linked != len(results) {
		t.Fatalf("%d failed results: %d retry requests, %d linked; want one each", len(results), retries, linked)
	}

	// AllClasses next to plain-jobs' sweeper: Python read the list, Go
	// retried and linked meanwhile, Python retries from its stale list.
	keyless := failResult("app.jobs.PySend", "", "default")
	fs, err := pyRetryable(ctx, py)
	if err != nil || len(fs) != 1 {
		t.Fatalf("python's retryable list: %v %v", fs, err)
	}
	if rep, err := q.c.RetrySweep(ctx, RetryOptions{AllClasses: true}); err != nil || rep.Retried != 1 {
		t.Fatalf("RetrySweep AllClasses: %+v %v", rep, err)
	}
	if err := pyRetry(ctx, py, fs[0]); err != nil {
		t.Fatal(err)
	}
	var twice int
	if err := q.pool.QueryRow(ctx, `SELECT count(*) FROM plainjobs_jobrequest WHERE job_class = 'app.jobs.PySend' AND concurrency_key = '' AND retry_attempt = 1 AND created_at > (SELECT created_at FROM plainjobs_jobresult WHERE id = $1)`, keyless).Scan(&twice); err != nil {
		t.Fatal(err)
	}
	if twice != 2 {
		t.Fatalf("AllClasses beside plain-jobs' sweeper: %d retries of one keyless result; the docs say 2", twice)
	}
}

// Before `up`, a legacy (0.37) Python insert racing a Go enqueue of the
// same key ends in a Skip, not a 23505: Go's insert waits on the legacy
// unique index for the Python transaction, fails when it commits, and the
// admission runs again and counts the committed row. In a caller's
// transaction the caller's transaction goes on.
func TestInteropLegacyUniqueViolationIsASkip(t *testing.T) {
	for _, inTx := range []bool{false, true} {
		t.Run(map[bool]string{false: "own transaction", true: "caller's transaction"}[inTx], func(t *testing.T) {
			q := newQueue(t, legacy.PlainJobs, false)
			ctx := t.Context()
			py := pyPool(t, q.url)
			tx, err := py.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			for _, sql := range []string{py037InProgressRequests, py037InProgressProcess} {
				if rows, err := tx.Query(ctx, sql, "app.jobs.Sync", "acct-1"); err != nil {
					t.Fatal(err)
				} else {
					rows.Close()
				}
			}
			var pyID int64
			if err := tx.QueryRow(ctx, py037Insert, "app.jobs.Sync", "acct-1").Scan(&pyID); err != nil {
				t.Fatal(err)
			}

			type outcome struct {
				res Result
				err error
			}
			done := make(chan outcome, 1)
			var goPID uint32
			conn, err := q.pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			goPID = conn.Conn().PgConn().PID()
			go func() {
				job := Job{Class: "app.jobs.Sync", Value: keyedOne{"acct-1"}}
				if !inTx {
					c, err := NewClient(Pgx(conn.Conn()), q.l.Layout)
					if err != nil {
						done <- outcome{err: err}
						return
					}
					res, err := c.Enqueue(ctx, job)
					done <- outcome{res, err}
					return
				}
				var res Result
				err := pgx.BeginFunc(ctx, conn.Conn(), func(callerTx pgx.Tx) error {
					var err error
					if res, err = q.c.EnqueueTx(ctx, Pgx(callerTx), job); err != nil {
						return err
					}
					// The caller's transaction is still usable.
					_, err = callerTx.Exec(ctx, "SELECT 1")
					return err
				})
				done <- outcome{res, err}
			}()
			// Go's insert waits on the unique index for Python's transaction.
			for waiting := false; !waiting; {
				if err := q.pool.QueryRow(ctx, `SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1`, goPID).Scan(&waiting); err != nil {
					t.Fatal(err)
				}
				select {
				case o := <-done:
					t.Fatalf("go enqueue finished before python committed: %+v %v", o.res, o.err)
				default:
				}
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			o := <-done
			if o.err != nil {
				t.Fatalf("go enqueue racing a legacy insert: %v; want a Skip", o.err)
			}
			if o.res.Inserted() || o.res.Skipped.Limit != 1 || o.res.Skipped.Active != 1 || len(o.res.Skipped.Holders) != 1 || o.res.Skipped.Holders[0].ID != pyID {
				t.Fatalf("go enqueue racing a legacy insert: %+v (skip %+v); want skipped at limit 1, held by python's row %d", o.res, o.res.Skipped, pyID)
			}
		})
	}
}

// A Python-run class (WithPythonClasses) is enqueued from Go only with
// plain-jobs' parameters shape, which is what PlainArgs writes.
func TestInteropPythonClassesTakePlainArgs(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true, WithPythonClasses("app.jobs.PySend"))
	ctx := t.Context()
	res, err := q.c.Enqueue(ctx, Job{Class: "app.jobs.PySend", Args: PlainArgs{Args: []any{"a@example.com"}, Kwargs: map[string]any{"retry": true}}})
	if err != nil || !res.Inserted() {
		t.Fatalf("enqueue with PlainArgs: %+v %v", res, err)
	}
	var stored []byte
	if err := q.pool.QueryRow(ctx, `SELECT parameters::text FROM plainjobs_jobrequest WHERE id = $1`, res.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	var shape struct {
		Args   []any          `json:"args"`
		Kwargs map[string]any `json:"kwargs"`
	}
	if err := json.Unmarshal(stored, &shape); err != nil || len(shape.Args) != 1 || shape.Kwargs["retry"] != true {
		t.Fatalf("stored parameters %s: %+v %v", stored, shape, err)
	}
	if err := CheckPlainArgs(stored); err != nil {
		t.Fatal(err)
	}
	if res, err := q.c.Enqueue(ctx, Job{Class: "app.jobs.PySend", Args: PlainArgs{}}); err != nil || !res.Inserted() {
		t.Fatalf("enqueue with empty PlainArgs: %+v %v", res, err)
	}
	for _, args := range []any{nil, map[string]any{"to": "a@example.com"}, []any{"a"}, json.RawMessage(`{"args": null, "kwargs": {}}`), json.RawMessage(`{"args": []}`)} {
		if _, err := q.c.Enqueue(ctx, Job{Class: "app.jobs.PySend", Args: args}); !errors.Is(err, ErrInvalidJob) {
			t.Errorf("Args %v for a Python class: %v, want ErrInvalidJob", args, err)
		}
	}
	if n := q.count(t, "plainjobs_jobrequest"); n != 2 {
		t.Errorf("%d requests, want the 2 valid ones", n)
	}
	// A Go class takes any Args.
	if res, err := q.c.Enqueue(ctx, Job{Class: "go.Charge", Args: map[string]any{"cents": 5}}); err != nil || !res.Inserted() {
		t.Fatalf("go class: %+v %v", res, err)
	}
}

// pyClaim is plain-jobs 0.38's worker loop claiming its next request
// (workers.py Worker.run, commit 01b6986d798b4df9f80370c8bcbbdbc1b66f4783):
// any class, only the worker's queues.
const pyClaim = `SELECT "id", "job_class" FROM "plainjobs_jobrequest"
WHERE ("queue" IN ('default') AND ("start_at" IS NULL OR "start_at" <= now()))
ORDER BY "priority" ASC, "start_at" DESC, "created_at" DESC LIMIT 1 FOR UPDATE SKIP LOCKED`

// A plain-jobs worker claims the jobs of its queues whatever their class:
// a Go class stays out of its reach only in a queue it does not serve.
func TestInteropPythonWorkersClaimByQueue(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	ctx := t.Context()
	goJob, err := q.c.Enqueue(ctx, Job{Class: "go.Charge", Queue: "go"})
	if err != nil {
		t.Fatal(err)
	}
	claim := func() (id int64, class string) {
		t.Helper()
		err := q.pool.QueryRow(ctx, pyClaim).Scan(&id, &class)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return id, class
	}
	if id, class := claim(); id != 0 {
		t.Fatalf("a worker of queue default claimed %s %d; want nothing (the Go job %d is in queue go)", class, id, goJob.ID)
	}
	misplaced, err := q.c.Enqueue(ctx, Job{Class: "go.Charge"}) // Queue "" is "default"
	if err != nil {
		t.Fatal(err)
	}
	if id, class := claim(); id != misplaced.ID || class != "go.Charge" {
		t.Fatalf("claimed %s %d; want the Go job %d of queue default, which the Python worker cannot run", class, id, misplaced.ID)
	}
}
