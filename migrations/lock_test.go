package migrations_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// A session holds a lock on the requests table for longer than the lock
// timeout: up retries and succeeds once it lets go, and meanwhile writers
// (which follow the key column's rename) never wait longer than the lock
// timeout. The bound is enforced by the server, not measured by the test:
// every writer runs with lock_timeout = 2 x the migration's, so a longer wait
// would fail its insert, and the test asserts that none failed.
func TestUpRetriesPastALockHolderWithoutStallingWriters(t *testing.T) {
	testdb.Heavy(t)
	// An old holder is seen in pg_locks and waited out without queueing; a
	// holder that starts just before the cutover is queued behind once (the
	// attempt times out) and then waited out.
	for _, late := range []bool{false, true} {
		t.Run(map[bool]string{false: "holder older than the run", true: "holder starting just before the cutover"}[late], func(t *testing.T) {
			lockHolderCase(t, late)
		})
	}
}

func lockHolderCase(t *testing.T, late bool) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	const lockTimeout = 300 * time.Millisecond

	holder := testdb.Connect(t, url)
	holderPID := holder.PgConn().PID()
	var tx pgx.Tx
	hold := func() {
		var err error
		if tx, err = holder.Begin(ctx); err != nil {
			t.Error(err)
			return
		}
		if _, err := tx.Exec(ctx, "LOCK TABLE plainjobs_jobrequest IN ACCESS SHARE MODE"); err != nil {
			t.Error(err)
		}
	}
	if !late {
		hold()
		// Old means older than the first attempt's wait (lockTimeout/8).
		watcher := testdb.Connect(t, url)
		for old := false; !old; {
			if err := watcher.QueryRow(ctx, "SELECT now() - xact_start > interval '100 milliseconds' FROM pg_stat_activity WHERE pid = $1", holderPID).Scan(&old); err != nil {
				t.Fatal(err)
			}
		}
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
			keyCol := "unique_key"
			for {
				select {
				case <-stop:
					return
				default:
				}
				// plain-jobs' tables have no column default: a writer names
				// every NOT NULL column, the key column by the name it has
				// (an old writer's statement fails once the cutover renamed
				// it; this one follows, as the redeployed code does).
				_, err := conn.Exec(ctx, `INSERT INTO plainjobs_jobrequest (created_at, uuid, job_class, source, priority, queue, retries, retry_attempt, `+keyCol+`)
VALUES (now(), gen_random_uuid(), $1, 'writer', 0, 'default', 0, 0, '')`,
					"app.jobs.Writer"+string(rune('A'+w)))
				if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "42703" && keyCol == "unique_key" {
					keyCol = "concurrency_key"
					continue
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				wrote.Add(1)
			}
		}()
	}

	var retries, timeouts, waited atomic.Int64
	released := make(chan struct{})
	rep, err := migrations.Up(ctx, url, s.Layout, migrations.Options{
		LockTimeout: lockTimeout,
		MaxAttempts: 20,
		BeforeStep: func(_ context.Context, r migrations.StepResult) {
			if late && strings.HasPrefix(r.Name, "cutover") { // its intent recorded, the step is next
				hold()
			}
		},
		OnRetry: func(step string, attempt int, wait time.Duration, err error) {
			var pgErr *pgconn.PgError
			var h *migrations.HolderError
			switch {
			case errors.As(err, &h):
				// A writer's insert that is slow on a loaded machine can be
				// seen as a holder too; the test's holder must be seen.
				if h.PID == int(holderPID) {
					waited.Add(1)
				}
				if h.Table != "public.plainjobs_jobrequest" {
					t.Errorf("retry names the wrong table: %v", err)
				}
			case errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "57014"):
				timeouts.Add(1)
			default:
				t.Errorf("retry on %v, want a lock timeout or the holder", err)
			}
			// Let go after the cutover has given up three times.
			if retries.Add(1) == 3 {
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
	// A slow writer on a loaded machine can cost one more timeout; the late
	// holder must cost at least one, and then be waited out without queueing.
	if late && (timeouts.Load() < 1 || waited.Load() < 1) {
		t.Fatalf("a holder starting just before the cutover: %d lock timeouts, %d waits without queueing; want at least 1 of each", timeouts.Load(), waited.Load())
	}
	if !late && (timeouts.Load() != 0 || waited.Load() < 1) {
		t.Fatalf("an old holder: %d attempts queued behind it, %d waits naming it; want 0 and at least 1", timeouts.Load(), waited.Load())
	}
	if failed.Load() != 0 {
		t.Fatalf("%d writes failed (a writer waited longer than twice the lock timeout); first: %v", failed.Load(), firstErr.Load())
	}
	if wrote.Load() == 0 {
		t.Fatal("no write went through")
	}
	t.Logf("%d writes during up, none failed; %d retries (%d timeouts); longest lock %s", wrote.Load(), retries.Load(), timeouts.Load(), rep.LongestLock)

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
	finish := upHeldAtFirstStep(t, url, s.Layout)
	_, err := migrations.Up(ctx, url, s.Layout, migrations.Options{})
	if !errors.Is(err, migrations.ErrBusy) {
		t.Errorf("second up: %v, want ErrBusy", err)
	}
	p, perr := migrations.Plan(ctx, url, s.Layout)
	if perr != nil || len(p.Findings) == 0 || !p.Findings[0].Fatal {
		t.Errorf("plan during a run: %v, %+v; want a fatal finding", perr, p)
	}
	if err := finish(); err != nil {
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

// A session that holds a lock on the same table in another database (a
// copy made from the same template has the same relation oids) is not a
// session on the queue: the preflight goes on.
func TestPreflightIgnoresOtherDatabases(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url, other := legacyDB(t, s), legacyDB(t, s)
	tx, err := testdb.Connect(t, other).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SELECT 1 FROM plainjobs_jobrequest LIMIT 1"); err != nil {
		t.Fatal(err)
	}
	var same bool
	if err := testdb.Connect(t, url).QueryRow(ctx, "SELECT 'plainjobs_jobrequest'::regclass::oid = $1", relOID(t, other, "plainjobs_jobrequest")).Scan(&same); err != nil || !same {
		t.Fatalf("the two copies of the template do not share the table's oid (%v): the test cannot show what it is about", err)
	}
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{LongTransaction: time.Nanosecond}); err != nil {
		t.Fatalf("up with a long transaction in another database: %v", err)
	}
}

func relOID(t *testing.T, url, table string) uint32 {
	t.Helper()
	var oid uint32
	if err := testdb.Connect(t, url).QueryRow(context.Background(), "SELECT $1::regclass::oid", table).Scan(&oid); err != nil {
		t.Fatal(err)
	}
	return oid
}
