package migrations_test

import (
	"context"
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
