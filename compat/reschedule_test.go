package compat

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/internal/qualify"
	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// slotUTCArg matches a time.Time argument equal to want and in UTC.
type slotUTCArg struct{ want time.Time }

func (a slotUTCArg) Match(v driver.Value) bool {
	t, ok := v.(time.Time)
	return ok && t.Location() == time.UTC && t.Equal(a.want)
}

// TestRescheduleSingleTableStatement pins SPEC 6's statement: its text,
// its argument order, and $1 in UTC even when the clock is not.
func TestRescheduleSingleTableStatement(t *testing.T) {
	t.Parallel()
	db, mock, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l := layout.Layout{Schema: "public", ClassColumn: "kind", JobsTable: "jobs", StateColumn: "state", ActiveStates: []string{"queued", "running"}}
	now := time.Date(2026, 3, 1, 9, 30, 0, 0, time.FixedZone("UTC+5", 5*3600))
	r, err := NewRescheduler(SQL(db), l, RescheduleOptions{Delay: 3 * time.Second, NoJitter: true, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	const want = `UPDATE "public"."jobs" SET "run_at" = $1, "state" = 'queued', "lease_until" = NULL, "worker_id" = NULL WHERE "id" = $2`
	spec := strings.ReplaceAll(strings.ReplaceAll(want, `"public".`, ""), `"`, "")
	if spec != `UPDATE jobs SET run_at = $1, state = 'queued', lease_until = NULL, worker_id = NULL WHERE id = $2` {
		t.Fatalf("the pinned statement is not SPEC 6's modulo quoting: %s", spec)
	}
	mock.ExpectBegin()
	mock.ExpectExec(marked(qualify.Must(want))).WithArgs(slotUTCArg{now.Add(3 * time.Second)}, int64(42)).WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectQuery(marked(qualify.Must(r.counterSQL()))).WithArgs("42", "Mailer::acct-7").WillReturnRows(sqlmock.NewRows([]string{"reschedules"}).AddRow(int64(3)))
	mock.ExpectCommit()
	got, err := r.Reschedule(t.Context(), "Mailer::acct-7", RowID(42))
	if err != nil {
		t.Fatal(err)
	}
	if !got.RunAt.Equal(now.Add(3*time.Second)) || got.RunAt.Location() != time.UTC || got.Reschedules != 3 {
		t.Fatalf("result %+v", got)
	}
	if err := mock.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}

	// A job that is not there: an error naming it, and the counter is not
	// bumped (the transaction rolls back).
	mock.ExpectBegin()
	mock.ExpectExec(marked(qualify.Must(want))).WithArgs(slotUTCArg{now.Add(3 * time.Second)}, int64(7)).WillReturnResult(sqlmock.NewResult(0, 0))
	mock.ExpectRollback()
	if _, err := r.Reschedule(t.Context(), "Mailer", RowID(7)); err == nil || !strings.Contains(err.Error(), `reschedule job 7: no such running job in "public"."jobs"`) {
		t.Fatalf("missing job: %v", err)
	}
	if err := mock.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
}

func TestRescheduleOptions(t *testing.T) {
	t.Parallel()
	db, _, err := sqlmock.New()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l := legacy.SingleTable.Layout
	for _, bad := range []RescheduleOptions{{Delay: -time.Second}, {Jitter: -0.1}, {Jitter: 1}} {
		if _, err := NewRescheduler(SQL(db), l, bad); !errors.Is(err, ErrSlotArgument) {
			t.Errorf("%+v: %v, want ErrSlotArgument", bad, err)
		}
	}
	if _, err := NewRescheduler(SQL(db), layout.Layout{}, RescheduleOptions{}); !errors.Is(err, layout.ErrInvalid) {
		t.Errorf("empty layout: %v", err)
	}
	// The default delay is jittered within ±20%.
	r, err := NewRescheduler(SQL(db), l, RescheduleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := DefaultRescheduleDelay, DefaultRescheduleDelay
	for range 1000 {
		d := r.delay()
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 4*time.Second || hi > 6*time.Second || lo == hi {
		t.Errorf("jittered delays from %v to %v, want spread within 4s..6s", lo, hi)
	}
	if _, err := r.Reschedule(t.Context(), "", RowID(1)); !errors.Is(err, ErrSlotArgument) {
		t.Errorf("empty group: %v", err)
	}
	if _, err := r.Reschedule(t.Context(), "G", JobID{}); !errors.Is(err, ErrSlotArgument) {
		t.Errorf("nil job id: %v", err)
	}
}

// slotMigratedDB returns a fresh database holding the legacy schema, empty
// and migrated (concurrency_key, runtime tables).
func slotMigratedDB(t *testing.T, s legacy.Schema) string {
	t.Helper()
	key := s.Key(0) + "/migrated/" + strings.Join(s.Resolved.RuntimeDDL(), ";")
	return testdb.New(t, testdb.FromTemplate(key, func(ctx context.Context, url string) error {
		if err := s.LoadURL(ctx, url, 0); err != nil {
			return err
		}
		_, err := migrations.Up(ctx, url, s.Layout, migrations.Options{})
		return err
	}))
}

// TestRescheduleKeepsTheAttemptSingleTable runs a job through the worker
// loop a queue would have: busy reschedules leave the attempt counter as it
// was, a real failure counts an attempt.
func TestRescheduleKeepsTheAttemptSingleTable(t *testing.T) {
	t.Parallel()
	url := slotMigratedDB(t, legacy.SingleTable)
	l := legacy.SingleTable.Layout
	pool := slotTestPool(t, url, 4)
	ctx := t.Context()
	s, err := NewSlots(Pgx(pool), l, SlotsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := slotTestWorker(t, s, "worker-1", time.Minute)
	r, err := NewRescheduler(Pgx(pool), l, RescheduleOptions{Delay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := pool.QueryRow(ctx, `INSERT INTO jobs (job_type, concurrency_key, status, attempt, worker_id, lease_until)
VALUES ('Export', 'acct-1', 'running', 2, 'worker-1', now() + interval '1 minute') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	const group = "Export::acct-1"
	type row struct {
		status        string
		attempt       int
		runAt         time.Time
		leased, owned bool
	}
	read := func() row {
		t.Helper()
		var r row
		if err := pool.QueryRow(ctx, `SELECT status, attempt, run_at, lease_until IS NOT NULL, worker_id IS NOT NULL FROM jobs WHERE id = $1`, id).
			Scan(&r.status, &r.attempt, &r.runAt, &r.leased, &r.owned); err != nil {
			t.Fatal(err)
		}
		return r
	}
	// step is one pass of the queue's worker over the job: busy means
	// reschedule, a failure means the queue's own attempt path.
	step := func(fn func(context.Context) error) (ran bool, res Rescheduled) {
		t.Helper()
		ran, err := w.Run(ctx, group, 1, "1", fn)
		switch {
		case !ran && err == nil:
			if res, err = r.Reschedule(ctx, group, RowID(id)); err != nil {
				t.Fatal(err)
			}
		case err != nil:
			if _, err := pool.Exec(ctx, `UPDATE jobs SET attempt = attempt + 1, status = 'pending', worker_id = NULL, lease_until = NULL WHERE id = $1`, id); err != nil {
				t.Fatal(err)
			}
		}
		return ran, res
	}
	blocker := slotMustAcquire(t, s, group, 1, "other", time.Minute)
	for want := int64(1); want <= 3; want++ {
		ran, res := step(func(context.Context) error { return nil })
		got := read()
		if ran || res.Reschedules != want || got.attempt != 2 || got.status != "pending" || got.leased || got.owned || !got.runAt.Equal(res.RunAt) {
			t.Fatalf("busy pass %d: ran=%v %+v, row %+v; want attempt 2, pending, no lease or worker", want, ran, res, got)
		}
	}
	st, err := s.Status(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Waiting) != 1 || st.Waiting[0].JobID != "1" || st.Waiting[0].Reschedules != 3 {
		t.Fatalf("status shows waiting %+v, want job 1 rescheduled 3 times", st.Waiting)
	}
	if err := s.Release(ctx, blocker); err != nil {
		t.Fatal(err)
	}
	if ran, _ := step(func(context.Context) error { return errors.New("export failed") }); !ran {
		t.Fatal("the job did not get its slot once free")
	}
	if got := read(); got.attempt != 3 {
		t.Fatalf("after a real failure the attempt is %d, want 3", got.attempt)
	}
	// Getting the slot reset the job's reschedule counter.
	if st, err = s.Status(ctx, group); err != nil || len(st.Waiting) != 0 {
		t.Fatalf("waiting after the job ran: %+v %v", st.Waiting, err)
	}
}

// TestRescheduleWaitIsMeasured: the lease of a job that was rescheduled
// says how long it waited, from its first reschedule.
func TestRescheduleWaitIsMeasured(t *testing.T) {
	t.Parallel()
	url := slotMigratedDB(t, legacy.SingleTable)
	l := legacy.SingleTable.Layout
	pool := slotTestPool(t, url, 2)
	ctx := t.Context()
	s, err := NewSlots(Pgx(pool), l, SlotsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRescheduler(Pgx(pool), l, RescheduleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO jobs (id, job_type, status) VALUES (5, 'Export', 'running')`); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reschedule(ctx, "Export", RowID(5)); err != nil {
		t.Fatal(err)
	}
	var firstAt time.Time
	if err := pool.QueryRow(ctx, `SELECT first_at FROM concurrency_reschedules WHERE job_id = '5'`).Scan(&firstAt); err != nil {
		t.Fatal(err)
	}
	lease := slotMustAcquire(t, s, "Export", 1, "5", time.Minute)
	if lease.Waited <= 0 || lease.Waited != lease.AcquiredAt.Sub(firstAt) {
		t.Fatalf("waited %v, want acquired_at - first_at = %v", lease.Waited, lease.AcquiredAt.Sub(firstAt))
	}
	other := slotMustAcquire(t, s, "Other", 1, "6", time.Minute)
	if other.Waited != 0 {
		t.Fatalf("a job never rescheduled waited %v", other.Waited)
	}
}

// TestRescheduleTwoTable turns a running process row back into a request
// with the same uuid and the same retry_attempt, on both two-table schemas.
func TestRescheduleTwoTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		schema  legacy.Schema
		process string // inserts the process row; $1 is the request uuid
		params  string // the column holding the job's parameters
	}{
		{legacy.PlainJobs, `INSERT INTO plainjobs_jobprocess (created_at, uuid, job_class, parameters, priority, source, queue, retries, retry_attempt, concurrency_key, started_at, job_request_uuid)
VALUES (now(), gen_random_uuid(), 'Export', '{"acct": 7}', 5, 'test', 'reports', 3, 1, 'acct-7', now(), $1)`, "parameters"},
		{legacy.TeamQueue, `INSERT INTO "Billing Queue".job_processes (uuid, kind, concurrency_key, args, priority, queue, retries, retry_attempt, worker)
VALUES ($1, 'Export', 'acct-7', '{"acct": 7}', 5, 'reports', 3, 1, 'worker-1')`, "args"},
	}
	for _, tt := range tests {
		t.Run(tt.schema.Name, func(t *testing.T) {
			t.Parallel()
			url := slotMigratedDB(t, tt.schema)
			l := tt.schema.Resolved
			pool := slotTestPool(t, url, 2)
			ctx := t.Context()
			const uuid = "6f1c2a9e-0d4b-4c1e-9a57-3b8e2f0c7d11"
			if _, err := pool.Exec(ctx, tt.process, uuid); err != nil {
				t.Fatal(err)
			}
			r, err := NewRescheduler(Pgx(pool), l.Layout, RescheduleOptions{Delay: 2 * time.Second, NoJitter: true})
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Reschedule(ctx, "Export::acct-7", TextID(uuid))
			if err != nil {
				t.Fatal(err)
			}
			slotCheckRequest(t, pool, l, tt.params, uuid, res)
			var processes int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+l.Table(l.ProcessesTable)).Scan(&processes); err != nil {
				t.Fatal(err)
			}
			if processes != 0 {
				t.Fatalf("%d process rows left", processes)
			}
			// The job is no longer running: a second reschedule is an error.
			if _, err := r.Reschedule(ctx, "Export::acct-7", TextID(uuid)); err == nil || !strings.Contains(err.Error(), "no such running job") {
				t.Fatalf("second reschedule: %v", err)
			}
		})
	}
}

func slotCheckRequest(t *testing.T, pool *pgxpool.Pool, l layout.Resolved, params, uuid string, res Rescheduled) {
	t.Helper()
	var (
		attempt, priority, retries int
		key, queue, args           string
		startAt                    time.Time
	)
	err := pool.QueryRow(t.Context(), `SELECT retry_attempt, priority, retries, concurrency_key, queue, `+layout.Ident(params)+`::text, start_at
FROM `+l.Table(l.RequestsTable)+` WHERE uuid = $1`, uuid).Scan(&attempt, &priority, &retries, &key, &queue, &args, &startAt)
	if err != nil {
		t.Fatalf("the request with the job's uuid: %v", err)
	}
	if attempt != 1 || priority != 5 || retries != 3 || key != "acct-7" || queue != "reports" || args != `{"acct": 7}` || !startAt.Equal(res.RunAt) || res.Reschedules != 1 {
		t.Fatalf("request: attempt %d priority %d retries %d key %q queue %q args %s start_at %v (result %+v)", attempt, priority, retries, key, queue, args, startAt, res)
	}
}

// TestRescheduleThenRealFailureTwoTable follows one plain-jobs job: a busy
// reschedule leaves retry_attempt as it was; a real failure goes through
// the normal attempt path (a result, then Client.Retry), which counts it.
func TestRescheduleThenRealFailureTwoTable(t *testing.T) {
	t.Parallel()
	s := legacy.PlainJobs
	url := slotMigratedDB(t, s)
	l := s.Layout
	pool := slotTestPool(t, url, 2)
	ctx := t.Context()
	const uuid = "0b8e2f0c-7d11-4c1e-9a57-6f1c2a9e3b44"
	run := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, uuid); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	attemptOfRequest := func(where string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT retry_attempt FROM plainjobs_jobrequest WHERE `+where, uuid).Scan(&n); err != nil {
			t.Fatalf("request %s: %v", where, err)
		}
		return n
	}
	// pickUp is the queue's own claim: the request becomes a process row.
	pickUp := func() {
		t.Helper()
		run(`WITH r AS (DELETE FROM plainjobs_jobrequest WHERE uuid = $1 RETURNING *)
INSERT INTO plainjobs_jobprocess (created_at, uuid, job_class, parameters, priority, source, queue, retries, retry_attempt, concurrency_key, started_at, job_request_uuid)
SELECT created_at, gen_random_uuid(), job_class, parameters, priority, source, queue, retries, retry_attempt, concurrency_key, now(), uuid FROM r`)
	}
	run(`INSERT INTO plainjobs_jobrequest (created_at, uuid, job_class, parameters, priority, source, queue, retries, retry_attempt, concurrency_key)
VALUES (now(), $1, 'Export', '{}', 0, 'test', 'default', 3, 1, 'acct-7')`)
	pickUp()

	r, err := NewRescheduler(Pgx(pool), l, RescheduleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reschedule(ctx, "Export::acct-7", TextID(uuid)); err != nil {
		t.Fatal(err)
	}
	if got := attemptOfRequest("uuid = $1"); got != 1 {
		t.Fatalf("retry_attempt after a busy reschedule: %d, want 1", got)
	}

	// It runs and fails for real: the queue records the result, and the
	// retry path creates the next attempt.
	pickUp()
	var resultID int64
	if err := pool.QueryRow(ctx, `WITH p AS (DELETE FROM plainjobs_jobprocess WHERE job_request_uuid = $1 RETURNING *)
INSERT INTO plainjobs_jobresult (created_at, uuid, job_class, parameters, priority, source, queue, retries, retry_attempt, concurrency_key, started_at, job_request_uuid, job_process_uuid, ended_at, error, status)
SELECT created_at, gen_random_uuid(), job_class, parameters, priority, source, queue, retries, retry_attempt, concurrency_key, started_at, job_request_uuid, uuid, now(), 'boom', 'ERRORED' FROM p
RETURNING id`, uuid).Scan(&resultID); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(Pgx(pool), l)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Retry(ctx, resultID, RetryOptions{})
	if err != nil || !res.Inserted() {
		t.Fatalf("retry: %+v %v", res, err)
	}
	var retryAttempt int
	if err := pool.QueryRow(ctx, `SELECT retry_attempt FROM plainjobs_jobrequest WHERE uuid = $1`, res.UUID).Scan(&retryAttempt); err != nil {
		t.Fatal(err)
	}
	if retryAttempt != 2 {
		t.Fatalf("retry_attempt after a real failure: %d, want 2", retryAttempt)
	}
}
