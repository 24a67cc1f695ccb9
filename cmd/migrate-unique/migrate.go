package main

import (
	"context"
	"errors"
)

// Owned by the migration issue: plan, up, down, status, sql.

var errNotImplemented = errors.New("not implemented yet")

func runPlan(ctx context.Context, e *env, args []string) error   { return errNotImplemented }
func runUp(ctx context.Context, e *env, args []string) error     { return errNotImplemented }
func runDown(ctx context.Context, e *env, args []string) error   { return errNotImplemented }
func runStatus(ctx context.Context, e *env, args []string) error { return errNotImplemented }
func runSQL(ctx context.Context, e *env, args []string) error    { return errNotImplemented }
