package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/migrate-unique/migrate-unique/internal/jobmodgen"
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
	if st, err = jobmodgen.Generate(mod, *m.packages, *m.jobs, *m.layout); err != nil {
		os.RemoveAll(work)
		return "", "", st, err
	}
	return work, mod, st, nil
}
