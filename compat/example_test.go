package compat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/layout"
)

// ChargeJob charges one customer; at most two charges of one customer run
// at once.
type ChargeJob struct{ CustomerID int }

func (j ChargeJob) ConcurrencyKey() string        { return fmt.Sprintf("customer-%d", j.CustomerID) }
func (j ChargeJob) ConcurrencyLimit() (int, bool) { return 2, true }

// ConcurrencySkipRecord asks for a skip record when the limit blocks an
// enqueue.
func (ChargeJob) ConcurrencySkipRecord() bool { return true }

// SendEmail is an old job type: one job per key, as the legacy queue had it.
type SendEmail struct{ To string }

func (j SendEmail) UniqueKey() string { return "email-" + j.To }

// SyncJob mirrors plain-jobs' default (one active job per non-empty key,
// no limit without a key), the rule Go and Python writers share.
type SyncJob struct{ Account string }

func (j SyncJob) ConcurrencyKey() string        { return j.Account }
func (j SyncJob) ConcurrencyLimit() (int, bool) { return 1, j.Account != "" }

// A job for a class plain-jobs' Python workers run carries its parameters
// in plain-jobs' shape.
func ExamplePlainArgs() {
	job := compat.Job{
		Class: "app.jobs.SendWelcome", // run by a Python worker
		Value: SyncJob{Account: "acct-7"},
		Args:  compat.PlainArgs{Args: []any{"a@example.com"}, Kwargs: map[string]any{"urgent": true}},
		Queue: "default", // a queue the Python workers serve
	}
	params, err := json.Marshal(job.Args)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(params), compat.CheckPlainArgs(params))
	// Output: {"args":["a@example.com"],"kwargs":{"urgent":true}} <nil>
}

// ReportJob is scheduled every minute.
type ReportJob struct{}

func (ReportJob) ConcurrencyKey() string { return "daily-report" }

func ExampleClient_Enqueue() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	c, err := compat.NewClient(compat.Pgx(pool), layout.PlainJobs())
	if err != nil {
		log.Fatal(err)
	}
	job := ChargeJob{CustomerID: 7}
	res, err := c.Enqueue(ctx, compat.Job{Class: "app.jobs.ChargeJob", Value: job, Args: job})
	if err != nil {
		log.Fatal(err) // a real failure: the limit is not an error
	}
	if s := res.Skipped; s != nil {
		fmt.Printf("not enqueued: %s allows %d active jobs and is full\n", s.Group, s.Limit)
		return
	}
	fmt.Println("enqueued request", res.ID, res.UUID)
}

func ExampleClient_EnqueueTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	c, err := compat.NewClient(compat.Pgx(pool), layout.PlainJobs())
	if err != nil {
		log.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// ... the caller's own writes in tx ...
	if _, err := c.EnqueueTx(ctx, compat.Pgx(tx), compat.Job{Class: "app.jobs.SendEmail", Value: SendEmail{To: "a@example.com"}}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil { // the job exists only if the caller's writes do
		log.Fatal(err)
	}
}

func ExampleClient_RetrySweep() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	c, err := compat.NewClient(compat.Pgx(pool), layout.PlainJobs())
	if err != nil {
		log.Fatal(err)
	}
	rep, err := c.RetrySweep(ctx, compat.RetryOptions{
		// Each class's job type, rebuilt from the stored parameters: a
		// retry is admitted under the limit its job value declares, as
		// Enqueue reads it. The sweep retries these classes only (and
		// ClassNames): the classes plain-jobs' Python workers run are
		// left to plain-jobs' own sweeper.
		Classes: compat.Classes{
			"app.jobs.ChargeJob": compat.Decode[ChargeJob],
			"app.jobs.SendEmail": compat.Decode[SendEmail],
		},
		Backoff: func(attempt int) time.Duration { return time.Duration(attempt) * 30 * time.Second },
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d retries created, %d blocked until the next sweep\n", rep.Retried, rep.Blocked)
}

func ExampleIdentityOf() {
	fmt.Printf("%+v\n", compat.IdentityOf(ChargeJob{CustomerID: 7}))
	fmt.Printf("%+v\n", compat.IdentityOf(SendEmail{To: "a@example.com"}))
	fmt.Printf("%+v\n", compat.IdentityOf(nil)) // no methods: no key, no limit
	// Output:
	// {Key:customer-7 Limit:2 Limited:true NoOverlap:false Prefix:}
	// {Key:email-a@example.com Limit:1 Limited:true NoOverlap:false Prefix:}
	// {Key: Limit:0 Limited:false NoOverlap:false Prefix:}
}

func ExampleScheduled() {
	occurrence := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	// Enqueue it as any job: c.Enqueue(ctx, compat.Job{Class: "app.jobs.Report", Value: id}).
	id := compat.Scheduled(ReportJob{}, occurrence)
	fmt.Println(id.Key, id.Limit)
	// No-overlap: the limit counts every occurrence of the schedule.
	id = compat.Scheduled(ReportJob{}, occurrence, compat.NoOverlap())
	fmt.Println(id.Key, id.Prefix, id.Limit)
	// Output:
	// daily-report:scheduled:1795341600 1
	// daily-report:scheduled:1795341600 daily-report:scheduled: 1
}

// A service that only enqueues steers a group's limit without building
// the slot API: the override wins over the code's limit at once.
func ExampleOverrides() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	ov, err := compat.NewOverrides(compat.Pgx(pool), layout.PlainJobs())
	if err != nil {
		log.Fatal(err)
	}
	group := compat.GroupName("app.jobs.ChargeJob", "customer-7")
	if err := ov.SetLimit(ctx, group, 0, "incident 123: hold this customer's charges"); err != nil {
		log.Fatal(err)
	}
	if o, ok, err := ov.Get(ctx, group); err == nil && ok {
		fmt.Printf("%s: limit %d since %s (%s)\n", o.Group, o.Limit, o.UpdatedAt.Format(time.RFC3339), o.Reason)
	}
	if _, err := ov.ClearLimit(ctx, group); err != nil {
		log.Fatal(err)
	}
}
