package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/slots"
	"github.com/migrate-unique/migrate-unique/internal/jobmodgen"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
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
		return &exitError{code: 2, err: fmt.Errorf("unknown benchmark %q; choose one of %s", args[0], strings.Join(names, ", "))}
	}
	return b(ctx, e, args[1:])
}

// moduleFlags are the flags of a benchmark over a generated job module
// (bench vet, bench rewrite).
type moduleFlags struct {
	packages, jobs *int
	dir            *string
}

func addModuleFlags(fs *flag.FlagSet) moduleFlags {
	return moduleFlags{
		packages: fs.Int("packages", 50, "job packages in the generated module"),
		jobs:     fs.Int("jobs", 2000, "job types in the generated module"),
		dir:      fs.String("dir", "", "generate the module here and keep it (default: a temporary directory, removed)"),
	}
}

// generate makes a work directory (the caller removes it) and generates the
// module in -dir or, by default, inside the work directory.
func (m moduleFlags) generate(prefix string) (work, mod string, st jobmodgen.Stats, err error) {
	work, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", "", st, err
	}
	mod = *m.dir
	if mod == "" {
		mod = filepath.Join(work, "module")
	}
	if st, err = jobmodgen.Generate(mod, *m.packages, *m.jobs); err != nil {
		os.RemoveAll(work)
		return "", "", st, err
	}
	return work, mod, st, nil
}

const benchSlotsUsage = `bench slots [--database URL] [--workers 32] [--limit 10] [--duration 5s] [--json]

Measures slot lease throughput in a scratch schema of its own (created and
dropped): acquire+release pairs per second with one worker (the baseline),
then with --workers workers on separate connections sharing one group of
--limit slots, while an observer samples the slot table and some workers
abandon short leases and release them after another holder took the slot.
over_limit_observed and stale_releases_accepted must be 0.`

func runBenchSlots(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "bench slots", benchSlotsUsage)
	database := fs.String("database", "", databaseFlagUsage)
	workers := fs.Int("workers", 32, "concurrent workers, each on its own connection")
	limit := fs.Int("limit", 10, "the group's limit")
	duration := fs.Duration("duration", 5*time.Second, "how long each phase (single worker, then all workers) runs")
	asJSON := fs.Bool("json", false, "end with one JSON object of the figures")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return &exitError{code: 2, err: fmt.Errorf("unexpected argument %q; every setting is a flag (see -h)", fs.Arg(0))}
	case *workers < 1:
		return &exitError{code: 2, err: fmt.Errorf("--workers %d: want at least 1", *workers)}
	case *limit < 1:
		return &exitError{code: 2, err: fmt.Errorf("--limit %d: want at least 1", *limit)}
	case *duration <= 0:
		return &exitError{code: 2, err: fmt.Errorf("--duration %v: want a positive duration, e.g. 5s", *duration)}
	}
	url, err := pgurl.Resolve(*database)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	res, err := slots.Run(ctx, url, slots.Options{Workers: *workers, Limit: *limit, Duration: *duration, Out: e.stdout})
	if err != nil {
		return err
	}
	if *asJSON {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s\n", b)
	}
	if res.OverLimitObserved != 0 || res.StaleReleasesAccepted != 0 {
		return fmt.Errorf("the slot invariants were broken: %d samples over the limit, %d stale releases accepted", res.OverLimitObserved, res.StaleReleasesAccepted)
	}
	return nil
}
