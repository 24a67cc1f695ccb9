package main

import "context"

// Owned by the rewrite issue.

func runRewrite(ctx context.Context, e *env, args []string) error { return errNotImplemented }
