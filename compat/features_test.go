package compat

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// fail turns the pending request id into a failed result, as plain-jobs'
// worker does: the request becomes a process, the process a result, in one
// transaction.
func (q *queue) fail(t *testing.T, requestID int64, status string) int64 {
	t.Helper()
	var id int64
	err := q.pool.QueryRow(t.Context(), `WITH r AS (DELETE FROM `+q.l.Table(q.l.RequestsTable)+` WHERE id = $1 RETURNING *)
INSERT INTO `+q.l.Table(q.l.ResultsTable)+` (created_at, uuid, job_class, parameters, priority, source, queue, retries, retry_attempt, concurrency_key, job_request_uuid, job_process_uuid, ended_at, error, status)
SELECT now(), gen_random_uuid(), job_class, parameters, priority, source, queue, retries, retry_attempt, concurrency_key, uuid, gen_random_uuid(), now(), 'boom', $2 FROM r RETURNING id`, requestID, status).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (q *queue) retryLink(t *testing.T, resultID int64) *string {
	t.Helper()
	var u *string
	if err := q.pool.QueryRow(t.Context(), `SELECT retry_job_request_uuid::text FROM `+q.l.Table(q.l.ResultsTable)+` WHERE id = $1`, resultID).Scan(&u); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestRetries: a failed job never blocks its own retry; the retry keeps the
// class, key, parameters, priority and queue and counts toward the limit; a
// blocked retry creates nothing and a later sweep retries it; results that
// are not retryable are left alone.
func TestRetries(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	ctx := t.Context()
	const class = "app.jobs.ChargeJob"
	enqueue := func(key string, retries int) int64 {
		t.Helper()
		res, err := q.c.Enqueue(ctx, Job{Class: class, Value: limited(key, 1), Args: map[string]string{"key": key}, Priority: 3, Queue: "high", Retries: retries})
		if err != nil || !res.Inserted() {
			t.Fatalf("enqueue %s: %+v %v", key, res, err)
		}
		return res.ID
	}

	// Its own failed job never blocks the retry (limit 1).
	own := q.fail(t, enqueue("own", 2), "ERRORED")
	start := time.Now()
	res, err := q.c.Retry(ctx, own, RetryOptions{Limit: func(string, string) (int, bool) { return 1, true }})
	if err != nil || !res.Inserted() {
		t.Fatalf("retry: %+v %v", res, err)
	}
	var (
		key, queue, params string
		prio, attempt      int
		startAt            time.Time
	)
	if err := q.pool.QueryRow(ctx, `SELECT concurrency_key, queue, parameters::text, priority, retry_attempt, start_at FROM plainjobs_jobrequest WHERE uuid = $1`, res.UUID).
		Scan(&key, &queue, &params, &prio, &attempt, &startAt); err != nil {
		t.Fatal(err)
	}
	if key != "own" || queue != "high" || prio != 3 || attempt != 1 || !strings.Contains(params, `"own"`) || startAt.Before(start.Add(9*time.Second)) {
		t.Fatalf("retry row: key %q queue %q prio %d attempt %d params %s start %v", key, queue, prio, attempt, params, startAt)
	}
	if link := q.retryLink(t, own); link == nil || *link != res.UUID {
		t.Fatalf("result links %v, want %s", link, res.UUID)
	}
	// Retried once: not again.
	if _, err := q.c.Retry(ctx, own, RetryOptions{}); !errors.Is(err, ErrNotRetryable) {
		t.Fatalf("second retry: %v, want ErrNotRetryable", err)
	}

	// A retry blocked by another active job of the group creates nothing...
	blocked := q.fail(t, enqueue("busy", 3), "LOST")
	holder := enqueue("busy", 3)
	rep, err := q.c.RetrySweep(ctx, RetryOptions{AllClasses: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Blocked != 1 || rep.Retried != 0 || q.retryLink(t, blocked) != nil {
		t.Fatalf("sweep with the group held: %+v, link %v", rep, q.retryLink(t, blocked))
	}
	if sk := rep.Results[0].Skipped; sk == nil || sk.Group != class+"::busy" || len(sk.Holders) != 1 || sk.Holders[0].ID != holder {
		t.Fatalf("blocked retry's skip: %+v", rep.Results[0])
	}
	// ...and a later sweep, once the holder finished, retries it.
	q.fail(t, holder, "SUCCESSFUL")
	if rep, err = q.c.RetrySweep(ctx, RetryOptions{AllClasses: true}); err != nil || rep.Retried != 1 || rep.Results[0].ResultID != blocked {
		t.Fatalf("second sweep: %+v %v", rep, err)
	}
	if q.retryLink(t, blocked) == nil {
		t.Fatal("the blocked result has no retry after the second sweep")
	}

	// Not retryable: succeeded, out of attempts, no retries.
	for _, tc := range []struct {
		status  string
		retries int
	}{{"SUCCESSFUL", 3}, {"ERRORED", 0}} {
		id := q.fail(t, enqueue("n-"+tc.status, tc.retries), tc.status)
		if _, err := q.c.Retry(ctx, id, RetryOptions{}); !errors.Is(err, ErrNotRetryable) {
			t.Fatalf("%s with %d retries: %v, want ErrNotRetryable", tc.status, tc.retries, err)
		}
	}
	if rep, err = q.c.RetrySweep(ctx, RetryOptions{AllClasses: true}); err != nil || rep.Retried+rep.Blocked != 0 {
		t.Fatalf("sweep over nothing retryable: %+v %v", rep, err)
	}
}

// TestConcurrentSweepersNeverRetryTwice: several sweepers on separate
// connections over the same failed results create exactly one retry each.
func TestConcurrentSweepersNeverRetryTwice(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	ctx := t.Context()
	const n = 120
	var results []int64
	for i := range n {
		res, err := q.c.Enqueue(ctx, Job{Class: "app.jobs.Sync", Value: keyedJob{key: "k" + string(rune('a'+i%26))}, Retries: 2})
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, q.fail(t, res.ID, "ERRORED"))
	}
	const sweepers = 6
	var wg sync.WaitGroup
	retried := make([]int, sweepers)
	errs := make([]error, sweepers)
	for i := range sweepers {
		c, err := NewClient(Pgx(q.pool), q.l.Layout)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := c.RetrySweep(ctx, RetryOptions{AllClasses: true, BatchSize: 7, Limit: func(string, string) (int, bool) { return 0, false }})
			retried[i], errs[i] = rep.Retried, err
		}()
	}
	wg.Wait()
	total := 0
	for i := range sweepers {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		total += retried[i]
	}
	var requests, linked int
	if err := q.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM plainjobs_jobrequest WHERE retry_attempt = 1), (SELECT count(DISTINCT retry_job_request_uuid) FROM plainjobs_jobresult)`).Scan(&requests, &linked); err != nil {
		t.Fatal(err)
	}
	if total != n || requests != n || linked != n {
		t.Fatalf("sweepers reported %d retries; %d retry requests, %d linked; want %d each", total, requests, linked, n)
	}
}

// TestLimitOverrides: an override in concurrency_limits wins over the code's
// limit, is read inside the admission transaction (no cache), applies to
// unlimited jobs too, and limit 0 there blocks the group.
func TestLimitOverrides(t *testing.T) {
	for _, s := range legacy.All {
		t.Run(s.Name, func(t *testing.T) {
			q := newQueue(t, s, true)
			ctx := t.Context()
			set := func(group string, n int) {
				t.Helper()
				if _, err := q.pool.Exec(ctx, `INSERT INTO `+q.l.Table(layout.LimitsTable)+` (group_name, concurrency_limit) VALUES ($1, $2)
ON CONFLICT (group_name) DO UPDATE SET concurrency_limit = EXCLUDED.concurrency_limit`, group, n); err != nil {
					t.Fatal(err)
				}
			}
			clear := func(group string) {
				t.Helper()
				if _, err := q.pool.Exec(ctx, `DELETE FROM `+q.l.Table(layout.LimitsTable)+` WHERE group_name = $1`, group); err != nil {
					t.Fatal(err)
				}
			}
			try := func(value any, class string) Result {
				t.Helper()
				res, err := q.c.Enqueue(ctx, Job{Class: class, Value: value})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			// The maintenance switch on a keyed group with limit 5 in code.
			set("ov.A::k", 0)
			if r := try(limited("k", 5), "ov.A"); r.Inserted() || r.Skipped.Limit != 0 {
				t.Fatalf("override 0: %+v", r)
			}
			clear("ov.A::k")
			if r := try(limited("k", 5), "ov.A"); !r.Inserted() {
				t.Fatalf("override cleared: %+v", r)
			}
			// An override raises a limit.
			set("ov.B::k", 2)
			if r1, r2, r3 := try(limited("k", 1), "ov.B"), try(limited("k", 1), "ov.B"), try(limited("k", 1), "ov.B"); !r1.Inserted() || !r2.Inserted() || r3.Inserted() || r3.Skipped.Limit != 2 {
				t.Fatalf("override 2 over code limit 1: %+v %+v %+v", r1, r2, r3)
			}
			// An override limits jobs that have no limit in code, class-wide too.
			set("ov.C", 1)
			if r1, r2 := try(nil, "ov.C"), try(keyedJob{}, "ov.C"); !r1.Inserted() || r2.Inserted() || r2.Skipped.Group != "ov.C" {
				t.Fatalf("class-wide override on unlimited jobs: %+v %+v", r1, r2)
			}
		})
	}
}

// skipper is a job type that wants skip records.
type skipper struct{ keyedJob }

func (skipper) ConcurrencySkipRecord() bool { return true }

// TestSkipRecords: a blocked job whose type wants it leaves a SKIPPED result
// (two-table) or a job in state skipped (single-table) with the skip
// metadata; other job types leave nothing.
func TestSkipRecords(t *testing.T) {
	for _, s := range []legacy.Schema{legacy.PlainJobs, legacy.SingleTable} {
		t.Run(s.Name, func(t *testing.T) {
			q := newQueue(t, s, true)
			ctx := t.Context()
			if s.Layout.SingleTable() {
				// The legacy table's CHECK lists its own states; a queue
				// that keeps skip records allows the skipped state.
				if _, err := q.pool.Exec(ctx, `ALTER TABLE jobs DROP CONSTRAINT jobs_status_check`); err != nil {
					t.Fatal(err)
				}
			}
			first, err := q.c.Enqueue(ctx, Job{Class: "skip.A", Value: skipper{limited("k", 1)}, Args: map[string]int{"n": 1}})
			if err != nil || !first.Inserted() {
				t.Fatal(first, err)
			}
			before := q.count(t, s.Layout.SkipTable())
			res, err := q.c.Enqueue(ctx, Job{Class: "skip.A", Value: skipper{limited("k", 1)}, Args: map[string]int{"n": 2}})
			if err != nil || res.Inserted() || res.Skipped.RecordID == 0 {
				t.Fatalf("blocked skipper: %+v %v", res, err)
			}
			if n := q.count(t, s.Layout.SkipTable()); n != before+1 {
				t.Fatalf("%d skip records, want 1", n-before)
			}
			state := `status`
			var got string
			var meta []byte
			if err := q.pool.QueryRow(ctx, `SELECT `+state+`, concurrency_skip FROM `+q.l.Table(s.Layout.SkipTable())+` WHERE id = $1`, res.Skipped.RecordID).Scan(&got, &meta); err != nil {
				t.Fatal(err)
			}
			want := SkipRecordStatus
			if s.Layout.SingleTable() {
				want = SkipRecordState
			}
			var m struct {
				Reason    string    `json:"reason"`
				IDs       []int64   `json:"conflicting_job_ids"`
				SkippedAt time.Time `json:"skipped_at"`
			}
			if err := json.Unmarshal(meta, &m); err != nil {
				t.Fatal(err)
			}
			if got != want || m.Reason != "concurrency_limit" || len(m.IDs) != 1 || m.IDs[0] != first.ID || m.SkippedAt.IsZero() {
				t.Fatalf("skip record: state %q, metadata %s", got, meta)
			}
			// The skip record is not active: the group stays at one job.
			if r, _ := q.c.Enqueue(ctx, Job{Class: "skip.A", Value: limited("k", 2)}); !r.Inserted() {
				t.Fatalf("a skip record counted as active: %+v", r)
			}
			// A job type without the option leaves no trace.
			before = q.count(t, s.Layout.SkipTable())
			if r, _ := q.c.Enqueue(ctx, Job{Class: "skip.A", Value: limited("k", 1)}); r.Inserted() || r.Skipped.RecordID != 0 || q.count(t, s.Layout.SkipTable()) != before {
				t.Fatalf("plain job left a skip record: %+v", r)
			}
		})
	}
}

// TestScheduledKeys: the exact key format, default limit 1 (two schedulers
// cannot enqueue one occurrence twice, the next occurrence goes in), and the
// no-overlap mode that refuses an occurrence while an earlier one is active.
func TestScheduledKeys(t *testing.T) {
	occ := time.Date(2026, 11, 22, 10, 0, 42, 0, time.UTC)
	if got := ScheduledKey("report", occ); got != "report:scheduled:1795341600" {
		t.Fatalf("ScheduledKey = %q", got)
	}
	q := newQueue(t, legacy.PlainJobs, true)
	ctx := t.Context()
	try := func(id Identity) Result {
		t.Helper()
		res, err := q.c.Enqueue(ctx, Job{Class: "cron.Report", Value: id})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	base := keyedJob{key: "report"}
	if r := try(Scheduled(base, occ)); !r.Inserted() {
		t.Fatalf("first scheduler: %+v", r)
	}
	if r := try(Scheduled(base, occ)); r.Inserted() || r.Skipped.Group != "cron.Report::report:scheduled:1795341600" || r.Skipped.Limit != 1 {
		t.Fatalf("second scheduler, same occurrence: %+v", r)
	}
	next := occ.Add(time.Minute)
	if r := try(Scheduled(base, next)); !r.Inserted() {
		t.Fatalf("next occurrence while the first runs (overlap allowed by default): %+v", r)
	}
	// No-overlap: a new occurrence waits until no earlier one is active.
	later := occ.Add(2 * time.Minute)
	r := try(Scheduled(base, later, NoOverlap()))
	if r.Inserted() || r.Skipped.Group != "cron.Report::report:scheduled:" || r.Skipped.Active != 1 {
		t.Fatalf("no-overlap while earlier occurrences are active: %+v", r)
	}
	q.finish(t, "cron.Report")
	if r := try(Scheduled(base, later, NoOverlap())); !r.Inserted() {
		t.Fatalf("no-overlap once the schedule is idle: %+v", r)
	}
	// Another schedule's occurrences never count: "report2" shares a prefix
	// of characters but not the schedule prefix.
	if r := try(Scheduled(keyedJob{key: "report2"}, later, NoOverlap())); !r.Inserted() {
		t.Fatalf("another schedule: %+v", r)
	}
	if r := try(Scheduled(limited("report", 3), later)); r.Skipped != nil && r.Skipped.Limit != 3 {
		t.Fatalf("the job's own limit wins over the default 1: %+v", r)
	}
}

// TestBeforeAndAfterTheMigration: on the legacy schema limit 1 behaves as
// the old queue, and a higher limit or a key without one admits what the
// unique rule allows and reports the rest as a Skip naming the rule; when
// the migration runs under a live client, the client follows the renamed
// column and the limits above 1 take effect.
func TestBeforeAndAfterTheMigration(t *testing.T) {
	for _, s := range legacy.All {
		t.Run(s.Name, func(t *testing.T) {
			q := newQueue(t, s, false)
			ctx := t.Context()
			var err error
			if r, err := q.c.Enqueue(ctx, Job{Class: "old", Value: legacyJob{"x"}}); err != nil || !r.Inserted() {
				t.Fatalf("legacy job on the legacy schema: %+v %v", r, err)
			}
			if r, err := q.c.Enqueue(ctx, Job{Class: "old", Value: legacyJob{"x"}}); err != nil || r.Inserted() || r.Skipped.Limit != 1 {
				t.Fatalf("duplicate on the legacy schema: %+v %v", r, err)
			}
			for _, v := range []any{legacyJob{""}, nil} {
				if r, err := q.c.Enqueue(ctx, Job{Class: "old", Value: v}); err != nil || !r.Inserted() {
					t.Fatalf("keyless on the legacy schema: %+v %v", r, err)
				}
			}
			first, err := q.c.Enqueue(ctx, Job{Class: "new", Value: limited("y", 3)})
			if err != nil || !first.Inserted() {
				t.Fatalf("limit 3 before the migration, first job: %+v %v", first, err)
			}
			rule := map[string]string{"plainjobs": "plainjobs_jobrequest_unique_job_class_key", "teamqueue": "JobRequests_Kind_UniqueKey_uniq", "singletable": "jobs_active_unique_key"}[s.Name]
			for _, v := range []any{limited("y", 3), keyedJob{key: "y"}} {
				r, err := q.c.Enqueue(ctx, Job{Class: "new", Value: v})
				if err != nil || r.Inserted() || r.Skipped.Reason != SkipUniqueRule || r.Skipped.Rule != rule || r.Skipped.Group != "new::y" {
					t.Fatalf("%+v before the migration, with one job of the key active: %+v %v; want a Skip by the unique rule %s", v, r.Skipped, err, rule)
				}
				if v.(keyedJob).limited && (len(r.Skipped.Holders) != 1 || r.Skipped.Holders[0].ID != first.ID) {
					t.Fatalf("%+v before the migration: holders %+v, want the job %d the rule keeps", v, r.Skipped.Holders, first.ID)
				}
			}
			if r, err := q.c.Enqueue(ctx, Job{Class: "new", Value: limited("", 2)}); err != nil || !r.Inserted() {
				t.Fatalf("class-wide limit 2 before the migration (the rule covers no empty key): %+v %v", r, err)
			}
			if n := q.count(t, q.l.Tables()[0]); n != 5 {
				t.Fatalf("%d rows after the refused jobs, want the 5 admitted", n)
			}
			// A second client whose cached view of the schema will go stale.
			stale, err := NewClient(Pgx(q.pool), q.l.Layout)
			if err != nil {
				t.Fatal(err)
			}
			if r, err := stale.Enqueue(ctx, Job{Class: "stale", Value: legacyJob{"z"}}); err != nil || !r.Inserted() {
				t.Fatalf("stale client before the migration: %+v %v", r, err)
			}
			migrate(t, q.url, q.l.Layout)
			if r, err := stale.Enqueue(ctx, Job{Class: "stale", Value: legacyJob{"z"}}); err != nil || r.Inserted() {
				t.Fatalf("stale client after the migration (renamed column): %+v %v", r, err)
			}
			for i := range 2 {
				if r, err := q.c.Enqueue(ctx, Job{Class: "new", Value: limited("y", 3)}); err != nil || !r.Inserted() {
					t.Fatalf("limit 3 after the migration, job %d: %+v %v", i+2, r, err)
				}
			}
			if r, err := q.c.Enqueue(ctx, Job{Class: "new", Value: limited("y", 3)}); err != nil || r.Inserted() || r.Skipped.Reason != SkipLimit || r.Skipped.Active != 3 {
				t.Fatalf("limit 3 after the migration, job 4: %+v %v; want a Skip at the limit", r, err)
			}
			if r, err := q.c.Enqueue(ctx, Job{Class: "old", Value: legacyJob{"x"}}); err != nil || r.Inserted() {
				t.Fatalf("legacy duplicate after the migration: %+v %v", r, err)
			}
		})
	}
}

// TestTransactionalEnqueue: given the caller's transaction the insert joins
// it (gone on rollback, kept on commit), through pgx and database/sql, and a
// job enqueued in an open transaction holds its group until commit.
func TestTransactionalEnqueue(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	ctx := t.Context()
	tx, err := q.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := q.c.EnqueueTx(ctx, Pgx(tx), Job{Class: "tx", Value: limited("k", 1)}); err != nil || !r.Inserted() {
		t.Fatal(r, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := q.count(t, q.l.RequestsTable); n != 0 {
		t.Fatalf("rolled back enqueue left %d rows", n)
	}

	sqlDB := stdlib.OpenDBFromPool(q.pool)
	defer sqlDB.Close()
	stx, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := q.c.EnqueueTx(ctx, SQL(stx), Job{Class: "tx", Value: limited("k", 1)}); err != nil || !r.Inserted() {
		t.Fatal(r, err)
	}
	// While the caller's transaction is open, another enqueue of the group
	// waits for it, then sees the committed job.
	done := make(chan Result)
	go func() {
		r, err := q.c.Enqueue(context.Background(), Job{Class: "tx", Value: limited("k", 1)})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	waitForLockWaiter(t, q)
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.Inserted() {
		t.Fatalf("an enqueue racing an open transaction got in: %+v", r)
	}
	if n := q.count(t, q.l.RequestsTable); n != 1 {
		t.Fatalf("%d rows after commit, want 1", n)
	}
}

// waitForLockWaiter waits until a session waits on an advisory lock.
func waitForLockWaiter(t *testing.T, q *queue) {
	t.Helper()
	for {
		var n int
		if err := q.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestObservability: a blocked enqueue's span carries job.enqueue.skipped
// and error type ConcurrencyLimitReached, with an unset status (not an
// error); counters are by class, never by key.
func TestObservability(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	q := newQueue(t, legacy.PlainJobs, true, WithTracerProvider(tp), WithMeterProvider(mp))
	ctx := t.Context()
	for range 2 {
		if _, err := q.c.Enqueue(ctx, Job{Class: "obs.A", Value: limited("user-42", 1)}); err != nil {
			t.Fatal(err)
		}
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	attrs := func(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
		m := map[attribute.Key]attribute.Value{}
		for _, a := range s.Attributes() {
			m[a.Key] = a.Value
		}
		return m
	}
	a0, a1 := attrs(spans[0]), attrs(spans[1])
	if a0[AttrEnqueueSkipped].AsBool() || a0["error.type"].AsString() != "" {
		t.Fatalf("admitted span: %v", a0)
	}
	if !a1[AttrEnqueueSkipped].AsBool() || a1["error.type"].AsString() != ErrorTypeLimitReached || a1[AttrJobClass].AsString() != "obs.A" {
		t.Fatalf("skipped span: %v", a1)
	}
	// OpenTelemetry's messaging conventions: a producer's send to the
	// requests table.
	for _, s := range spans {
		a := attrs(s)
		if s.Name() != "enqueue public.plainjobs_jobrequest" || s.SpanKind() != trace.SpanKindProducer ||
			a[AttrMessagingSystem].AsString() != MessagingSystem || a[AttrMessagingOperationName].AsString() != "enqueue" ||
			a[AttrMessagingOperationType].AsString() != "send" || a[AttrMessagingDestination].AsString() != "public.plainjobs_jobrequest" {
			t.Fatalf("span %q (%v): %v", s.Name(), s.SpanKind(), a)
		}
	}
	if spans[1].Status().Code != 0 {
		t.Fatalf("a skip set the span status %v", spans[1].Status())
	}
	// trace ids reach plain-jobs' columns.
	var traceID *string
	if err := q.pool.QueryRow(ctx, `SELECT trace_id FROM plainjobs_jobrequest`).Scan(&traceID); err != nil || traceID == nil || *traceID != spans[0].SpanContext().TraceID().String() {
		t.Fatalf("trace_id %v, want %s (%v)", traceID, spans[0].SpanContext().TraceID(), err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int64{}
	allowed := map[attribute.Key]bool{AttrJobClass: true, AttrMessagingSystem: true, AttrMessagingOperationName: true, AttrMessagingDestination: true}
	checkAttrs := func(name string, set attribute.Set) {
		for _, kv := range set.ToSlice() {
			if !allowed[kv.Key] || strings.Contains(kv.Value.Emit(), "user-42") {
				t.Fatalf("metric %s carries attribute %s=%s", name, kv.Key, kv.Value.Emit())
			}
		}
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Unit == "" {
				t.Errorf("metric %s has no unit", m.Name)
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					checkAttrs(m.Name, dp.Attributes)
					seen[m.Name] += dp.Value
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					checkAttrs(m.Name, dp.Attributes)
					// Second-scale buckets that resolve a millisecond.
					if len(dp.Bounds) == 0 || dp.Bounds[0] > 0.001 || dp.Count != 2 {
						t.Errorf("histogram %s: bounds %v, count %d", m.Name, dp.Bounds, dp.Count)
					}
					seen[m.Name] += int64(dp.Count)
				}
			}
		}
	}
	if seen["compat.enqueue.duration"] != 2 {
		t.Errorf("compat.enqueue.duration recorded %d calls, want 2", seen["compat.enqueue.duration"])
	}
	if seen["compat.enqueue.admitted"] != 1 || seen["compat.enqueue.rejected"] != 1 {
		t.Fatalf("counters %v", seen)
	}
}

// TestNoTracerProviderKeepsCallerSpan: without a tracer provider the client
// starts no span, and the row still carries the caller's trace and span ids.
func TestNoTracerProviderKeepsCallerSpan(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("caller").Start(t.Context(), "caller")
	defer span.End()
	if _, err := q.c.Enqueue(ctx, Job{Class: "obs.B", Value: limited("k", 1)}); err != nil {
		t.Fatal(err)
	}
	var traceID, spanID *string
	if err := q.pool.QueryRow(t.Context(), `SELECT trace_id, span_id FROM plainjobs_jobrequest`).Scan(&traceID, &spanID); err != nil {
		t.Fatal(err)
	}
	sc := span.SpanContext()
	if traceID == nil || *traceID != sc.TraceID().String() || spanID == nil || *spanID != sc.SpanID().String() {
		t.Fatalf("trace_id %v span_id %v, want the caller's %s %s", traceID, spanID, sc.TraceID(), sc.SpanID())
	}
}
