// Package lib is a dependency module: the analyzer never edits it.
package lib

// Job is the dependency's legacy job interface.
type Job interface {
	UniqueKey() string
	Run() error
}

// Base gives embedding types a key.
type Base struct{ Key string }

// UniqueKey returns the key.
func (b Base) UniqueKey() string { return b.Key }

// Key calls the interface method.
func Key(j Job) string { return j.UniqueKey() }

// Worker runs something, but it is no job: it has no UniqueKey.
type Worker struct{}

// Run runs the worker.
func (Worker) Run() error { return nil }

// Keyed is a dependency's job type: its own UniqueKey and Run.
type Keyed struct{ Key string }

// UniqueKey returns the key.
func (k Keyed) UniqueKey() string { return k.Key }

// Run runs it.
func (Keyed) Run() error { return nil }
