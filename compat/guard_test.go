package compat

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// TestEnqueueTxAboveReadCommittedIsRefused: in a caller's REPEATABLE READ or
// SERIALIZABLE transaction whose snapshot predates another admission,
// EnqueueTx fails with ErrIsolation and inserts nothing (it would otherwise
// admit a second job with limit 1).
func TestEnqueueTxAboveReadCommittedIsRefused(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	ctx := t.Context()
	for _, iso := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
		t.Run(string(iso), func(t *testing.T) {
			key := "iso-" + string(iso)
			tx, err := q.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "SELECT 1"); err != nil { // the snapshot
				t.Fatal(err)
			}
			if res, err := q.c.Enqueue(ctx, Job{Class: "iso.Job", Value: Limit(key, 1)}); err != nil || !res.Inserted() {
				t.Fatalf("the other admission: %+v, %v", res, err)
			}
			_, err = q.c.EnqueueTx(ctx, Pgx(tx), Job{Class: "iso.Job", Value: Limit(key, 1)})
			if !errors.Is(err, ErrIsolation) {
				t.Fatalf("EnqueueTx at %s: %v, want ErrIsolation", iso, err)
			}
			_ = tx.Rollback(ctx)
			var n int
			if err := q.pool.QueryRow(ctx, "SELECT count(*) FROM plainjobs_jobrequest WHERE concurrency_key = $1", key).Scan(&n); err != nil || n != 1 {
				t.Fatalf("%d jobs in the group, want 1 (%v)", n, err)
			}
		})
	}
	// A READ COMMITTED caller transaction keeps its own settings after the
	// enqueue: the guard restores them.
	tx, err := q.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '7s'"); err != nil {
		t.Fatal(err)
	}
	if _, err := q.c.EnqueueTx(ctx, Pgx(tx), Job{Class: "iso.Job", Value: Limit("rc", 1)}); err != nil {
		t.Fatal(err)
	}
	callerSettings := func(when string) {
		t.Helper()
		var seq, lt, pc string
		if err := tx.QueryRow(ctx, "SELECT current_setting('enable_seqscan'), current_setting('lock_timeout'), current_setting('plan_cache_mode')").Scan(&seq, &lt, &pc); err != nil || seq != "on" || lt != "7s" || pc != "force_custom_plan" {
			t.Fatalf("after %s: enable_seqscan %s, lock_timeout %s, plan_cache_mode %s (%v); want the caller's on, 7s and force_custom_plan", when, seq, lt, pc, err)
		}
	}
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_custom_plan"); err != nil {
		t.Fatal(err)
	}
	if _, err := q.c.EnqueueTx(ctx, Pgx(tx), Job{Class: "iso.Job", Value: Limit("rc2", 1)}); err != nil {
		t.Fatal(err)
	}
	callerSettings("EnqueueTx")
	if _, err := q.c.EnqueueManyTx(ctx, Pgx(tx), []Job{{Class: "iso.Job", Value: Limit("rc3", 1)}, {Class: "iso.Job", Value: Limit("rc3", 1)}}); err != nil {
		t.Fatal(err)
	}
	callerSettings("EnqueueManyTx")
}

// TestOwnTransactionIsReadCommittedWhateverTheDefault: a database whose
// default isolation is SERIALIZABLE still gets exact admissions from
// Enqueue, which begins its own transactions at READ COMMITTED.
func TestOwnTransactionIsReadCommittedWhateverTheDefault(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	ctx := t.Context()
	cfg, err := pgxpool.ParseConfig(q.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "serializable"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := NewClient(Pgx(pool), legacy.PlainJobs.Layout)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		res, err := c.Enqueue(ctx, Job{Class: "iso.Job", Value: Limit("default", 1)})
		if err != nil || res.Inserted() != (i == 0) {
			t.Fatalf("enqueue %d: %+v, %v", i, res, err)
		}
	}
}

// TestLockWaitIsBounded: an enqueue behind a caller's transaction that
// holds the group's lock fails with ErrLockTimeout after the client's lock
// wait, and inserts nothing.
func TestLockWaitIsBounded(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	ctx := t.Context()
	tx, err := q.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := q.c.EnqueueTx(ctx, Pgx(tx), Job{Class: "wait.Job", Value: Limit("held", 2)}); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(Pgx(q.pool), legacy.PlainJobs.Layout, WithLockWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Enqueue(ctx, Job{Class: "wait.Job", Value: Limit("held", 2)})
	if !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("enqueue behind a held lock: %v, want ErrLockTimeout", err)
	}
	_ = tx.Rollback(ctx)
	var n int
	if err := q.pool.QueryRow(ctx, "SELECT count(*) FROM plainjobs_jobrequest WHERE concurrency_key = 'held'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d jobs in the group, want 0 (%v)", n, err)
	}
}

// TestStatusShowsTheLockHolder: while a caller's transaction holds a
// group's lock, Status names its session.
func TestStatusShowsTheLockHolder(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	ctx := t.Context()
	tx, err := q.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := q.c.EnqueueTx(ctx, Pgx(tx), Job{Class: "wait.Job", Value: Limit("held", 2)}); err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	s, err := NewSlots(Pgx(q.pool), legacy.PlainJobs.Layout, SlotsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Status(ctx, "wait.Job::held")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.LockHolders) != 1 || st.LockHolders[0].PID != pid || st.LockHolders[0].Mode != "ExclusiveLock" || st.LockHolders[0].XactStart == nil {
		t.Fatalf("lock holders %+v, want pid %d exclusive", st.LockHolders, pid)
	}
	_ = tx.Rollback(ctx)
	if st, err = s.Status(ctx, "wait.Job::held"); err != nil || len(st.LockHolders) != 0 {
		t.Fatalf("after rollback: %+v, %v", st.LockHolders, err)
	}
}
