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
