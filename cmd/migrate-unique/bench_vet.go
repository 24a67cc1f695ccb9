package main

import "context"

func runBenchVet(ctx context.Context, e *env, args []string) error { return errNotImplemented }
