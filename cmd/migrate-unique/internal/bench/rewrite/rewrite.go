// Package rewrite times `migrate-unique rewrite` over a generated job
// module next to `go build ./...` of the same module, in the same run, and
// checks the rewrite's result. It backs `migrate-unique bench rewrite`.
package rewrite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/module"
)

// MeasureArg makes `bench rewrite` run one command and record its wall time
// and the peak resident memory of its largest process into a file (see
// Measure). Each measured command gets a measuring process of its own, so
// the kernel's per-children peak covers that command's process tree only.
const MeasureArg = "-measure-into"

// measurement is what one measured command cost.
type measurement = Measurement

// Measurement is what one measured command cost.
type Measurement struct {
	Wall     time.Duration
	CPU      time.Duration // user + system, the command's tree
	PeakKiB  int64         // largest process of the command's tree
	ExitCode int
}

// RunMeasured runs argv in dir under a measuring copy of self (self bench
// rewrite MeasureArg), so that the peak memory read is that command's
// tree's only, and returns what it cost and its combined output. A
// non-zero exit of the command is no error: it is in ExitCode.
func RunMeasured(ctx context.Context, self, dir string, env []string, resultFile string, argv ...string) (Measurement, []byte, error) {
	cmd := exec.CommandContext(ctx, self, append([]string{"bench", "rewrite", MeasureArg, resultFile, "--"}, argv...)...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Measurement{}, out, fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, module.LastLines(out, 20))
	}
	var m Measurement
	b, err := os.ReadFile(resultFile)
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	return m, out, err
}

// Options configures Run.
type Options struct {
	// Module sizes the generated module.
	Module module.Options
	// Self is the migrate-unique binary: it runs the rewrite, and measures
	// each command when called with MeasureArg.
	Self string
	// Out receives the progress and figure lines.
	Out io.Writer
}

// Run times `migrate-unique rewrite -w` over a generated module next to
// `go build ./...` of the same module (every package recompiled, the
// standard library cached), in the same run, and checks the rewrite's
// result.
func Run(ctx context.Context, o Options) error {
	self := o.Self
	work, mod, st, err := module.Generate("migrate-unique-bench-rewrite-", o.Module)
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	fmt.Fprintf(o.Out, "rewrite benchmark: %d packages, %d job types, %d call sites, layout %s (module %s)\n", st.Packages, st.JobTypes, st.CallSites, o.Module.Layout, mod)

	goEnv := append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local",
		"GOCACHE="+filepath.Join(work, "cache"))
	// measure runs a command in the module under a measuring copy of this
	// binary.
	measure := func(name string, argv ...string) (measurement, []byte, error) {
		return RunMeasured(ctx, self, mod, goEnv, filepath.Join(work, name+".json"), argv...)
	}

	// The baseline is the build a user waits for after changing every
	// package (a change to a package every other one imports, where there
	// is one): the standard library (with what test binaries link, as
	// after any go test) is in a private build cache, warmed untimed, and a
	// new file in every package makes every package of the module
	// recompile.
	warm := exec.CommandContext(ctx, "go", "build", "./...", "testing", "testing/internal/testdeps")
	warm.Dir, warm.Env = mod, goEnv
	if out, err := warm.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./... of the generated module failed: %v\n%s", err, module.LastLines(out, 20))
	}
	if err := module.Touch(mod, "benchNonce"); err != nil {
		return err
	}
	build, out, err := measure("build", "go", "build", "./...")
	if err != nil {
		return err
	}
	if build.ExitCode != 0 {
		return fmt.Errorf("go build ./... of the generated module failed:\n%s", module.LastLines(out, 20))
	}
	// The first rewrite also has the go command compile the module's test
	// packages for their export data (go build does not build tests); the
	// second finds them in the cache, as after a go test or go vet of the
	// same code.
	diff, out, err := measure("diff", self, "rewrite", "-diff", "./...")
	if err != nil {
		return err
	}
	if diff.ExitCode != 1 {
		return fmt.Errorf("rewrite -diff exited %d, want 1 (a diff):\n%s", diff.ExitCode, module.LastLines(out, 20))
	}
	rw, out, err := measure("rewrite", self, "rewrite", "-w", "./...")
	if err != nil {
		return err
	}
	if rw.ExitCode != 0 {
		return fmt.Errorf("rewrite -w failed on the generated module:\n%s", module.LastLines(out, 20))
	}
	if want := fmt.Sprintf("job types migrated: %d\n", st.JobTypes); !bytes.Contains(out, []byte(want)) {
		return fmt.Errorf("rewrite -w did not report %q:\n%s", strings.TrimSpace(want), module.LastLines(out, 20))
	}
	if want := fmt.Sprintf("call sites renamed: %d\n", st.CallSites); !bytes.Contains(out, []byte(want)) {
		return fmt.Errorf("rewrite -w did not report %q:\n%s", strings.TrimSpace(want), module.LastLines(out, 20))
	}
	// The result must build and be a fixed point; neither is timed.
	check := exec.CommandContext(ctx, "go", "vet", "./...")
	check.Dir, check.Env = mod, goEnv
	if out, err := check.CombinedOutput(); err != nil {
		return fmt.Errorf("the rewritten module does not vet: %v\n%s", err, module.LastLines(out, 20))
	}
	again := exec.CommandContext(ctx, self, "rewrite", "-diff", "./...")
	again.Dir, again.Env = mod, check.Env
	if out, err := again.CombinedOutput(); err != nil {
		return fmt.Errorf("a second rewrite -diff is not empty: %v\n%s", err, module.LastLines(out, 20))
	}

	row := func(name string, m measurement) {
		fmt.Fprintf(o.Out, "%-46s %8v %7d MiB %7.2f %7.2f\n", name, m.Wall.Round(10*time.Millisecond), m.PeakKiB/1024,
			float64(m.Wall)/float64(build.Wall), float64(m.PeakKiB)/float64(build.PeakKiB))
	}
	fmt.Fprintf(o.Out, "%-46s %8s %11s %7s %7s\n", "", "wall", "peak memory", "x wall", "x mem")
	row("go build ./... (baseline)", build)
	row("rewrite -diff ./... (first: tests compiled)", diff)
	row("rewrite -w ./... (second: export data cached)", rw)
	fmt.Fprintf(o.Out, "checked: %d job types and %d call sites migrated, the module vets, a second rewrite -diff is empty\n", st.JobTypes, st.CallSites)
	return nil
}

// ErrMeasureUsage is returned by Measure for arguments that are not
// `RESULTFILE -- command [args]`.
var ErrMeasureUsage = errors.New("usage: bench rewrite " + MeasureArg + " RESULTFILE -- command [args]")

// Measure runs `RESULTFILE -- command args...`, passing its output
// through to stdout and stderr, and writes a measurement to RESULTFILE.
func Measure(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	if len(args) < 3 || args[1] != "--" {
		return ErrMeasureUsage
	}
	cmd := exec.CommandContext(ctx, args[2], args[3:]...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	start := time.Now()
	err := cmd.Run()
	m := measurement{Wall: time.Since(start)}
	if cmd.ProcessState != nil {
		m.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		m.ExitCode = exitErr.ExitCode()
	case err != nil:
		return err
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return fmt.Errorf("read the children's peak memory: %w", err)
	}
	m.PeakKiB = ru.Maxrss // KiB on Linux
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(args[0], b, 0o644)
}
