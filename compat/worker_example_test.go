package compat_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/layout"
)

// A worker process runs each job of a limited group under a slot lease; a
// busy group reschedules the job without spending an attempt.
func ExampleWorker_Run() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	l := layout.Layout{JobsTable: "jobs", StateColumn: "state", ActiveStates: []string{"queued", "running"}}
	slots, err := compat.NewSlots(compat.Pgx(pool), l, compat.SlotsOptions{})
	if err != nil {
		log.Fatal(err)
	}
	worker, err := compat.NewWorker(slots, "host-a:4121", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	resched, err := compat.NewRescheduler(compat.Pgx(pool), l, compat.RescheduleOptions{Delay: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}

	var jobID int64 = 42
	group := compat.GroupName("SendInvoice", "acct-7") // SendInvoice::acct-7
	ran, err := worker.Run(ctx, group, 2, fmt.Sprint(jobID), func(ctx context.Context) error {
		// ... the job's work; ctx is cancelled if the slot is lost.
		return nil
	})
	switch {
	case !ran && err == nil:
		// Busy: back to the queue, attempt counter untouched.
		res, err := resched.Reschedule(ctx, group, compat.RowID(jobID))
		if err != nil {
			log.Fatal(err)
		}
		log.Printf("job %d busy, due again at %s (rescheduled %d times in a row)", jobID, res.RunAt, res.Reschedules)
	case err != nil:
		// A real failure: the queue's normal attempt path.
		log.Printf("job %d failed: %v", jobID, err)
	}
}
