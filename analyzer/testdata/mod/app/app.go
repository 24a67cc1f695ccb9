// want package:"package of the analysed module"

// Package app is in the main module; lib is not.
package app

import "example.com/lib"

// Task is the main module's own job interface.
type Task interface { // want Task:"legacy job interface \\(migrated\\)"
	UniqueKey() string // want UniqueKey:"migrates to ConcurrencyKey" `interface Task declares UniqueKey`
	Perform() error
}

// Sync implements the dependency's interface: its UniqueKey must stay.
type Sync struct{}

func (Sync) UniqueKey() string { return "sync" } // want `job type Sync implements Job, which this run does not migrate \(declared in example.com/lib\)`

func (Sync) Run() error { return nil }

// Derived promotes lib.Base.UniqueKey, which stays: it gets delegating methods.
type Derived struct { // want `job type Derived promotes UniqueKey from lib.Base: add ConcurrencyKey and ConcurrencyLimit delegating to it`
	lib.Base
}

func (d *Derived) Perform() error { return nil }

// Pooled promotes Run from a dependency's type that is no job: it is no job
// either, and its UniqueKey stays.
type Pooled struct {
	lib.Worker
	ID string
}

func (p Pooled) UniqueKey() string { return p.ID }

// Wrapped promotes Run and UniqueKey from a dependency's job type: a job of
// the dependency's kind (it implements lib.Job), which keeps UniqueKey.
type Wrapped struct { // want `job type Wrapped implements Job, which this run does not migrate \(declared in example.com/lib\)`
	lib.Keyed
}

func keys(j lib.Job, d *Derived, t Task) string {
	return j.UniqueKey() + d.UniqueKey() + t.UniqueKey() + lib.Key(Sync{}) // want `call of Task.UniqueKey`
}
