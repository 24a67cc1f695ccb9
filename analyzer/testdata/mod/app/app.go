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

func keys(j lib.Job, d *Derived, t Task) string {
	return j.UniqueKey() + d.UniqueKey() + t.UniqueKey() + lib.Key(Sync{}) // want `call of Task.UniqueKey`
}
