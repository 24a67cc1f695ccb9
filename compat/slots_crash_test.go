package compat

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// slotCrashEnv makes the test binary act as the victim worker process of
// TestSlotCrashedWorkerProcess instead of running tests.
const slotCrashEnv = "COMPAT_SLOT_CRASH_VICTIM_URL"

const (
	slotCrashGroup = "Crash::shared"
	slotCrashLimit = 3
	slotCrashJobs  = 30
)

func init() {
	if url := os.Getenv(slotCrashEnv); url != "" {
		if err := slotCrashVictim(url); err != nil {
			fmt.Fprintln(os.Stderr, "victim:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
}

// slotCrashClaim is the queue's own claim: a due pending job, or a running
// one whose queue lease expired (its worker died).
const slotCrashClaim = `UPDATE jobs SET status = 'running', worker_id = $1, lease_until = now() + $2::interval
WHERE id = (SELECT id FROM jobs
    WHERE (status = 'pending' AND run_at <= now()) OR (status = 'running' AND lease_until < now())
    ORDER BY run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id`

// slotCrashVictim claims slotCrashLimit jobs, runs each under a slot (its
// worker extends the leases), says so on stdout and hangs until killed.
func slotCrashVictim(url string) error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	l := legacy.SingleTable.Layout
	s, err := NewSlots(Pgx(pool), l, SlotsOptions{})
	if err != nil {
		return err
	}
	w, err := NewWorker(s, "victim", 600*time.Millisecond)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	errs := make(chan error, slotCrashLimit)
	for range slotCrashLimit {
		var id int64
		if err := pool.QueryRow(ctx, slotCrashClaim, "victim", "1 second").Scan(&id); err != nil {
			return err
		}
		go func() {
			_, err := w.Run(ctx, slotCrashGroup, slotCrashLimit, fmt.Sprint(id), func(ctx context.Context) error {
				l, _ := LeaseFrom(ctx)
				mu.Lock()
				fmt.Printf("holding job %d slot %d token %d\n", id, l.Slot, l.Token)
				mu.Unlock()
				<-ctx.Done() // hang until killed
				return nil
			})
			errs <- fmt.Errorf("job %d ended before the kill: %v", id, err)
		}()
	}
	return <-errs
}

// TestSlotCrashedWorkerProcess kills a worker process with SIGKILL while it
// holds every slot of a group. Its slots stay taken until their leases
// expire, are then taken by the surviving workers, and every job of the
// run finishes exactly once.
func TestSlotCrashedWorkerProcess(t *testing.T) {
	testdb.Heavy(t)
	url := slotMigratedDB(t, legacy.SingleTable)
	ctx := t.Context()
	pool := slotTestPool(t, url, 4)
	if _, err := pool.Exec(ctx, `CREATE TABLE slot_crash_runs (job_id bigint NOT NULL, worker text NOT NULL, slot integer NOT NULL, token bigint NOT NULL, acquired_at timestamptz NOT NULL);
INSERT INTO jobs (job_type, concurrency_key, status) SELECT 'Crash', 'shared', 'pending' FROM generate_series(1, `+fmt.Sprint(slotCrashJobs)+`)`); err != nil {
		t.Fatal(err)
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	victimURL := url + "&application_name=slot-crash-victim"
	if !strings.Contains(url, "?") {
		victimURL = url + "?application_name=slot-crash-victim"
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), slotCrashEnv+"="+victimURL)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	victimJobs := map[int64]bool{}
	for len(victimJobs) < slotCrashLimit && lines.Scan() {
		var id, slot, token int64
		if _, err := fmt.Sscanf(lines.Text(), "holding job %d slot %d token %d", &id, &slot, &token); err != nil {
			t.Fatalf("victim said %q: %v", lines.Text(), err)
		}
		victimJobs[id] = true
	}
	if len(victimJobs) != slotCrashLimit {
		_ = cmd.Process.Kill()
		t.Fatalf("victim holds %d jobs, want %d (%v)", len(victimJobs), slotCrashLimit, lines.Err())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("victim exit: %v, want killed", err)
	}
	// Wait until the server has dropped the victim's sessions, so none of
	// its statements can still land; then its slot rows are final.
	for {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'slot-crash-victim'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	type held struct {
		token   int64
		expires time.Time
	}
	victim := map[int]held{}
	rows, err := pool.Query(ctx, `SELECT slot, token, expires_at FROM concurrency_slots WHERE group_name = $1 AND worker_id = 'victim'`, slotCrashGroup)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var slot int
		var h held
		if err := rows.Scan(&slot, &h.token, &h.expires); err != nil {
			t.Fatal(err)
		}
		victim[slot] = h
	}
	rows.Close()
	if len(victim) != slotCrashLimit {
		t.Fatalf("victim holds %d slot rows after the kill, want %d", len(victim), slotCrashLimit)
	}

	// The survivors: the queue's worker loop with slots and busy reschedules.
	var running, peak atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- slotCrashSurvivor(ctx, url, fmt.Sprintf("survivor-%d", i), &running, &peak)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if p := peak.Load(); p > slotCrashLimit {
		t.Fatalf("%d survivors ran jobs at once, limit %d", p, slotCrashLimit)
	}

	// Every job ran exactly once, the victim's included.
	var jobs, done, runs, distinct, victimRan int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM jobs WHERE status = 'done'),
    (SELECT count(*) FROM slot_crash_runs), (SELECT count(DISTINCT job_id) FROM slot_crash_runs),
    (SELECT count(*) FROM slot_crash_runs WHERE job_id = ANY ($1))`, slotCrashKeys(victimJobs)).Scan(&jobs, &done, &runs, &distinct, &victimRan); err != nil {
		t.Fatal(err)
	}
	if jobs != slotCrashJobs || done != jobs || runs != jobs || distinct != jobs || victimRan != slotCrashLimit {
		t.Fatalf("jobs %d, done %d, runs %d of %d distinct jobs, victim's jobs run %d times; want every job run exactly once", jobs, done, runs, distinct, victimRan)
	}
	// Nobody got one of the victim's slots while its lease was valid, and
	// every one of them was taken over after it expired.
	rows, err = pool.Query(ctx, `SELECT slot, token, acquired_at FROM slot_crash_runs`)
	if err != nil {
		t.Fatal(err)
	}
	takenOver := map[int]bool{}
	for rows.Next() {
		var slot int
		var token int64
		var at time.Time
		if err := rows.Scan(&slot, &token, &at); err != nil {
			t.Fatal(err)
		}
		v, ok := victim[slot]
		if !ok {
			t.Fatalf("slot %d was not one of the victim's", slot)
		}
		if token <= v.token {
			t.Fatalf("slot %d: survivor token %d not above the victim's %d", slot, token, v.token)
		}
		if at.Before(v.expires) {
			t.Fatalf("slot %d taken at %v while the victim's lease ran until %v", slot, at, v.expires)
		}
		takenOver[slot] = true
	}
	rows.Close()
	if len(takenOver) != slotCrashLimit {
		t.Fatalf("survivors took over %d of the victim's %d slots", len(takenOver), slotCrashLimit)
	}
}

func slotCrashKeys(m map[int64]bool) []int64 {
	var out []int64
	for k := range m {
		out = append(out, k)
	}
	return out
}

// slotCrashSurvivor claims and runs jobs until none is left.
func slotCrashSurvivor(ctx context.Context, url, name string, running, peak *atomic.Int32) error {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	l := legacy.SingleTable.Layout
	s, err := NewSlots(Pgx(pool), l, SlotsOptions{})
	if err != nil {
		return err
	}
	w, err := NewWorker(s, name, 2*time.Second)
	if err != nil {
		return err
	}
	r, err := NewRescheduler(Pgx(pool), l, RescheduleOptions{Delay: 20 * time.Millisecond})
	if err != nil {
		return err
	}
	for {
		var id int64
		err := pool.QueryRow(ctx, slotCrashClaim, name, "30 seconds").Scan(&id)
		if err != nil {
			var left int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status <> 'done'`).Scan(&left); err != nil {
				return err
			}
			if left == 0 {
				return nil
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		ran, err := w.Run(ctx, slotCrashGroup, slotCrashLimit, fmt.Sprint(id), func(ctx context.Context) error {
			n := running.Add(1)
			defer running.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			l, _ := LeaseFrom(ctx)
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(context.Background()) //nolint:errcheck
			if _, err := tx.Exec(ctx, `INSERT INTO slot_crash_runs VALUES ($1, $2, $3, $4, $5)`, id, name, l.Slot, l.Token, l.AcquiredAt); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE jobs SET status = 'done', finished_at = now() WHERE id = $1`, id); err != nil {
				return err
			}
			return tx.Commit(ctx)
		})
		if err != nil {
			return fmt.Errorf("job %d: %w", id, err)
		}
		if !ran {
			if _, err := r.Reschedule(ctx, slotCrashGroup, RowID(id)); err != nil {
				return err
			}
		}
	}
}
