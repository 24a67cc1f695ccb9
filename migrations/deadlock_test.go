package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// TestTheApplicationIsNeverTheDeadlockVictim: the old version's workers
// lock plain-jobs' tables in the reverse of the cutover's order (the
// results table, then the processes table), each transaction held a moment
// in between, while complete runs with a long --lock-timeout (its first
// attempt alone waits a whole deadlock_timeout). The cutover may lose a
// deadlock or time out, and retries; no statement of the application ever
// fails.
func TestTheApplicationIsNeverTheDeadlockVictim(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{Expand: true}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var txs atomic.Int64
	errs := make(chan error, 100)
	for w := range 3 {
		conn := sessionOn(t, url, fmt.Sprintf("worker-%d", w), s.Resolved.Schema)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				hold := 10 + rand.IntN(70)
				_, err := conn.Exec(ctx, fmt.Sprintf(`BEGIN; DELETE FROM plainjobs_jobresult WHERE false; SELECT pg_sleep(%d / 1000.0); DELETE FROM plainjobs_jobprocess WHERE false; DELETE FROM plainjobs_jobrequest WHERE false; COMMIT`, hold))
				if err != nil {
					errs <- err
					_, _ = conn.Exec(ctx, "ROLLBACK")
					return
				}
				txs.Add(1)
				time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	var retries []string
	var mu sync.Mutex
	rep, err := migrations.Up(ctx, url, s.Layout, migrations.Options{LockTimeout: 8 * time.Second, MaxAttempts: 60,
		OnRetry: func(step string, attempt int, wait time.Duration, err error) {
			mu.Lock()
			retries = append(retries, err.Error())
			mu.Unlock()
		}})
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("an application transaction failed during complete: %v", err)
	}
	if err != nil || rep.After != migrations.Migrated {
		t.Fatalf("complete: %v", err)
	}
	t.Logf("%d application transactions; the cutover retried %d times (%s)", txs.Load(), len(retries), strings.Join(retries, "; "))
}

