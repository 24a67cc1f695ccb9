package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// benches maps a benchmark's name to its runner. Each lives in its own file
// (bench_NAME.go) next to the issue that owns it.
var benches = map[string]func(ctx context.Context, e *env, args []string) error{
	"migration": runBenchMigration,
	"admission": runBenchAdmission,
	"slots":     runBenchSlots,
	"vet":       runBenchVet,
	"rewrite":   runBenchRewrite,
}

func runBench(ctx context.Context, e *env, args []string) error {
	names := make([]string, 0, len(benches))
	for n := range benches {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(e.stderr, "Usage: migrate-unique bench %s [flags]\n", strings.Join(names, "|"))
		if len(args) == 0 {
			return &exitError{code: 2}
		}
		return nil
	}
	b, ok := benches[args[0]]
	if !ok {
		return fmt.Errorf("unknown benchmark %q; choose one of %s", args[0], strings.Join(names, ", "))
	}
	return b(ctx, e, args[1:])
}
