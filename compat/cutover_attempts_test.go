package compat

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// TestCutoverAttemptsUnderRollingTraffic measures how many attempts the
// cutover of complete and the cutover back of down --drain need under the
// rolling deploy's new-version traffic (plain-jobs 0.38's writers, whose
// enqueue counts the processes before the requests, and its workers, whose
// claim takes the requests before the processes: cyclic orders; compat's
// writers through pgx and database/sql), with the default --lock-timeout
// and its backoff, and no bound on attempts. Each round asserts what the
// rolling deploy test does (no failed write, no group over its limit, every
// job finished). It runs one round; MIGRATE_UNIQUE_MEASURE_CUTOVER=N runs N
// (docs/testing.md); docs/migration.md ("How many attempts") has the figures.
func TestCutoverAttemptsUnderRollingTraffic(t *testing.T) {
	rounds := 1
	if env := os.Getenv("MIGRATE_UNIQUE_MEASURE_CUTOVER"); env != "" {
		n, err := strconv.Atoi(env)
		if err != nil || n < 1 {
			t.Fatalf("MIGRATE_UNIQUE_MEASURE_CUTOVER=%q: give the number of rounds, at least 1", env)
		}
		rounds = n
	}
	type sample struct {
		attempts int
		took     time.Duration
		errs     map[string]int
	}
	var complete, down []sample
	measure := func(d *deploy, name string, after func(), run func(o migrations.Options) error) sample {
		var mu sync.Mutex
		s := sample{errs: map[string]int{}}
		start := time.Now()
		o := migrations.Options{MaxAttempts: 1000, Out: retryLog{d.t},
			OnRetry: func(step string, attempt int, wait time.Duration, err error) {
				if !strings.HasPrefix(step, "cutover") {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				var pe *pgconn.PgError
				switch {
				case errors.As(err, &pe):
					s.errs[pe.Code]++
				default:
					s.errs["long holder"]++
				}
			},
			OnStep: func(r migrations.StepResult) {
				if strings.HasPrefix(r.Name, "cutover") {
					s.attempts = r.Attempts
					s.took = time.Since(start)
					after()
				}
			}}
		if err := run(o); err != nil {
			d.t.Fatalf("%s: %v", name, err)
		}
		if s.attempts < 1 {
			d.t.Fatalf("%s: no cutover step was reported", name)
		}
		return s
	}
	for round := range rounds {
		t.Run(fmt.Sprint("round ", round), func(t *testing.T) {
			d := newDeploy(t)
			ctx := t.Context()
			l := legacy.PlainJobs.Layout
			if _, err := migrations.Up(ctx, d.url, l, migrations.Options{Expand: true}); err != nil {
				t.Fatal(err)
			}
			mon := d.monitor(d.pool("monitor", "", 1))
			defer mon.stop()
			vsPath := layout.Ident(d.vsName) + ", public"
			newWorkerPool := d.pool("new-version-worker", vsPath, 3)
			nw := d.newWriters(d.pool("new-version", vsPath, 4), 2)
			defer nw.stop()
			nk := d.workers(pj038, newWorkerPool, 3)
			defer nk.stop()
			cw := d.compatWriters(d.pool("new-version-compat-tx", "", 4), 2)
			defer cw.stop()
			cs := d.compatSQLWriters(d.pool("new-version-compat-sql", "", 4), 1)
			defer cs.stop()
			time.Sleep(300 * time.Millisecond)
			complete = append(complete, measure(d, "complete", func() {}, func(o migrations.Options) error {
				_, err := migrations.Up(ctx, d.url, l, o)
				return err
			}))
			time.Sleep(300 * time.Millisecond)
			ov, err := NewOverrides(Pgx(newWorkerPool), l)
			if err != nil {
				t.Fatal(err)
			}
			for k := range chargeKeys {
				if err := ov.SetLimit(ctx, layout.GroupName(chargeClass, fmt.Sprintf("acct-%d", k)), 1, "rolling back"); err != nil {
					t.Fatal(err)
				}
			}
			// The new version's code that names concurrency_key is rolled
			// back once the columns are back (the rolling deploy test
			// deploys the old version then), before down drops the views.
			down = append(down, measure(d, "down --drain", func() { nw.stop(); nk.stop() }, func(o migrations.Options) error {
				o.Drain, o.DrainPoll = true, 20*time.Millisecond
				_, err := migrations.Down(ctx, d.url, l, o)
				return err
			}))
			nw.stop()
			nk.stop()
			cw.stop()
			cs.stop()
			mon.stop()
			d.check("after down")
		})
	}
	report := func(name string, ss []sample) {
		var attempts []int
		errs := map[string]int{}
		var longest time.Duration
		for _, s := range ss {
			attempts = append(attempts, s.attempts)
			longest = max(longest, s.took)
			for k, v := range s.errs {
				errs[k] += v
			}
		}
		sort.Ints(attempts)
		if len(attempts) == 0 {
			return
		}
		t.Logf("%s: %d rounds, cutover attempts sorted %v (median %d, max %d), longest from the run's start to the cutover's commit %v, retries by cause %v",
			name, len(ss), attempts, attempts[len(attempts)/2], attempts[len(attempts)-1], longest.Round(time.Millisecond), errs)
	}
	report("complete", complete)
	report("down --drain (cutover back)", down)
}
