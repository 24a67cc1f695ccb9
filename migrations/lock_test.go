package migrations_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// A session holds a lock on the requests table for longer than the lock
// timeout: up retries and succeeds once it lets go, and meanwhile writers
// (which do not name the key column) never wait longer than the lock
// timeout. The bound is enforced by the server, not measured by the test:
// every writer runs with lock_timeout = 2 x the migration's, so a longer wait
// would fail its insert, and the test asserts that none failed.
func TestUpRetriesPastALockHolderWithoutStallingWriters(t *testing.T) {
	testdb.Heavy(t)
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	const lockTimeout = 300 * time.Millisecond

	holder := testdb.Connect(t, url)
	holderPID := holder.PgConn().PID()
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE plainjobs_jobrequest IN ACCESS SHARE MODE"); err != nil {
		t.Fatal(err)
	}

	const writers = 4
	var wrote, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		conn := testdb.Connect(t, url)
		if _, err := conn.Exec(ctx, "SET lock_timeout = '600ms'"); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := conn.Exec(ctx, `INSERT INTO plainjobs_jobrequest (created_at, uuid, job_class, source) VALUES (now(), gen_random_uuid(), $1, 'writer')`,
					"app.jobs.Writer"+string(rune('A'+w)))
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				wrote.Add(1)
			}
		}()
	}

	var retries atomic.Int64
	released := make(chan struct{})
	rep, err := migrations.Up(ctx, url, s.Layout, migrations.Options{
		LockTimeout: lockTimeout,
		MaxAttempts: 20,
		OnRetry: func(step string, attempt int, wait time.Duration, err error) {
			var pgErr *pgconn.PgError
			var holder *migrations.HolderError
			switch {
			case errors.As(err, &holder):
				if holder.PID != int(holderPID) || holder.Table != `plainjobs_jobrequest` {
					t.Errorf("retry names the wrong holder: %v", err)
				}
			case errors.As(err, &pgErr) && pgErr.Code == "55P03":
			default:
				t.Errorf("retry on %v, want a lock timeout or the holder", err)
			}
			// Let go after the cutover has given up twice.
			if retries.Add(1) == 2 {
				if err := tx.Rollback(ctx); err != nil {
					t.Error(err)
				}
				close(released)
			}
		},
	})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	select {
	case <-released:
	default:
		t.Fatal("up never had to retry: the holder did not block the cutover")
	}
	if rep.After != migrations.Migrated {
		t.Fatalf("up ended %s", rep.After)
	}
	var cutoverAttempts int
	for _, st := range rep.Steps {
		if st.Attempts > cutoverAttempts {
			cutoverAttempts = st.Attempts
		}
	}
	if cutoverAttempts < 3 {
		t.Fatalf("the most attempts of any step is %d, want >= 3 (two lock timeouts, then success)", cutoverAttempts)
	}
	if failed.Load() != 0 {
		t.Fatalf("%d writes failed (a writer waited longer than twice the lock timeout); first: %v", failed.Load(), firstErr.Load())
	}
	if wrote.Load() == 0 {
		t.Fatal("no write went through")
	}
	t.Logf("%d writes during up, none failed; %d retries; longest lock %s", wrote.Load(), retries.Load(), rep.LongestLock)

	// The rows written during the cutover are there, under the new column.
	var n int64
	if err := testdb.Connect(t, url).QueryRow(ctx, "SELECT count(*) FROM plainjobs_jobrequest WHERE source = 'writer' AND concurrency_key = ''").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != wrote.Load() {
		t.Fatalf("%d writer rows in the table, %d writes acknowledged", n, wrote.Load())
	}
}

// A second run on the same layout refuses while the first one works.
func TestSecondRunRefuses(t *testing.T) {
	ctx := context.Background()
	s := legacy.SingleTable
	url := legacyDB(t, s)
	inside := make(chan struct{})
	proceed := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := migrations.Up(ctx, url, s.Layout, migrations.Options{OnStep: func(r migrations.StepResult) {
			if r.Number == 1 {
				close(inside)
				<-proceed
			}
		}})
		done <- err
	}()
	<-inside
	_, err := migrations.Up(ctx, url, s.Layout, migrations.Options{})
	if !errors.Is(err, migrations.ErrBusy) {
		t.Errorf("second up: %v, want ErrBusy", err)
	}
	p, perr := migrations.Plan(ctx, url, s.Layout)
	if perr != nil || len(p.Findings) == 0 || !p.Findings[0].Fatal {
		t.Errorf("plan during a run: %v, %+v; want a fatal finding", perr, p)
	}
	close(proceed)
	if err := <-done; err != nil {
		t.Fatalf("first up: %v", err)
	}
}

// A session idle in a transaction that holds a lock on a queue table stops
// the preflight: nothing changes.
func TestPreflightRefusesALongIdleTransaction(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	before := takeSnapshot(t, url, s.Layout)
	idle := testdb.Connect(t, url)
	tx, err := idle.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SELECT 1 FROM plainjobs_jobprocess LIMIT 1"); err != nil {
		t.Fatal(err)
	}
	_, err = migrations.Up(ctx, url, s.Layout, migrations.Options{LongTransaction: time.Nanosecond})
	var pe *migrations.PreflightError
	if !errors.As(err, &pe) {
		t.Fatalf("up: %v, want a *PreflightError", err)
	}
	if msg := err.Error(); !contains(msg, "idle in a transaction", "plainjobs_jobprocess", "pg_terminate_backend") {
		t.Fatalf("message does not name the session, the table and the fix:\n%s", msg)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if d := before.diff(takeSnapshot(t, url, s.Layout)); d != "" {
		t.Fatalf("a refused up changed the database:\n%s", d)
	}
}
