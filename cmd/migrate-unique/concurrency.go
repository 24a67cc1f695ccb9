package main

import "context"

// Owned by the execution issue: concurrency status | release | set.

func runConcurrency(ctx context.Context, e *env, args []string) error { return errNotImplemented }
