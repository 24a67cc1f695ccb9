package compat

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
)

// slotHold is one acquisition seen by a hammer worker. acquired and
// released are positions in one global order of events (an atomic counter),
// so the checks below need no clock.
type slotHold struct {
	slot     int
	token    int64
	acquired int64 // after Acquire returned
	released int64 // before Release was called
	ok       bool  // Release succeeded
	stale    bool  // the holder abandoned the lease and released it late
	// acquiredAt and expiresAt are the database's times: acquisition and
	// the last expiry the holder was granted (by Acquire or Extend).
	acquiredAt, expiresAt time.Time
}

// TestSlotHammer runs 32 workers on separate connections against one group
// with limit 10 and short leases; some workers abandon their lease (a crash)
// and try to release it much later (a stale worker). An observer samples
// the slot table all along and must never see more than 10 unexpired leases,
// and the workers' own history must show no two successful holders of one
// slot overlapping, at most 10 at once, and no stale release accepted.
func TestSlotHammer(t *testing.T) {
	testdb.Heavy(t)
	url := slotTestDB(t)
	ctx := t.Context()
	const (
		workers   = 32
		limit     = 10
		perWorker = 40
		group     = "Hammer::shared-api"
	)
	var seq atomic.Int64
	var (
		mu    sync.Mutex
		holds []slotHold
	)
	done := make(chan struct{})

	// The observer.
	obsConn := testdb.Connect(t, url)
	type sample struct{ unexpired, above int }
	samples := make(chan []sample, 1)
	var got []sample
	var stopOnce sync.Once
	stopObserver := func() {
		stopOnce.Do(func() {
			close(done)
			got = <-samples
		})
	}
	// Stop it before its connection is closed, even when the test fails.
	t.Cleanup(stopObserver)
	go func() {
		var got []sample
		defer func() { samples <- got }()
		for {
			var sm sample
			err := obsConn.QueryRow(context.Background(), `SELECT
    count(*) FILTER (WHERE expires_at > clock_timestamp()),
    count(*) FILTER (WHERE expires_at > clock_timestamp() AND slot >= $2)
FROM concurrency_slots WHERE group_name = $1`, group, limit).Scan(&sm.unexpired, &sm.above)
			if err != nil {
				got = append(got, sample{-1, -1})
				return
			}
			got = append(got, sm)
			select {
			case <-done:
				return
			default:
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := testdb.Dial(ctx, url)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(context.Background())
			s, err := NewSlots(Pgx(conn), slotTestLayout, SlotsOptions{})
			if err != nil {
				errs <- err
				return
			}
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			worker := fmt.Sprintf("w%02d", w)
			var abandoned []slotHold
			var abandonedLeases []Lease
			for i := 0; i < perWorker; {
				abandon := rng.IntN(10) == 0
				lease := 300 * time.Millisecond
				if abandon {
					lease = 15 * time.Millisecond
				}
				l, ok, err := s.Acquire(ctx, group, limit, fmt.Sprintf("%s-%d", worker, i), worker, lease)
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					time.Sleep(time.Duration(rng.IntN(1000)) * time.Microsecond)
					continue
				}
				i++
				h := slotHold{slot: l.Slot, token: l.Token, acquired: seq.Add(1), acquiredAt: l.AcquiredAt, expiresAt: l.ExpiresAt}
				if abandon {
					abandoned, abandonedLeases = append(abandoned, h), append(abandonedLeases, l)
					continue
				}
				if rng.IntN(3) == 0 {
					l, err = s.Extend(ctx, l, 300*time.Millisecond)
					if err != nil && !errors.Is(err, ErrLeaseLost) {
						errs <- err
						return
					}
					if err == nil {
						h.expiresAt = l.ExpiresAt
					}
				}
				time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
				h.released = seq.Add(1)
				err = s.Release(ctx, l)
				if err != nil && !errors.Is(err, ErrLeaseLost) {
					errs <- err
					return
				}
				h.ok = err == nil
				mu.Lock()
				holds = append(holds, h)
				mu.Unlock()
			}
			// The stale worker comes back and releases what it abandoned.
			for i, h := range abandoned {
				h.stale = true
				h.released = seq.Add(1)
				err := s.Release(ctx, abandonedLeases[i])
				if err != nil && !errors.Is(err, ErrLeaseLost) {
					errs <- err
					return
				}
				h.ok = err == nil
				mu.Lock()
				holds = append(holds, h)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stopObserver()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	maxSeen := 0
	for i, sm := range got {
		if sm.unexpired < 0 {
			t.Fatalf("observer query %d failed", i)
		}
		if sm.unexpired > limit || sm.above > 0 {
			t.Fatalf("sample %d: %d unexpired leases (%d at or above slot %d), limit %d", i, sm.unexpired, sm.above, limit, limit)
		}
		maxSeen = max(maxSeen, sm.unexpired)
	}
	if len(holds) != workers*perWorker {
		t.Fatalf("%d holds recorded, want %d", len(holds), workers*perWorker)
	}

	// Successful holders of one slot never overlap, no token is handed out
	// twice, and a stale release is accepted only if nobody acquired the slot
	// after the stale holder did.
	bySlot := map[int][]slotHold{}
	for _, h := range holds {
		if h.slot < 0 || h.slot >= limit {
			t.Fatalf("slot %d handed out with limit %d", h.slot, limit)
		}
		bySlot[h.slot] = append(bySlot[h.slot], h)
	}
	staleRejected, staleAccepted := 0, 0
	for slot, hs := range bySlot {
		sort.Slice(hs, func(i, j int) bool { return hs[i].token < hs[j].token })
		for i := 1; i < len(hs); i++ {
			prev, next := hs[i-1], hs[i]
			if next.token == prev.token {
				t.Fatalf("slot %d: token %d handed out twice", slot, next.token)
			}
			// A holder that did not release in time keeps the slot until
			// its lease expires: nobody may take it earlier.
			if !prev.ok && next.acquiredAt.Before(prev.expiresAt) {
				t.Fatalf("slot %d: token %d acquired at %v while token %d held it until %v", slot, next.token, next.acquiredAt, prev.token, prev.expiresAt)
			}
		}
		for i, h := range hs {
			if !h.ok {
				if h.stale {
					staleRejected++
				}
				continue
			}
			for _, later := range hs[i+1:] {
				if later.acquired < h.released {
					t.Fatalf("slot %d: token %d was released successfully (stale=%v) after token %d took the slot", slot, h.token, h.stale, later.token)
				}
			}
			if h.stale {
				staleAccepted++
			}
		}
	}
	// At most limit successful holders at once.
	type event struct {
		at    int64
		delta int
	}
	var events []event
	for _, h := range holds {
		if h.ok && !h.stale {
			events = append(events, event{h.acquired, +1}, event{h.released, -1})
		}
	}
	sort.Slice(events, func(i, j int) bool { return events[i].at < events[j].at })
	active, peak := 0, 0
	for _, e := range events {
		active += e.delta
		peak = max(peak, active)
		if active > limit {
			t.Fatalf("%d successful holders at once, limit %d", active, limit)
		}
	}
	if staleRejected == 0 {
		t.Fatalf("no stale release was rejected; the hammer did not exercise fencing")
	}
	t.Logf("%d samples, max %d unexpired leases seen; peak %d holders; stale releases rejected %d, accepted (slot never retaken) %d",
		len(got), maxSeen, peak, staleRejected, staleAccepted)
}
