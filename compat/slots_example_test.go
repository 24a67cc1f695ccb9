package compat_test

import (
	"context"
	"errors"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/layout"
)

// A group of at most 10 concurrent SMTP sends, whatever the backlog: take a
// slot, extend it while the work runs, release it with the lease's token.
func ExampleSlots_Acquire() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	s, err := compat.NewSlots(compat.Pgx(pool), layout.PlainJobs(), compat.SlotsOptions{
		Logger:        nil,                      // debug lines only; nil discards them
		MeterProvider: nil,                      // nil: no metrics
		GaugeGroups:   []string{"Mailer::smtp"}, // per-group gauges are opt-in: group names are unbounded
	})
	if err != nil {
		log.Fatal(err)
	}
	lease, acquired, err := s.Acquire(ctx, "Mailer::smtp", 10, "job-42", "host-a:4121", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	if !acquired {
		return // busy: reschedule the job (Rescheduler), it is not a failure
	}
	// ... the work ...
	if lease, err = s.Extend(ctx, lease, 30*time.Second); errors.Is(err, compat.ErrLeaseLost) {
		return // the slot expired and went to another worker: stop, write nothing
	}
	if err := s.Release(ctx, lease); err != nil && !errors.Is(err, compat.ErrLeaseLost) {
		log.Fatal(err)
	}
}

// A single-table queue whose first active state is queued: a busy job goes
// back with run_at = now + 5s (jittered 4s..6s) and its attempt untouched.
func ExampleRescheduler_Reschedule() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	l := layout.Layout{JobsTable: "jobs", StateColumn: "state", ActiveStates: []string{"queued", "running"}}
	r, err := compat.NewRescheduler(compat.Pgx(pool), l, compat.RescheduleOptions{
		Delay:  5 * time.Second, // default DefaultRescheduleDelay
		Jitter: 0.2,             // default DefaultRescheduleJitter; NoJitter: exactly Delay
	})
	if err != nil {
		log.Fatal(err)
	}
	res, err := r.Reschedule(ctx, compat.GroupName("SendInvoice", "acct-7"), compat.RowID(42))
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("job 42 due at %s, rescheduled %d times in a row", res.RunAt, res.Reschedules)
}
