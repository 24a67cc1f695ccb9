package main

import "context"

func runBenchAdmission(ctx context.Context, e *env, args []string) error { return errNotImplemented }
