// Package vet times `go vet -vettool=migrate-unique` against plain `go vet`
// over the same generated job module, in the same run. It backs
// `migrate-unique bench vet`.
package vet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/module"
)

// Options configures Run.
type Options struct {
	// Module sizes the generated module.
	Module module.Options
	// Runs is the number of timed rounds after the warm-up.
	Runs int
	// Tool is the migrate-unique binary given to go vet -vettool.
	Tool string
	// Out receives the progress and figure lines.
	Out io.Writer
}

// Run generates the module and vets it with both tools: a warm-up round,
// then o.Runs timed rounds, each with every package of the module changed.
// It prints each round and the best of each tool, with their ratio.
func Run(ctx context.Context, o Options) error {
	tool := o.Tool
	work, mod, st, err := module.Generate("migrate-unique-bench-vet-", o.Module)
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	want := st.JobTypes + st.Interfaces + st.CallSites
	fmt.Fprintf(o.Out, "vet benchmark: %d packages, %d job types, %d findings expected, layout %s (module %s)\n", st.Packages, st.JobTypes, want, o.Module.Layout, mod)
	goCmd := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local")
		return cmd
	}
	// round vets the module with both tools. Every package depends on
	// queue: a fresh nonce there makes every vet action of the module a
	// cache miss, for both tools. The export data is built first, untimed,
	// so each timing is the analysis alone.
	round := func(toolFirst bool) (plain, withTool measure, err error) {
		nonce := fmt.Sprintf("package queue\n\n// BenchNonce changes the export data, and so every dependent package.\nconst BenchNonce = %q\n", time.Now().Format(time.RFC3339Nano))
		if err := os.WriteFile(filepath.Join(mod, "queue", "nonce.go"), []byte(nonce), 0o644); err != nil {
			return plain, withTool, err
		}
		if out, err := goCmd("list", "-export", "-deps", "-test", "./...").CombinedOutput(); err != nil {
			return plain, withTool, fmt.Errorf("build the export data: %v\n%s", err, module.LastLines(out, 20))
		}
		runPlain := func() error {
			out, m, err := timed(goCmd("vet", "./..."))
			if err != nil {
				return fmt.Errorf("plain go vet failed on the generated module: %v\n%s", err, module.LastLines(out, 20))
			}
			plain = m
			return nil
		}
		runTool := func() error {
			out, m, err := timed(goCmd("vet", "-vettool="+tool, "./..."))
			var exitErr *exec.ExitError
			if err != nil && !errors.As(err, &exitErr) {
				return fmt.Errorf("go vet -vettool: %w", err)
			}
			got := 0
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, ".go:") {
					got++
				}
			}
			if got != want {
				return fmt.Errorf("go vet -vettool reported %d findings, want %d:\n%s", got, want, module.LastLines(out, 20))
			}
			withTool = m
			return nil
		}
		order := []func() error{runPlain, runTool}
		if toolFirst {
			order = []func() error{runTool, runPlain}
		}
		for _, f := range order {
			if err := f(); err != nil {
				return plain, withTool, err
			}
		}
		return plain, withTool, nil
	}

	// The first round also analyses the standard library for whichever
	// tool has no cached facts for it (a new binary has none): shown, not
	// counted.
	plain, withTool, err := round(false)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "warm-up (standard library facts possibly uncached): go vet %v, go vet -vettool=migrate-unique %v\n", plain, withTool)
	var plains, tools []measure
	for r := 0; r < o.Runs; r++ {
		// Alternate which tool goes first, so neither always meets a
		// warmer page cache.
		plain, withTool, err := round(r%2 == 1)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "round %d: go vet %v, go vet -vettool=migrate-unique %v, wall ratio %.2f, cpu ratio %.2f\n",
			r+1, plain, withTool, ratio(withTool.wall, plain.wall), ratio(withTool.cpu, plain.cpu))
		plains, tools = append(plains, plain), append(tools, withTool)
	}
	p, t := best(plains), best(tools)
	fmt.Fprintf(o.Out, "best of %d rounds (the machine's other load only ever adds time):\n", o.Runs)
	fmt.Fprintf(o.Out, "  %-32s %v\n  %-32s %v\n  %-32s %.2f wall, %.2f cpu (target <= 1.3)\n",
		"go vet (baseline)", p, "go vet -vettool=migrate-unique", t, "ratio", ratio(t.wall, p.wall), ratio(t.cpu, p.cpu))
	return nil
}

// measure is the wall and CPU (user+system, children included) time of a
// command.
type measure struct{ wall, cpu time.Duration }

func (m measure) String() string {
	return fmt.Sprintf("%v wall / %v cpu", m.wall.Round(time.Millisecond), m.cpu.Round(time.Millisecond))
}

func timed(cmd *exec.Cmd) ([]byte, measure, error) {
	start := time.Now()
	out, err := cmd.CombinedOutput()
	m := measure{wall: time.Since(start)}
	if cmd.ProcessState != nil {
		m.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	return out, m, err
}

func best(ms []measure) measure {
	b := ms[0]
	for _, m := range ms[1:] {
		b.wall, b.cpu = min(b.wall, m.wall), min(b.cpu, m.cpu)
	}
	return b
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}
