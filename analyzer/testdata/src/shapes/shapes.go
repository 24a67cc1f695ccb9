// Package shapes holds jobs that never import a job interface: the queue
// sees them through Go's structural typing, registered in package register.
package shapes

import (
	"context"
	"strconv"
)

// ChargeJob is a job by its method set: UniqueKey and Run.
type ChargeJob struct{ ID int }

// UniqueKey keys the charge by its ID.
func (j *ChargeJob) UniqueKey() string { return "charge:" + strconv.Itoa(j.ID) } // want UniqueKey:"migrates to ConcurrencyKey" `job type ChargeJob: rename UniqueKey`

func (j *ChargeJob) Run(ctx context.Context) error { return nil }

// Refund is a job by Perform.
type Refund struct{ Account string }

func (r Refund) UniqueKey() string { return r.Account } // want UniqueKey:"migrates to ConcurrencyKey" `job type Refund: rename UniqueKey`

func (r Refund) Perform() error { return nil }

// keyedBase is embedded by jobs only: its UniqueKey migrates where it is
// declared.
type keyedBase struct{ key string }

func (b keyedBase) UniqueKey() string { return b.key } // want UniqueKey:"migrates to ConcurrencyKey" `job type Sweep promotes UniqueKey from keyedBase: rename it`

// Sweep promotes keyedBase's UniqueKey.
type Sweep struct{ keyedBase }

func (Sweep) Execute(ctx context.Context) error { return nil }

// base is embedded by a job and by a type that is no job: it keeps its
// UniqueKey, and the job gets methods of its own.
type base struct{ tenant string }

func (b *base) UniqueKey() string { return b.tenant }

// Invoice is a job through base.
type Invoice struct { // want `job type Invoice promotes UniqueKey from base, which auditRow also embeds and which is no job: add ConcurrencyKey and ConcurrencyLimit delegating to it`
	base
	Number int
}

func (i *Invoice) Handle(ctx context.Context) error { return nil }

// auditRow embeds base but runs nothing: not a job.
type auditRow struct {
	base
	line string
}

// Migrated has the new methods already (and a leftover UniqueKey): done.
type Migrated struct{}

func (Migrated) UniqueKey() string { return "m" }

func (Migrated) ConcurrencyKey() string { return "m" }

func (Migrated) ConcurrencyLimit() (int, bool) { return 1, true }

func (Migrated) Run(ctx context.Context) error { return nil }

// Keys calls the keys of its own jobs and of the types that are no jobs.
func Keys(a auditRow) []string {
	return []string{(&ChargeJob{}).UniqueKey(), Refund{}.UniqueKey(), Sweep{}.UniqueKey(), (&Invoice{}).UniqueKey(), a.UniqueKey()} // want `call of \*ChargeJob.UniqueKey` `call of Refund.UniqueKey` `call of Sweep.UniqueKey`
}
