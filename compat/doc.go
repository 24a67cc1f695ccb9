// Package compat is the drop-in runtime that lets old UniqueKey job types and
// new ConcurrencyKey/ConcurrencyLimit job types run side by side on a
// PostgreSQL job queue: the exact counting admission check, enqueue, retries,
// scheduled keys, limit overrides, class pauses, skip records, worker-side
// slot leases and reschedule without an attempt. See docs/runtime.md.
//
// A whole program: a job type with a concurrency key and a limit, enqueued
// on plain-jobs' tables (a limit is a result, never an error):
//
//	package main
//
//	import (
//		"context"
//		"fmt"
//		"log"
//		"os"
//
//		"github.com/jackc/pgx/v5/pgxpool"
//
//		"github.com/migrate-unique/migrate-unique/compat"
//		"github.com/migrate-unique/migrate-unique/layout"
//	)
//
//	// ChargeJob charges one customer's card.
//	type ChargeJob struct {
//		CustomerID int `json:"customer_id"`
//	}
//
//	// ConcurrencyKey groups the charges by customer.
//	func (j ChargeJob) ConcurrencyKey() string { return fmt.Sprintf("customer-%d", j.CustomerID) }
//
//	// ConcurrencyLimit lets two charges of one customer be active at once.
//	func (j ChargeJob) ConcurrencyLimit() (int, bool) { return 2, true }
//
//	func main() {
//		ctx := context.Background()
//		pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer pool.Close()
//		c, err := compat.NewClient(compat.Pgx(pool), layout.PlainJobs())
//		if err != nil {
//			log.Fatal(err)
//		}
//		job := ChargeJob{CustomerID: 7}
//		res, err := c.Enqueue(ctx, compat.Job{Class: "app.jobs.ChargeJob", Value: job, Args: job})
//		if err != nil {
//			log.Fatal(err) // a real failure: the limit is not an error
//		}
//		if s := res.Skipped; s != nil {
//			fmt.Printf("not enqueued: %s allows %d active jobs and is full\n", s.Group, s.Limit)
//			return
//		}
//		fmt.Println("enqueued request", res.ID, res.UUID)
//	}
//
// The package's Example functions (in its _test.go files; go test -run
// Example -v runs them) show retries, scheduled keys, slot leases, workers
// and reschedules.
package compat
