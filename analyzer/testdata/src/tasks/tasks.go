// Package tasks declares a job type without importing any job interface:
// it cannot tell Ping is a job, so Ping is not migrated here.
package tasks

import "context"

// Ping is a job by shape only.
type Ping struct{}

func (Ping) UniqueKey() string { return "ping" }

func (Ping) Run(ctx context.Context) error { return nil }
