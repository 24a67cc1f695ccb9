// Package lint measures `migrate-unique lint` against `go vet -vettool` and
// `migrate-unique rewrite -diff` over the same module, in the same run:
// CPU time and peak memory of each, as a ratio to go vet -vettool. It backs
// `migrate-unique bench lint`.
package lint

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/module"
	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/rewrite"
	mu "github.com/migrate-unique/migrate-unique/rewrite"
)

// Options configures Run.
type Options struct {
	// Module sizes the generated module, when Dir is empty.
	Module module.Options
	// Dir is an existing module to measure on (copied first, never
	// changed); empty means a generated job module.
	Dir string
	// Runs is the number of timed rounds.
	Runs int
	// Self is the migrate-unique binary: the measuring process of each
	// command, and the vet tool, the linter and the rewriter unless Tool
	// is set.
	Self string
	// Tool is the migrate-unique binary measured (an older build, for
	// figures before and after a change); empty means Self.
	Tool string
	// Out receives the progress and figure lines.
	Out io.Writer
}

// tool is one measured command.
type tool struct {
	name string
	argv []string
	best rewrite.Measurement
	exit int
}

// Run copies (or generates) the module, then runs o.Runs rounds; each
// makes every package of the module a cache miss for go vet (a fresh
// constant in every package), builds the export data untimed, and runs
// each command once under its own measuring process. It prints every
// round and the best of each command (other load on the machine only ever
// adds time), as a ratio to go vet -vettool.
func Run(ctx context.Context, o Options) error {
	work, err := os.MkdirTemp("", "migrate-unique-bench-lint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	mod := filepath.Join(work, "mod")
	what := ""
	if o.Dir != "" {
		if err := copyModule(o.Dir, mod); err != nil {
			return err
		}
		what = "module " + o.Dir
	} else {
		w, m, st, err := module.Generate("migrate-unique-bench-lint-", o.Module)
		if err != nil {
			return err
		}
		defer os.RemoveAll(w)
		mod = m
		what = fmt.Sprintf("generated module: %d packages, %d job types, layout %s", st.Packages, st.JobTypes, o.Module.Layout)
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
	if _, err := os.Stat(filepath.Join(mod, "go.work")); err == nil {
		// A workspace: every module it uses, in workspace mode (which
		// refuses -mod=mod).
		env = append(os.Environ(), "GOFLAGS=", "GOWORK=", "GOTOOLCHAIN=local")
		what += " (go.work workspace)"
	}
	target, err := mu.Resolve(ctx, mod, env, nil)
	if err != nil {
		return err
	}
	patterns := target.Whole
	goCmd := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir, cmd.Env = mod, env
		return cmd
	}
	list, err := goCmd(append([]string{"list", "-f", "{{.Dir}}\t{{.Name}}"}, patterns...)...).Output()
	if err != nil {
		return fmt.Errorf("list the module's packages: %w", err)
	}
	var dirs [][2]string
	sc := bufio.NewScanner(bytes.NewReader(list))
	for sc.Scan() {
		if d, name, ok := strings.Cut(sc.Text(), "\t"); ok {
			dirs = append(dirs, [2]string{d, name})
		}
	}
	deps, err := goCmd(append([]string{"list", "-deps", "-test", "-f", "{{.ImportPath}}"}, patterns...)...).Output()
	if err != nil {
		return fmt.Errorf("list the module's dependencies: %w", err)
	}
	fmt.Fprintf(o.Out, "lint benchmark: %s; %d packages, %d with their dependencies and tests\n", what, len(dirs), bytes.Count(deps, []byte("\n")))

	measured := o.Self
	if o.Tool != "" {
		measured = o.Tool
		what += ", binary " + o.Tool
	}
	tools := []*tool{
		{name: "go vet -vettool=migrate-unique (baseline)", argv: append([]string{"go", "vet", "-vettool=" + measured}, patterns...)},
		{name: "migrate-unique lint", argv: append([]string{measured, "lint"}, patterns...)},
		{name: "migrate-unique rewrite -diff", argv: append([]string{measured, "rewrite", "-diff"}, patterns...)},
		{name: "go vet (its own analyzers)", argv: append([]string{"go", "vet"}, patterns...)},
	}
	for r := 0; r <= o.Runs; r++ {
		stamp := time.Now().Format(time.RFC3339Nano)
		for _, d := range dirs {
			src := fmt.Sprintf("package %s\n\n// benchLintNonce changes with every round of the benchmark.\nconst benchLintNonce = %q\n", d[1], stamp)
			if err := os.WriteFile(filepath.Join(d[0], "zz_bench_lint_nonce.go"), []byte(src), 0o644); err != nil {
				return err
			}
		}
		if out, err := goCmd(append([]string{"list", "-export", "-deps", "-test"}, patterns...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("build the export data: %v\n%s", err, module.LastLines(out, 20))
		}
		line := fmt.Sprintf("round %d:", r)
		if r == 0 {
			line = "warm-up (not counted):"
		}
		// Rotate the order, so that no command always meets a warmer page
		// cache.
		for i := range tools {
			t := tools[(i+r)%len(tools)]
			m, out, err := rewrite.RunMeasured(ctx, o.Self, mod, env, filepath.Join(work, "m.json"), t.argv...)
			if err != nil {
				return err
			}
			if m.ExitCode > 1 {
				return fmt.Errorf("%s exited %d:\n%s", strings.Join(t.argv, " "), m.ExitCode, module.LastLines(out, 20))
			}
			if r == 0 {
				t.exit = m.ExitCode
			} else {
				t.best.Wall = minPositive(t.best.Wall, m.Wall)
				t.best.CPU = minPositive(t.best.CPU, m.CPU)
				t.best.PeakKiB = minPositive(t.best.PeakKiB, m.PeakKiB)
			}
			line += fmt.Sprintf(" %s %v/%v/%dMiB;", shortName(t.name), m.Wall.Round(10*time.Millisecond), m.CPU.Round(10*time.Millisecond), m.PeakKiB/1024)
		}
		fmt.Fprintln(o.Out, strings.TrimSuffix(line, ";"))
	}
	vet, lint := tools[0], tools[1]
	if (vet.exit == 0) != (lint.exit == 0) {
		return fmt.Errorf("lint exited %d and go vet -vettool %d: they must agree", lint.exit, vet.exit)
	}
	fmt.Fprintf(o.Out, "load average before the summary: %s\n", loadAverage())
	fmt.Fprintf(o.Out, "best of %d rounds (wall, cpu = user+system of the command's processes, peak = its largest process):\n", o.Runs)
	fmt.Fprintf(o.Out, "  %-44s %9s %9s %9s %7s %7s\n", "", "wall", "cpu", "peak", "x cpu", "x peak")
	for _, t := range tools {
		fmt.Fprintf(o.Out, "  %-44s %9v %9v %6d MiB %7.2f %7.2f\n", t.name, t.best.Wall.Round(10*time.Millisecond), t.best.CPU.Round(10*time.Millisecond),
			t.best.PeakKiB/1024, ratio(float64(t.best.CPU), float64(vet.best.CPU)), ratio(float64(t.best.PeakKiB), float64(vet.best.PeakKiB)))
	}
	for _, t := range tools[1:3] {
		fmt.Fprintf(o.Out, "%s against go vet -vettool: %.2fx cpu, %.2fx peak memory (targets <= %.1f cpu, <= %.1f peak); exit %d\n",
			strings.TrimPrefix(t.name, "migrate-unique "), ratio(float64(t.best.CPU), float64(vet.best.CPU)), ratio(float64(t.best.PeakKiB), float64(vet.best.PeakKiB)),
			TargetCPU, TargetPeak, t.exit)
	}
	return nil
}

// The goals of lint and rewrite -diff against go vet -vettool on the same
// module (issue 33): CPU and peak memory as ratios.
const (
	TargetCPU  = 1.0
	TargetPeak = 1.3
)

// loadAverage reads the machine's load average (Linux), or says it cannot.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func shortName(name string) string {
	switch {
	case strings.HasPrefix(name, "go vet -vettool"):
		return "vet-tool"
	case strings.HasPrefix(name, "go vet"):
		return "go-vet"
	case strings.Contains(name, "rewrite"):
		return "rewrite"
	}
	return "lint"
}

func minPositive[T time.Duration | int64](a, b T) T {
	if a <= 0 || b < a {
		return b
	}
	return a
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// copyModule copies a module's directory tree (without .git and other
// dot-directories) so that the benchmark's nonce files never touch it.
func copyModule(from, to string) error {
	from, err := filepath.Abs(from)
	if err != nil {
		return err
	}
	_, errMod := os.Stat(filepath.Join(from, "go.mod"))
	_, errWork := os.Stat(filepath.Join(from, "go.work"))
	if errMod != nil && errWork != nil {
		return fmt.Errorf("%s: no go.mod there; -module takes a module's root directory (or a go.work workspace's)", from)
	}
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		target := filepath.Join(to, rel)
		if d.IsDir() {
			if path != from && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}
