package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	benchdashboard "github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/dashboard"
	benchlint "github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/lint"
	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/module"
	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/rewrite"
	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/slots"
	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/vet"
	"github.com/migrate-unique/migrate-unique/internal/jobmodgen"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
)

// benches maps a benchmark's name to its runner and what it measures. The
// runners here only parse flags and print; each benchmark's measuring code
// is a package of its own under internal/bench.
var benches = map[string]struct {
	run     func(ctx context.Context, e *env, args []string) error
	summary string
}{
	"migration": {runBenchMigration, "up next to a naive migration (plain CREATE INDEX, RENAME, DROP) on a large queue while writers go on"},
	"admission": {runBenchAdmission, "compat's enqueue on a large queue and under contention, each next to a same-run baseline"},
	"slots":     {runBenchSlots, "slot leases: many workers sharing a group's slots, next to one worker alone"},
	"vet":       {runBenchVet, "go vet -vettool=migrate-unique over a generated job module, next to plain go vet"},
	"rewrite":   {runBenchRewrite, "rewrite over a generated legacy job module"},
	"lint":      {runBenchLint, "lint and rewrite -diff over a job module, next to go vet -vettool"},
	"dashboard": {runBenchDashboard, "concurrency serve's groups page on 10,000 groups, next to status --json's read"},
}

func runBench(ctx context.Context, e *env, args []string) error {
	names := make([]string, 0, len(benches))
	for n := range benches {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(args) == 0 || isHelp(args[0]) {
		w := e.stderr // as every command's -h
		fmt.Fprintf(w, "Usage: migrate-unique bench NAME [flags]\n\nRuns one benchmark and prints each figure beside its same-run baseline\n(docs/performance.md holds the figures and how they were taken).\n\nBenchmarks:\n")
		for _, n := range names {
			fmt.Fprintf(w, "  %-10s %s\n", n, benches[n].summary)
		}
		fmt.Fprintf(w, "\nRun 'migrate-unique bench NAME -h' for a benchmark's flags.\n")
		if len(args) == 0 {
			return &exitError{code: 2}
		}
		return nil
	}
	b, ok := benches[args[0]]
	if !ok {
		return &exitError{code: 2, err: fmt.Errorf("unknown benchmark %q; choose one of %s", args[0], strings.Join(names, ", "))}
	}
	return b.run(ctx, e, args[1:])
}

// moduleFlags are the flags of a benchmark over a generated job module
// (bench vet, bench rewrite).
type moduleFlags struct {
	packages, jobs *int
	dir            *string
	layout         *jobmodgen.Layout
}

func addModuleFlags(fs *flag.FlagSet) moduleFlags {
	m := moduleFlags{
		packages: fs.Int("packages", 50, "job packages in the generated module"),
		jobs:     fs.Int("jobs", 2000, "job types in the generated module"),
		dir:      fs.String("dir", "", "generate the module here and keep it (default: a temporary directory, removed)"),
		layout:   new(jobmodgen.Layout),
	}
	fs.Func("layout", "`importing` (every job package imports the job interface, the default) or registered (none does; a registry package converts the jobs)", func(v string) error {
		switch v {
		case "importing":
			*m.layout = jobmodgen.Importing
		case "registered":
			*m.layout = jobmodgen.Registered
		default:
			return fmt.Errorf("%q: want importing or registered", v)
		}
		return nil
	})
	return m
}

func (m moduleFlags) options() module.Options {
	return module.Options{Packages: *m.packages, Jobs: *m.jobs, Layout: *m.layout, Dir: *m.dir}
}

// runBenchVet times `go vet -vettool=<this binary>` against plain `go vet`
// over the same generated module, in the same run, and prints the ratio.
func runBenchVet(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "bench vet", "bench vet [-packages 50] [-jobs 2000] [-layout importing|registered] [-runs 3] [-dir DIR]")
	gen := addModuleFlags(fs)
	runs := fs.Int("runs", 3, "timed rounds after the warm-up, each with every package of the module changed")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *runs < 1 {
		return &exitError{code: 2, err: fmt.Errorf("-runs %d: want at least 1", *runs)}
	}
	tool, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary for -vettool: %w", err)
	}
	return vet.Run(ctx, vet.Options{Module: gen.options(), Runs: *runs, Tool: tool, Out: e.stdout})
}

