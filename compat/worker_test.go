package compat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func slotTestWorker(t *testing.T, s *Slots, id string, lease time.Duration) *Worker {
	t.Helper()
	w, err := NewWorker(s, id, lease)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestWorkerReleasesHoweverTheJobEnds(t *testing.T) {
	t.Parallel()
	s, _, _ := slotTestSlots(t)
	w := slotTestWorker(t, s, "worker-1", time.Minute)
	boom := errors.New("smtp said no")
	tests := []struct {
		name  string
		fn    func(context.Context) error
		check func(error) bool
	}{
		{"success", func(context.Context) error { return nil }, func(err error) bool { return err == nil }},
		{"failure", func(context.Context) error { return boom }, func(err error) bool { return errors.Is(err, boom) }},
		{"panic", func(context.Context) error { panic("nil map") }, func(err error) bool {
			var pe *PanicError
			return errors.As(err, &pe) && pe.Value == "nil map" && strings.Contains(string(pe.Stack), "runGuarded")
		}},
	}
	for _, tt := range tests {
		var held GroupStatus
		ran, err := w.Run(t.Context(), "Mailer", 1, "job-"+tt.name, func(ctx context.Context) error {
			var serr error
			if held, serr = s.Status(ctx, "Mailer"); serr != nil {
				return serr
			}
			return tt.fn(ctx)
		})
		if !ran || !tt.check(err) {
			t.Errorf("%s: ran=%v err=%v", tt.name, ran, err)
		}
		if held.Active != 1 || held.Slots[0].JobID != "job-"+tt.name || held.Slots[0].WorkerID != "worker-1" {
			t.Errorf("%s: status while running %+v", tt.name, held)
		}
		st, serr := s.Status(t.Context(), "Mailer")
		if serr != nil {
			t.Fatal(serr)
		}
		if st.Active != 0 {
			t.Errorf("%s: %d slots still held after the job ended", tt.name, st.Active)
		}
	}
}

func TestWorkerBusyDoesNotRun(t *testing.T) {
	t.Parallel()
	s, _, _ := slotTestSlots(t)
	w := slotTestWorker(t, s, "worker-1", time.Minute)
	slotMustAcquire(t, s, "Sync::acct", 1, "other", time.Minute)
	called := false
	ran, err := w.Run(t.Context(), "Sync::acct", 1, "mine", func(context.Context) error { called = true; return nil })
	if ran || err != nil || called {
		t.Fatalf("ran=%v err=%v called=%v, want a busy outcome without running", ran, err, called)
	}
	if _, err := w.Run(t.Context(), "Sync::acct", -1, "mine", func(context.Context) error { return nil }); !errors.Is(err, ErrSlotArgument) {
		t.Fatalf("negative limit: %v", err)
	}
	for _, bad := range []struct {
		id    string
		lease time.Duration
	}{{"", time.Second}, {"w\x00", time.Second}, {"w", -time.Second}, {"w", 2 * time.Nanosecond}} {
		if _, err := NewWorker(s, bad.id, bad.lease); !errors.Is(err, ErrSlotArgument) {
			t.Errorf("NewWorker(%q, %v): %v", bad.id, bad.lease, err)
		}
	}
}

// TestWorkerExtendsWhileRunning runs a job for longer than several lease
// durations: it must keep its slot all along.
func TestWorkerExtendsWhileRunning(t *testing.T) {
	t.Parallel()
	s, pool, _ := slotTestSlots(t)
	const lease = 1500 * time.Millisecond
	w := slotTestWorker(t, s, "worker-1", lease)
	ran, err := w.Run(t.Context(), "Long", 1, "long-job", func(ctx context.Context) error {
		first, err := s.Status(ctx, "Long")
		if err != nil {
			return err
		}
		expiry := *first.Slots[0].ExpiresAt
		// Outlive the first lease twice over, as the database sees it.
		for range 2 {
			slotAwaitExpired(t, pool, Lease{ExpiresAt: expiry})
			st, err := s.Status(ctx, "Long")
			if err != nil {
				return fmt.Errorf("%w (cause %v)", err, context.Cause(ctx))
			}
			sl := st.Slots[0]
			if !sl.Held || sl.JobID != "long-job" || sl.Token != first.Slots[0].Token {
				t.Errorf("slot after its first expiry: %+v", sl)
			}
			expiry = *sl.ExpiresAt
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
		}
		return nil
	})
	if !ran || err != nil {
		t.Fatalf("ran=%v err=%v", ran, err)
	}
}

// TestWorkerCancelsWhenTheLeaseIsLost frees the running job's slot as an
// operator would: the job's context is cancelled with ErrLeaseLost.
func TestWorkerCancelsWhenTheLeaseIsLost(t *testing.T) {
	t.Parallel()
	s, _, _ := slotTestSlots(t)
	w := slotTestWorker(t, s, "worker-1", 300*time.Millisecond)
	ran, err := w.Run(t.Context(), "Stuck", 1, "victim", func(ctx context.Context) error {
		// Not under the job's context: on a slow machine the lease may be
		// lost by its local deadline first, and a cancelled force release
		// would leave the slot held until the database's expiry.
		if _, err := s.ForceRelease(t.Context(), "Stuck", 0); err != nil {
			t.Errorf("force release: %v", err)
			return err
		}
		<-ctx.Done()
		if cause := context.Cause(ctx); !errors.Is(cause, ErrLeaseLost) {
			t.Errorf("cause %v, want ErrLeaseLost", cause)
		}
		return ctx.Err()
	})
	if !ran || !errors.Is(err, ErrLeaseLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("ran=%v err=%v, want the job's cancellation joined with ErrLeaseLost", ran, err)
	}
	// Its slot was not released on its behalf: a new holder is untouched.
	l := slotMustAcquire(t, s, "Stuck", 1, "next", time.Minute)
	if err := s.Release(t.Context(), l); err != nil {
		t.Fatal(err)
	}
}
