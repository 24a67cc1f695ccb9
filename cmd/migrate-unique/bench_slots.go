package main

import "context"

func runBenchSlots(ctx context.Context, e *env, args []string) error { return errNotImplemented }
