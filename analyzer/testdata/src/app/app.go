// Package app uses the jobs package: its call sites migrate through facts.
package app

import (
	"context"
	"ext"
	"jobs"
	"tasks"
)

// Mail is a job type in another package than its interface.
type Mail struct{ To string }

func (m Mail) UniqueKey() string { return m.To } // want UniqueKey:"migrates to ConcurrencyKey" `job type Mail`

func (m Mail) Run(ctx context.Context) error { return nil }

// Wrapped promotes the migrated jobs.Keyed.UniqueKey: nothing to do.
type Wrapped struct{ jobs.Keyed }

func (w Wrapped) Run(ctx context.Context) error { return nil }

// Ticket promotes UniqueKey from a type no job package declares: it gets
// delegating methods.
type Ticket struct { // want `job type Ticket promotes UniqueKey from \*ext.Resource: add ConcurrencyKey and ConcurrencyLimit delegating to it`
	*ext.Resource
}

func (t Ticket) Run(ctx context.Context) error { return nil }

// Decorated embeds the job interface itself: its UniqueKey migrates with it.
type Decorated struct{ jobs.Job }

func use(ctx context.Context, j jobs.Job, r *jobs.Report, b *jobs.Batch[int], w Wrapped, res *ext.Resource, k ext.Keyer) string {
	key := r.UniqueKey // want `method value \*jobs.Report.UniqueKey`
	_ = jobs.Enqueue(ctx, Mail{})
	_ = jobs.Enqueue(ctx, tasks.Ping{})
	return j.UniqueKey() + key() + b.UniqueKey() + w.UniqueKey() + // want `call of jobs.Job.UniqueKey` `call of \*jobs.Batch\[int\].UniqueKey` `call of Wrapped.UniqueKey`
		res.UniqueKey() + k.UniqueKey() + Ticket{}.UniqueKey() + Decorated{}.UniqueKey() // want `call of Decorated.UniqueKey`
}

var errs = []error{jobs.ErrDuplicate} // want `rename jobs.ErrDuplicate to ErrConcurrencyLimitReached`
