package main

import "context"

// Owned by the analyzer issue: lint, and the go vet / go fix tool protocol.

// vetToolProtocol reports whether the go command invoked this binary as a
// -vettool or -fixtool (-V=full, -flags, or a .cfg argument).
func vetToolProtocol(args []string) bool { return false }

// runVetTool hands the process to the unitchecker driver.
func runVetTool() {}

func runLint(ctx context.Context, e *env, args []string) error { return errNotImplemented }
