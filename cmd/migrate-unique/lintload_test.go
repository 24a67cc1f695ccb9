package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"

	"github.com/migrate-unique/migrate-unique/analyzer"
	"github.com/migrate-unique/migrate-unique/rewrite"
)

// TestLintLeanAgreesWithFull: lint's one-package-at-a-time load and
// analysis (lintLean) takes every job module of testdata/jobmodules and this
// repository itself (packages with in-package tests, a job model over
// many packages, findings), and finds exactly what the go/packages load and
// the checker (lintFull) find, with the same messages and fixes.
func TestLintLeanAgreesWithFull(t *testing.T) {
	names, err := filepath.Glob(filepath.Join("testdata", "jobmodules", "*.txtar"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no job modules: %v", err)
	}
	type subject struct {
		name, dir string
		env       []string
		patterns  []string
	}
	var subjects []subject
	for _, name := range names {
		m := readJobModule(t, filepath.Base(name))
		env := append(os.Environ(), "GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GOWORK=off")
		if m.workspace {
			env = append(os.Environ(), "GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=", "GOWORK=")
		}
		subjects = append(subjects, subject{filepath.Base(name), filepath.Join(m.extract(t), m.root), env, m.patterns})
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	subjects = append(subjects, subject{"this repository", root, append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off"), []string{"./..."}})

	for _, s := range subjects {
		cfg := packages.Config{Dir: s.dir, Env: s.env, Mode: lintMode, Tests: true, ParseFile: rewrite.ParseFile}
		lean, ok, err := lintLean(analyzer.Config{}, cfg, s.patterns)
		if err != nil || !ok {
			t.Fatalf("%s: lintLean: ok %v, %v: want the lean path taken", s.name, ok, err)
		}
		full, err := lintFull(analyzer.Config{}, &cfg, s.dir, "", s.patterns)
		if err != nil {
			t.Fatalf("%s: lintFull: %v", s.name, err)
		}
		l, f := leanKeys(lean), leanKeys(full)
		if len(f) == 0 && s.name != "this repository" {
			t.Fatalf("%s: no findings at all: the comparison proves nothing", s.name)
		}
		if strings.Join(l, "\n") != strings.Join(f, "\n") {
			t.Errorf("%s: lintLean and lintFull disagree:\n--- lean:\n%s\n--- full:\n%s", s.name, strings.Join(l, "\n"), strings.Join(f, "\n"))
		}
		t.Logf("%s: %d findings, the same", s.name, len(l))
	}
}

// leanKeys lists the findings of results, each once, as lint reports them.
func leanKeys(results []lintResult) []string {
	seen := map[string]bool{}
	var keys []string
	for _, r := range results {
		for _, d := range r.diagnostics {
			pos := r.pkg.Fset.Position(d.Pos)
			k := fmt.Sprintf("%s:%d:%d [%s] %s fixes=%d", pos.Filename, pos.Line, pos.Column, d.Category, d.Message, len(d.SuggestedFixes))
			// The edits as a set: lint reports whether there is a fix,
			// rewrite applies them in file order.
			var edits []string
			for _, fix := range d.SuggestedFixes {
				for _, e := range fix.TextEdits {
					edits = append(edits, fmt.Sprintf(" %d-%d %q", r.pkg.Fset.Position(e.Pos).Offset, r.pkg.Fset.Position(e.End).Offset, e.NewText))
				}
			}
			sort.Strings(edits)
			k += strings.Join(edits, "")
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}
