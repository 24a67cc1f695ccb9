package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/migrate-unique/migrate-unique/internal/jobmodgen"
)

// runBenchVet times `go vet -vettool=<this binary>` against plain `go vet`
// over the same generated module, in the same run, and prints the ratio.
func runBenchVet(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "bench vet", "bench vet [-packages 50] [-jobs 2000] [-runs 1] [-dir DIR]")
	pkgs := fs.Int("packages", 50, "job packages in the generated module")
	jobs := fs.Int("jobs", 2000, "job types in the generated module")
	runs := fs.Int("runs", 1, "timed rounds after the warm-up, each with every package of the module changed")
	dir := fs.String("dir", "", "generate the module here and keep it (default: a temporary directory, removed)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: 2}
	}
	if *runs < 1 {
		return &exitError{code: 2, err: fmt.Errorf("-runs %d: want at least 1", *runs)}
	}
	tool, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary for -vettool: %w", err)
	}
	work, err := os.MkdirTemp("", "migrate-unique-bench-vet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	mod := *dir
	if mod == "" {
		mod = filepath.Join(work, "module")
	}
	st, err := jobmodgen.Generate(mod, *pkgs, *jobs)
	if err != nil {
		return err
	}
	want := st.JobTypes + st.Interfaces + st.CallSites
	fmt.Fprintf(e.stdout, "vet benchmark: %d packages, %d job types, %d findings expected (module %s)\n", st.Packages, st.JobTypes, want, mod)
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
	round := func() (plain, withTool time.Duration, err error) {
		nonce := fmt.Sprintf("package queue\n\nconst benchNonce = %q\n", time.Now().Format(time.RFC3339Nano))
		if err := os.WriteFile(filepath.Join(mod, "queue", "nonce.go"), []byte(nonce), 0o644); err != nil {
			return 0, 0, err
		}
		if out, err := goCmd("list", "-export", "-deps", "-test", "./...").CombinedOutput(); err != nil {
			return 0, 0, fmt.Errorf("build the export data: %v\n%s", err, tail(out))
		}
		start := time.Now()
		if out, err := goCmd("vet", "./...").CombinedOutput(); err != nil {
			return 0, 0, fmt.Errorf("plain go vet failed on the generated module: %v\n%s", err, tail(out))
		}
		plain = time.Since(start)

		start = time.Now()
		out, err := goCmd("vet", "-vettool="+tool, "./...").CombinedOutput()
		withTool = time.Since(start)
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			return 0, 0, fmt.Errorf("go vet -vettool: %w", err)
		}
		got := 0
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, ".go:") {
				got++
			}
		}
		if got != want {
			return 0, 0, fmt.Errorf("go vet -vettool reported %d findings, want %d:\n%s", got, want, tail(out))
		}
		return plain, withTool, nil
	}

	// The first round also analyses the standard library for whichever
	// tool has no cached facts for it (a new binary has none): shown, not
	// counted.
	plain, withTool, err := round()
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "warm-up (standard library facts possibly uncached): go vet %v, go vet -vettool=migrate-unique %v\n",
		plain.Round(time.Millisecond), withTool.Round(time.Millisecond))
	var plainTotal, toolTotal time.Duration
	for r := 0; r < *runs; r++ {
		plain, withTool, err := round()
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "round %d: go vet %v, go vet -vettool=migrate-unique %v, ratio %.2f\n",
			r+1, plain.Round(time.Millisecond), withTool.Round(time.Millisecond), float64(withTool)/float64(plain))
		plainTotal += plain
		toolTotal += withTool
	}
	n := time.Duration(*runs)
	fmt.Fprintf(e.stdout, "%-34s %v\n%-34s %v\n%-34s %.2f (target <= 1.3)\n",
		"go vet (baseline)", (plainTotal / n).Round(time.Millisecond),
		"go vet -vettool=migrate-unique", (toolTotal / n).Round(time.Millisecond),
		"ratio", float64(toolTotal)/float64(plainTotal))
	return nil
}

// tail keeps the last lines of a command's output for an error message.
func tail(out []byte) string {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
