// Package module prepares the generated job module that the code
// benchmarks (vet, rewrite) run the go command in, and reports a failed
// command's output briefly.
package module

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/migrate-unique/migrate-unique/internal/jobmodgen"
)

// Options sizes the generated module and says where it goes.
type Options struct {
	// Packages and Jobs are the job packages and job types generated.
	Packages, Jobs int
	// Layout says whether the job packages import the job interface.
	Layout jobmodgen.Layout
	// Dir, when set, receives the module and keeps it; by default it goes
	// inside the work directory.
	Dir string
}

// Generate makes a work directory (the caller removes it) whose name
// starts with prefix, and generates the module in o.Dir or, by default,
// inside the work directory.
func Generate(prefix string, o Options) (work, mod string, st jobmodgen.Stats, err error) {
	work, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", "", st, err
	}
	mod = o.Dir
	if mod == "" {
		mod = filepath.Join(work, "module")
	}
	if st, err = jobmodgen.Generate(mod, o.Packages, o.Jobs, o.Layout); err != nil {
		os.RemoveAll(work)
		return "", "", st, err
	}
	return work, mod, st, nil
}

// LastLines returns at most n last lines of out.
func LastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
