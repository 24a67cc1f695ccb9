// Package tasks declares a job type without importing any job interface:
// its method set (UniqueKey and a run method) makes it a job here, so it is
// migrated in its own package, as the whole-module rewrite does.
package tasks

import "context"

// Ping is a job by shape only.
type Ping struct{}

func (Ping) UniqueKey() string { return "ping" } // want UniqueKey:"migrates to ConcurrencyKey" `job type Ping: rename UniqueKey to ConcurrencyKey`

func (Ping) Run(ctx context.Context) error { return nil }
