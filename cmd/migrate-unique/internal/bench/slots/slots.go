// Package slots measures the slot lease API (compat.Slots) under many
// workers against one worker, in a scratch schema of its own, while an
// observer checks the limit and the fencing tokens. It backs
// `migrate-unique bench slots`.
package slots

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/scratch"
	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// Options configures Run.
type Options struct {
	// Workers is the number of concurrent workers, each on its own
	// connection.
	Workers int
	// Limit is the group's limit.
	Limit int
	// Duration is how long each phase (one worker, then all) runs.
	Duration time.Duration
	// Out receives the progress and figure lines.
	Out io.Writer
}

// Result is the run's figures (the --json line).
type Result struct {
	// Workers, Limit and DurationSeconds are the run's settings.
	Workers         int     `json:"workers"`
	Limit           int     `json:"limit"`
	DurationSeconds float64 `json:"duration_seconds"`
	// AcquireReleasePerSecond is the all-workers phase's rate of
	// acquire+release pairs; BaselineSingleWorker the one-worker phase's;
	// Ratio the first over the second.
	AcquireReleasePerSecond float64 `json:"acquire_release_per_second"`
	BaselineSingleWorker    float64 `json:"single_worker_acquire_release_per_second"`
	Ratio                   float64 `json:"ratio_to_single_worker"`
	// BusyPerSecond is the rate of acquisitions refused because every slot
	// was held.
	BusyPerSecond float64 `json:"busy_per_second"`
	// ObserverSamples counts the observer's reads of the slot table,
	// MaxUnexpiredObserved the most unexpired leases one read saw, and
	// OverLimitObserved the reads that saw more than the limit (must be 0).
	ObserverSamples      int64 `json:"observer_samples"`
	MaxUnexpiredObserved int64 `json:"max_unexpired_observed"`
	OverLimitObserved    int64 `json:"over_limit_observed"`
	// StaleReleasesAttempted counts releases by a worker whose slot had been
	// taken by another holder, StaleReleasesAccepted those that succeeded
	// (must be 0), and LostReleasesOfLiveHolders the releases a live holder
	// lost.
	StaleReleasesAttempted    int64 `json:"stale_releases_attempted"`
	StaleReleasesAccepted     int64 `json:"stale_releases_accepted"`
	LostReleasesOfLiveHolders int64 `json:"lost_releases"`
}

// Run creates a scratch queue (plain-jobs' tables migrated by the real
// migration, so the runtime's tables are there) on the server of url,
// measures one worker and then o.Workers workers, and drops the queue.
// A broken invariant is in the Result (OverLimitObserved,
// StaleReleasesAccepted), not an error.
func Run(ctx context.Context, url string, o Options) (*Result, error) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	q, err := scratch.New(ctx, url, "migrate_unique_bench_slots_"+hex.EncodeToString(rnd[:]), legacy.PlainJobs)
	if err != nil {
		return nil, pgurl.RedactError(url, err)
	}
	defer q.Drop(context.Background()) //nolint:errcheck
	l := q.Layout
	fmt.Fprintf(o.Out, "slots benchmark: scratch schema %s on %s, limit %d, %v per phase\n", l.Schema, pgurl.Describe(url), o.Limit, o.Duration)

	base, err := benchSlotsPhase(ctx, url, l, 1, o.Limit, o.Duration)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Out, "1 worker (baseline):  %8.0f acquire+release/s\n", base.rate)
	all, err := benchSlotsPhase(ctx, url, l, o.Workers, o.Limit, o.Duration)
	if err != nil {
		return nil, err
	}
	res := &Result{
		Workers: o.Workers, Limit: o.Limit, DurationSeconds: o.Duration.Seconds(),
		AcquireReleasePerSecond: all.rate, BaselineSingleWorker: base.rate, Ratio: all.rate / base.rate,
		BusyPerSecond:   all.busyRate,
		ObserverSamples: all.samples, MaxUnexpiredObserved: all.maxSeen, OverLimitObserved: all.overLimit + base.overLimit,
		StaleReleasesAttempted: all.staleTried, StaleReleasesAccepted: all.staleAccepted, LostReleasesOfLiveHolders: all.lost,
	}
	fmt.Fprintf(o.Out, "%d workers, limit %d: %8.0f acquire+release/s (ratio %.2f to 1 worker), %.0f busy/s\n",
		o.Workers, o.Limit, all.rate, res.Ratio, all.busyRate)
	fmt.Fprintf(o.Out, "observer: %d samples, at most %d unexpired leases, %d over the limit (must be 0)\n", all.samples, all.maxSeen, res.OverLimitObserved)
	fmt.Fprintf(o.Out, "stale releases: %d attempted after the slot was retaken, %d accepted (must be 0)\n", all.staleTried, all.staleAccepted)
	return res, nil
}

