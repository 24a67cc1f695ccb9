package demo

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/tools/txtar"

	"github.com/migrate-unique/migrate-unique/analyzer"
	"github.com/migrate-unique/migrate-unique/rewrite"
)

// exampleModule is a small shop module with legacy job types and a
// UniqueKey method that is not a job's.
//
//go:embed example.txtar
var exampleModule []byte

// ErrNoGo is returned by step 5 when the go command is not on PATH.
var ErrNoGo = errors.New("the go command is not on PATH: the rewrite loads and type-checks the module with the go toolchain; install Go (https://go.dev/dl/) or add its bin directory to PATH")

// rewriteCode is step 5.
func (d *demo) rewriteCode(ctx context.Context) error {
	if _, err := exec.LookPath("go"); err != nil {
		return ErrNoGo
	}
	dir, err := os.MkdirTemp("", "migrate-unique-demo-module-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ar := txtar.Parse(exampleModule)
	for _, f := range ar.Files {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(d.out, "  the example module %s (%d files), as `migrate-unique rewrite -diff` in its directory shows it:\n", modulePath(ar), len(ar.Files))
	a, err := analyzer.New(analyzer.Config{})
	if err != nil {
		return err
	}
	// The module needs nothing from the network or a workspace.
	env := append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	res, err := rewrite.Plan(ctx, rewrite.Options{Analyzer: a, Dir: dir, Env: env})
	if err != nil {
		return fmt.Errorf("rewrite the example module: %w", err)
	}
	if err := res.Diff(&indent{w: d.out, prefix: "    "}); err != nil {
		return err
	}
	fixed := 0
	for _, f := range res.Findings {
		if f.Fixed {
			fixed++
		}
	}
	fmt.Fprintf(d.out, "  %d findings fixed in %d file(s); cache.Entry's UniqueKey is not a job's and stays\n", fixed, len(res.Files))
	for _, f := range res.Files {
		if strings.Contains(filepath.ToSlash(f.Path), "/cache/") {
			return fmt.Errorf("the rewrite changed %s, which holds no job type", f.Path)
		}
	}
	if len(res.Files) == 0 || fixed == 0 {
		return errors.New("the rewrite changed nothing in the example module")
	}
	return nil
}

// modulePath reads the module line of the archive's go.mod.
func modulePath(ar *txtar.Archive) string {
	for _, f := range ar.Files {
		if f.Name != "go.mod" {
			continue
		}
		for _, line := range strings.Split(string(f.Data), "\n") {
			if p, ok := strings.CutPrefix(line, "module "); ok {
				return strings.TrimSpace(p)
			}
		}
	}
	return "(no go.mod)"
}