// runBenchLint measures lint against go vet -vettool and rewrite -diff
// over the same module, in the same run.
func runBenchLint(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "bench lint", "bench lint [-module DIR | -packages 50 -jobs 2000 -layout importing|registered] [-runs 3] [-tool BINARY]")
	gen := addModuleFlags(fs)
	dir := fs.String("module", "", "measure on this existing module, or go.work workspace (its root directory; copied first, never changed) instead of a generated one")
	tool := fs.String("tool", "", "measure this migrate-unique `binary` (an older build, for figures before a change) instead of this one")
	runs := fs.Int("runs", 3, "timed rounds after the warm-up, each with every package of the module changed")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *runs < 1 {
		return &exitError{code: 2, err: fmt.Errorf("-runs %d: want at least 1", *runs)}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary: %w", err)
	}
	return benchlint.Run(ctx, benchlint.Options{Module: gen.options(), Dir: *dir, Runs: *runs, Self: self, Tool: *tool, Out: e.stdout})
}

// runBenchRewrite times `migrate-unique rewrite -w` over a generated module
// next to `go build ./...` of the same module; with rewrite.MeasureArg it
// is the measuring process of one command.
func runBenchRewrite(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && args[0] == rewrite.MeasureArg {
		err := rewrite.Measure(ctx, e.stdout, e.stderr, args[1:])
		if errors.Is(err, rewrite.ErrMeasureUsage) {
			return &exitError{code: 2, err: err}
		}
		return err
	}
	fs := newFlagSet(e, "bench rewrite", "bench rewrite [-packages 50] [-jobs 2000] [-layout importing|registered] [-dir DIR]")
	gen := addModuleFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary: %w", err)
	}
	return rewrite.Run(ctx, rewrite.Options{Module: gen.options(), Self: self, Out: e.stdout})
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

const benchDashboardUsage = `bench dashboard [--database URL] [--groups 10000] [--jobs 100000] [--runs 10] [--json]

Measures the groups page of 'concurrency serve' in a scratch schema of its
own (created and dropped): --groups groups with 1 to 3 slot rows each (some
expired, a tenth with an override, a fifth with rescheduled jobs) and --jobs
queued jobs over them (a twentieth as many running). It prints the median
and least time of GET / (the groups page) and GET /api/groups (its refresh),
with the CPU time of this process and of the PostgreSQL backend per request,
beside the baseline of the same run: the read 'concurrency status --json'
makes of the same data; then the page's ratios to the baseline (median wall
time, CPU time), its server CPU time against the goal of 300 ms, and the
load average.`

func runBenchDashboard(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "bench dashboard", benchDashboardUsage)
	database := fs.String("database", "", databaseFlagUsage)
	groups := fs.Int("groups", 10_000, "groups in the queue, each with slot rows")
	jobs := fs.Int("jobs", 100_000, "queued jobs, spread over the groups")
	runs := fs.Int("runs", 10, "timed requests of each kind, after a warm-up")
	asJSON := fs.Bool("json", false, "end with one JSON object of the figures")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return &exitError{code: 2, err: fmt.Errorf("unexpected argument %q; every setting is a flag (see -h)", fs.Arg(0))}
	case *groups < 1 || *jobs < 0:
		return &exitError{code: 2, err: fmt.Errorf("--groups %d --jobs %d: want at least 1 group and 0 or more jobs", *groups, *jobs)}
	case *runs < 1:
		return &exitError{code: 2, err: fmt.Errorf("--runs %d: want at least 1", *runs)}
	}
	url, err := pgurl.Resolve(*database)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	res, err := benchdashboard.Run(ctx, url, benchdashboard.Options{Groups: *groups, Jobs: *jobs, Runs: *runs, Out: e.stdout})
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
	return nil
}