// TestCutoverGivingUpNamesTheSessionsThatHeldItsTables: a session of the
// application holds the results table for the whole run; complete gives up
// after its attempts, changing nothing, and its error names that session
// (pid and application_name) as the one that held the table it waited for
// last.
func TestCutoverGivingUpNamesTheSessionsThatHeldItsTables(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{Expand: true}); err != nil {
		t.Fatal(err)
	}
	holder := sessionOn(t, url, "app-holding-results", s.Resolved.Schema)
	if _, err := holder.Exec(ctx, "BEGIN; DELETE FROM plainjobs_jobresult WHERE false"); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	_, err := migrations.Up(ctx, url, s.Layout, migrations.Options{LockTimeout: 400 * time.Millisecond, MaxAttempts: 2, Out: &out})
	var le *migrations.LockError
	if !errors.As(err, &le) {
		t.Fatalf("complete while a session holds the results table: %v; want a *LockError", err)
	}
	pid := int(holder.PgConn().PID())
	named := false
	for _, b := range le.Blockers {
		named = named || b.PID == pid && b.ApplicationName == "app-holding-results" && strings.Contains(b.Table, "plainjobs_jobresult")
	}
	if !named || !strings.Contains(err.Error(), fmt.Sprintf(`pid %d (application_name "app-holding-results")`, pid)) {
		t.Fatalf("the error names %v: %v; want pid %d (app-holding-results) holding plainjobs_jobresult", le.Blockers, err, pid)
	}
	// Nothing of the cutover was applied; once the session ends, up
	// completes.
	var legacyKey bool
	if err := holder.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'plainjobs_jobrequest'::regclass AND attname = 'unique_key' AND NOT attisdropped)`).Scan(&legacyKey); err != nil || !legacyKey {
		t.Fatalf("after complete gave up, plainjobs_jobrequest.unique_key exists: %v %v; want it untouched", legacyKey, err)
	}
	if _, err := holder.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if rep, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); err != nil || rep.After != migrations.Migrated {
		t.Fatalf("up after the session ended: %v", err)
	}
}

// TestDownAfterCompleteGaveUp: complete gives up while a session holds the
// results table; the layout is still expanded (Status, and down's Before),
// and down from there restores the legacy schema exactly.
func TestDownAfterCompleteGaveUp(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	before := takeSnapshot(t, url, s.Layout)
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{Expand: true}); err != nil {
		t.Fatal(err)
	}
	holder := sessionOn(t, url, "app-holding-results", s.Resolved.Schema)
	if _, err := holder.Exec(ctx, "BEGIN; LOCK TABLE plainjobs_jobresult IN ROW EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	_, err := migrations.Up(ctx, url, s.Layout, migrations.Options{LockTimeout: 200 * time.Millisecond, MaxAttempts: 2})
	var le *migrations.LockError
	if !errors.As(err, &le) {
		t.Fatalf("complete while a session holds the results table: %v; want a *LockError", err)
	}
	if _, err := holder.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	st, err := migrations.Status(ctx, url, s.Layout)
	if err != nil || st.State != migrations.Expanded || st.Direction != "up" || !strings.Contains(st.Stopped, "before its cutover committed") {
		t.Fatalf("status after complete gave up: %v %+v; want expanded, a complete stopped before its cutover", err, st)
	}
	var out strings.Builder
	rep, err := migrations.Down(ctx, url, s.Layout, migrations.Options{Out: &out})
	if err != nil || rep.Before != migrations.Expanded || rep.After != migrations.Legacy {
		t.Fatalf("down after complete gave up: %v %+v\n%s", err, rep, out.String())
	}
	if d := before.diff(takeSnapshot(t, url, s.Layout)); d != "" {
		t.Fatalf("down after complete gave up left a difference:\n%s\n%s", d, out.String())
	}
}

// TestContractNeverMakesTheApplicationTheDeadlockVictim: an application
// transaction reads the version schema's processes view, then its requests
// view, while up --contract drops the views (an event trigger holds the
// contract a moment after its first drop, the requests view, so that the
// application is queued behind it when it asks for the processes view).
// Dropping the views one per statement, each after the first under the
// later-lock wait, contract gives way before the application's deadlock
// check runs: the application transaction commits, and contract finishes on
// a later attempt. (With every view waited for the attempt's whole wait the
// application gets "deadlock detected"; the one statement that dropped
// every view before took its locks microseconds apart, with no moment to
// hold it in.)
func TestContractNeverMakesTheApplicationTheDeadlockVictim(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{Expand: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{Force: true}); err != nil {
		t.Fatal(err)
	}
	admin := sessionOn(t, url, "admin", s.Resolved.Schema)
	if _, err := admin.Exec(ctx, `CREATE FUNCTION public.test_hold_after_drop() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_event_trigger_dropped_objects() WHERE object_type = 'view' AND object_name = 'plainjobs_jobrequest') THEN
        PERFORM pg_sleep(0.3);
    END IF;
END $$;
CREATE EVENT TRIGGER test_hold_after_drop ON sql_drop EXECUTE FUNCTION public.test_hold_after_drop()`); err != nil {
		t.Fatal(err)
	}
	app := sessionOn(t, url, "new-version", "public_concurrency", s.Resolved.Schema)
	if _, err := app.Exec(ctx, "BEGIN; SELECT count(*) FROM plainjobs_jobprocess"); err != nil {
		t.Fatal(err)
	}
	appErr := make(chan error, 1)
	go func() {
		// Once contract holds the requests view, ask for it.
		for {
			var held bool
			if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE relation = to_regclass('public_concurrency.plainjobs_jobrequest') AND mode = 'AccessExclusiveLock' AND granted)`).Scan(&held); err != nil {
				appErr <- err
				return
			}
			if held {
				break
			}
			time.Sleep(time.Millisecond)
		}
		_, err := app.Exec(ctx, "SELECT count(*) FROM plainjobs_jobrequest")
		if err == nil {
			_, err = app.Exec(ctx, "COMMIT")
		}
		appErr <- err
	}()
	// A first attempt that waits four times deadlock_timeout: its later
	// view must still give way first.
	_, err := migrations.Up(ctx, url, s.Layout, migrations.Options{Contract: true, LockTimeout: 32 * time.Second})
	if aerr := <-appErr; aerr != nil {
		t.Fatalf("the application's transaction during contract: %v; want it to commit (contract gives way)", aerr)
	}
	if err != nil {
		t.Fatalf("contract: %v", err)
	}
}
