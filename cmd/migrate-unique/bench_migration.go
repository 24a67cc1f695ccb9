package main

import "context"

func runBenchMigration(ctx context.Context, e *env, args []string) error { return errNotImplemented }
