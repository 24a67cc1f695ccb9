package compat_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/compat"
)

// A worker process runs each job of a limited group under a slot lease; a
// busy group reschedules the job without spending an attempt.
func ExampleWorker_Run() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://localhost/app")
	if err != nil {
		panic(err)
	}
	l := compat.Layout{JobsTable: "jobs", StateColumn: "state", ActiveStates: []string{"queued", "running"}}
	slots, _ := compat.NewSlots(compat.Pgx(pool), l, compat.SlotsOptions{})
	worker, _ := compat.NewWorker(slots, "host-a:4121", 30*time.Second)
	resched, _ := compat.NewRescheduler(compat.Pgx(pool), l, compat.RescheduleOptions{Delay: 5 * time.Second})

	var jobID int64 = 42
	group := compat.GroupName("SendInvoice", "acct-7") // SendInvoice::acct-7
	ran, err := worker.Run(ctx, group, 2, fmt.Sprint(jobID), func(ctx context.Context) error {
		// ... the job's work; ctx is cancelled if the slot is lost.
		return nil
	})
	switch {
	case !ran && err == nil:
		// Busy: back to the queue, attempt counter untouched.
		res, err := resched.Reschedule(ctx, group, jobID)
		fmt.Println(res.RunAt, res.Reschedules, err)
	case err != nil:
		// A real failure: the queue's normal attempt path.
	}
}
