package layout_test

import (
	"errors"
	"fmt"

	"github.com/migrate-unique/migrate-unique/layout"
)

// A single-table queue: the names left empty take their defaults when the
// layout is resolved, and every identifier is quoted.
func ExampleLayout_Resolve() {
	l := layout.Layout{Schema: "Billing", JobsTable: "jobs", ActiveStates: []string{"queued", "running"}}
	r, err := l.Resolve()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Table(r.JobsTable))
	fmt.Println(r.ClassColumn, r.StateColumn, r.IDColumn, r.PendingState())

	_, err = layout.Layout{JobsTable: "jobs"}.Resolve()
	fmt.Println(errors.Is(err, layout.ErrInvalid), err)
	// Output:
	// "Billing"."jobs"
	// job_class state id queued
	// true invalid layout: a single-table layout needs --active-states, for example pending,running
}

// Plain-jobs' own three tables in schema public.
func ExamplePlainJobs() {
	r, err := layout.PlainJobs().Resolve()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range r.Tables() {
		fmt.Println(r.Table(t))
	}
	// Output:
	// "public"."plainjobs_jobrequest"
	// "public"."plainjobs_jobprocess"
	// "public"."plainjobs_jobresult"
}
