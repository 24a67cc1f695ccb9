package main

import "context"

func runBenchRewrite(ctx context.Context, e *env, args []string) error { return errNotImplemented }
