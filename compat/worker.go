package compat

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
)

// DefaultLease is the slot lease a Worker takes when none is configured.
const DefaultLease = 30 * time.Second

// PanicError is what Worker.Run returns when the job's function panicked:
// the slot was released and the panic became the job's failure.
type PanicError struct {
	// Value is what the function panicked with.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack []byte
}

// Error says that the job panicked and with what.
func (e *PanicError) Error() string { return fmt.Sprintf("job panicked: %v", e.Value) }

// Worker runs jobs of limited groups under slot leases: it acquires the
// job's slot, runs the job's function while extending the lease in the
// background, and releases the slot however the function ends. It is safe
// for concurrent use; one Worker serves every job of a worker process.
type Worker struct {
	slots *Slots
	id    string
	lease time.Duration
}

// NewWorker returns a worker named id (stored as the slots' worker_id, shown
// by status) that takes leases of the given duration (DefaultLease when 0;
// at least 1ms). The lease bounds how long a crashed worker's slots stay
// taken; the worker extends it every third of its duration while the job
// runs, from another goroutine, so slots must use a handle that is safe for
// concurrent use (a *pgxpool.Pool or *sql.DB, not a single connection).
func NewWorker(slots *Slots, id string, lease time.Duration) (*Worker, error) {
	switch {
	case slots == nil:
		return nil, fmt.Errorf("%w: the worker needs a *Slots", ErrSlotArgument)
	case id == "" || strings.ContainsRune(id, 0):
		return nil, fmt.Errorf("%w: worker id %q; give a non-empty name without NUL bytes, for example host:pid", ErrSlotArgument, id)
	case lease == 0:
		lease = DefaultLease
	case lease < time.Millisecond:
		// The keeper extends every third of the lease: below a millisecond
		// that is no interval at all (and a zero ticker would panic).
		return nil, fmt.Errorf("%w: lease duration %v; a lease must be at least 1ms, for example 30s", ErrSlotArgument, lease)
	}
	return &Worker{slots: slots, id: id, lease: lease}, nil
}

// Run runs fn for the job under a slot of group (limit as for
// Slots.Acquire). When every slot is held it returns ran == false and a nil
// error without calling fn: the job is busy, not failed, and the caller
// reschedules it (Rescheduler) without counting an attempt.
//
// Otherwise fn runs with a context that is cancelled, with cause
// ErrLeaseLost, when the lease is lost: another holder got the slot, an
// operator released it, or it could not be extended before it expired. The
// slot is released when fn returns, fails or panics (a panic becomes a
// *PanicError). The returned error is fn's, joined with ErrLeaseLost when
// the lease was lost while fn ran.
func (w *Worker) Run(ctx context.Context, group string, limit int, jobID string, fn func(ctx context.Context) error) (ran bool, err error) {
	if fn == nil {
		return false, fmt.Errorf("%w: the job function is nil", ErrSlotArgument)
	}
	// The local deadline starts before the statement, so it never ends
	// after the database's expiry.
	start := time.Now()
	l, ok, err := w.slots.Acquire(ctx, group, limit, jobID, w.id, w.lease)
	if err != nil || !ok {
		return false, err
	}
	jobCtx, cancel := context.WithCancelCause(context.WithValue(ctx, leaseKey{}, l))
	defer cancel(nil)

	stop := make(chan struct{})
	keeperDone := make(chan struct{})
	lost := make(chan error, 1)
	go func() {
		defer close(keeperDone)
		lost <- w.keep(jobCtx, l, start, stop, cancel)
	}()

	fnErr := runGuarded(jobCtx, fn)
	close(stop)
	<-keeperDone
	lostErr := <-lost
	if lostErr == nil {
		// Release even when ctx is cancelled: the slot must not wait for
		// its lease to expire.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), w.lease)
		lostErr = w.slots.Release(rctx, l)
		rcancel()
		if lostErr != nil && !errors.Is(lostErr, ErrLeaseLost) {
			// The release failed for another reason (database down):
			// the lease expires on its own; report it with the result.
			lostErr = fmt.Errorf("release slot %d of group %q (it expires on its own): %w", l.Slot, l.Group, lostErr)
		}
	}
	return true, errors.Join(fnErr, lostErr)
}

// keep extends the lease every third of its duration until stop is closed.
// It cancels the job (cause ErrLeaseLost) and returns the loss when the
// lease is lost or its local deadline passes without an extension; it
// returns nil when stopped with the lease still held.
func (w *Worker) keep(ctx context.Context, l Lease, start time.Time, stop <-chan struct{}, cancel context.CancelCauseFunc) error {
	until := start.Add(w.lease)
	deadline := time.NewTimer(time.Until(until))
	defer deadline.Stop()
	tick := time.NewTicker(w.lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-deadline.C:
			err := fmt.Errorf("%w: slot %d of group %q expired before it could be extended", ErrLeaseLost, l.Slot, l.Group)
			cancel(err)
			return err
		case <-tick.C:
			at := time.Now()
			// An extension that cannot finish before the lease ends is
			// useless: bound it by the local deadline.
			ectx, ecancel := context.WithDeadline(context.WithoutCancel(ctx), until)
			next, err := w.slots.Extend(ectx, l, w.lease)
			ecancel()
			switch {
			case errors.Is(err, ErrLeaseLost):
				cancel(err)
				return err
			case err != nil:
				// Transient: try again at the next tick; the deadline
				// still stands.
				w.slots.log.DebugContext(ctx, "slot extend failed", "group", l.Group, "slot", l.Slot, "err", err)
			default:
				l = next
				until = at.Add(w.lease)
				deadline.Reset(time.Until(until))
			}
		}
	}
}

type leaseKey struct{}

// LeaseFrom returns the lease of the job running under Worker.Run with ctx,
// as it was acquired (later extensions move only its expiry). Job code can
// use its Token to fence its own writes.
func LeaseFrom(ctx context.Context) (Lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(Lease)
	return l, ok
}

// runGuarded calls fn and turns a panic into a *PanicError.
func runGuarded(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return fn(ctx)
}
