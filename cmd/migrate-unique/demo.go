package main

import "context"

// Owned by the demo issue.

func runDemo(ctx context.Context, e *env, args []string) error { return errNotImplemented }