type benchSlotsFigures struct {
	rate, busyRate                  float64
	samples, maxSeen, overLimit     int64
	staleTried, staleAccepted, lost int64
}

// benchSlotsPhase runs n workers for d on one group and observes it.
func benchSlotsPhase(ctx context.Context, url string, l layout.Resolved, n, limit int, d time.Duration) (benchSlotsFigures, error) {
	group := fmt.Sprintf("Bench::workers-%d", n)
	var f benchSlotsFigures
	var pairs, busy atomic.Int64
	conns := make([]*pgx.Conn, n+1)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close(context.Background())
			}
		}
	}()
	for i := range conns {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return f, fmt.Errorf("connect: %w", pgurl.RedactError(url, err))
		}
		conns[i] = c
	}
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()

	observed := make(chan error, 1)
	go func() {
		for runCtx.Err() == nil {
			var unexpired int64
			err := conns[n].QueryRow(ctx, `SELECT count(*) FROM `+l.Table(layout.SlotsTable)+`
WHERE group_name = $1 AND expires_at > clock_timestamp()`, group).Scan(&unexpired)
			if err != nil {
				observed <- err
				return
			}
			f.samples++
			f.maxSeen = max(f.maxSeen, unexpired)
			if unexpired > int64(limit) {
				f.overLimit++
			}
		}
		observed <- nil
	}()

	type abandoned struct {
		s *compat.Slots
		l compat.Lease
	}
	var mu sync.Mutex
	var stale []abandoned
	var lost atomic.Int64
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := compat.NewSlots(compat.Pgx(conns[w]), l.Layout, compat.SlotsOptions{})
			if err != nil {
				errs <- err
				return
			}
			worker := fmt.Sprintf("bench-%d", w)
			for i := 0; runCtx.Err() == nil; i++ {
				// Every 50th lease of a multi-worker run is abandoned with
				// a short lease: a crashed worker that comes back later.
				abandon := n > 1 && i%50 == 49
				lease := 10 * time.Second
				if abandon {
					lease = 20 * time.Millisecond
				}
				le, ok, err := s.Acquire(ctx, group, limit, fmt.Sprintf("%s-%d", worker, i), worker, lease)
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					busy.Add(1)
					continue
				}
				if abandon {
					mu.Lock()
					stale = append(stale, abandoned{s, le})
					mu.Unlock()
					continue
				}
				if err := s.Release(ctx, le); err != nil {
					if !errors.Is(err, compat.ErrLeaseLost) {
						errs <- err
						return
					}
					lost.Add(1)
				}
				pairs.Add(1)
			}
		}()
	}
	start := time.Now()
	wg.Wait()
	elapsed := time.Since(start)
	// Stop the observer before reading its figures or returning: a worker
	// that failed early leaves the phase running otherwise.
	cancel()
	obsErr := <-observed
	close(errs)
	for err := range errs {
		return f, fmt.Errorf("worker: %w", pgurl.RedactError(url, err))
	}
	if obsErr != nil {
		return f, fmt.Errorf("observer: %w", pgurl.RedactError(url, obsErr))
	}
	// The stale workers come back: a release whose slot has a new token
	// since must be refused.
	for _, a := range stale {
		var token int64
		err := conns[n].QueryRow(ctx, `SELECT token FROM `+l.Table(layout.SlotsTable)+` WHERE group_name = $1 AND slot = $2`, a.l.Group, a.l.Slot).Scan(&token)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && token == a.l.Token {
			continue // not retaken: releasing it would be legitimate
		}
		if err != nil {
			return f, fmt.Errorf("read slot %d: %w", a.l.Slot, pgurl.RedactError(url, err))
		}
		f.staleTried++
		if err := a.s.Release(ctx, a.l); err == nil {
			f.staleAccepted++
		} else if !errors.Is(err, compat.ErrLeaseLost) {
			return f, err
		}
	}
	f.rate = float64(pairs.Load()) / elapsed.Seconds()
	f.busyRate = float64(busy.Load()) / elapsed.Seconds()
	f.lost = lost.Load()
	return f, nil
}
