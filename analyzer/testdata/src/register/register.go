// Package register registers jobs of a package that does not import the
// job interface: the conversions need no report (the jobs migrate in their
// own package) and the call sites follow through facts.
package register

import (
	"jobs"
	"shapes"
)

// All lists the jobs the queue runs.
var All = []jobs.Job{&shapes.ChargeJob{ID: 1}}

// KeyFuncs are method values of the jobs' keys.
var KeyFuncs = []func() string{
	(&shapes.ChargeJob{}).UniqueKey, // want `method value \*shapes.ChargeJob.UniqueKey: now ConcurrencyKey`
	shapes.Refund{}.UniqueKey,       // want `method value shapes.Refund.UniqueKey: now ConcurrencyKey`
}

// Key calls through the interface.
func Key(j jobs.Job) string { return j.UniqueKey() } // want `call of jobs.Job.UniqueKey`
