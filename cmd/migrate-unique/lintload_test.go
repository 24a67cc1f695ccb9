package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/analyzer"
	"github.com/migrate-unique/migrate-unique/analyzer/load"
	"github.com/migrate-unique/migrate-unique/rewrite"
)

// TestLeanLoadAgreesWithFull: the loader's one-package-at-a-time load and
// analysis (package load) takes every job module of testdata/jobmodules and
// this repository itself (packages with in-package tests, a job model over
// many packages, findings), and finds exactly what loading everything at
// once with go/packages and the checker (load.Config.Full) finds: for lint,
// the same findings, messages and fixes' edits; for rewrite (-diff and -w
// share the plan), the same findings and the same rewritten files, byte for
// byte.
func TestLeanLoadAgreesWithFull(t *testing.T) {
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

	ctx := context.Background()
	for _, s := range subjects {
		analyse := func(full bool) []string {
			cfg := load.Config{Dir: s.dir, Env: s.env, Tests: true, Full: full}
			prog, err := load.Load(ctx, cfg, s.patterns)
			if err != nil {
				t.Fatalf("%s: load (full %v): %v", s.name, full, err)
			}
			results, err := prog.Analyze(analyzer.Config{}.ForProgram)
			if err != nil {
				t.Fatalf("%s: analyse (full %v): %v", s.name, full, err)
			}
			return diagnosticKeys(results)
		}
		lean, full := analyse(false), analyse(true)
		if len(full) == 0 && s.name != "this repository" {
			t.Fatalf("%s: no findings at all: the comparison proves nothing", s.name)
		}
		if strings.Join(lean, "\n") != strings.Join(full, "\n") {
			t.Errorf("%s: lint: the lean load and the full load disagree:\n--- lean:\n%s\n--- full:\n%s", s.name, strings.Join(lean, "\n"), strings.Join(full, "\n"))
		}

		plan := func(full bool) (findings, files []string) {
			res, err := rewrite.Plan(ctx, rewrite.Options{Program: analyzer.Config{}.ForProgram, Dir: s.dir, Env: s.env, Patterns: s.patterns, FullLoad: full})
			if err != nil {
				t.Fatalf("%s: rewrite (full %v): %v", s.name, full, err)
			}
			for _, f := range res.Findings {
				findings = append(findings, fmt.Sprintf("%s [%s] %s fixed=%v", f.Position, f.Category, f.Message, f.Fixed))
			}
			for _, f := range res.Files {
				files = append(files, fmt.Sprintf("%s %o\n%s", f.Path, f.Mode, f.New))
			}
			return findings, files
		}
		leanFindings, leanFiles := plan(false)
		fullFindings, fullFiles := plan(true)
		if strings.Join(leanFindings, "\n") != strings.Join(fullFindings, "\n") {
			t.Errorf("%s: rewrite: the findings differ:\n--- lean:\n%s\n--- full:\n%s", s.name, strings.Join(leanFindings, "\n"), strings.Join(fullFindings, "\n"))
		}
		if strings.Join(leanFiles, "\n") != strings.Join(fullFiles, "\n") {
			t.Errorf("%s: rewrite: the rewritten files differ:\n--- lean:\n%s\n--- full:\n%s", s.name, strings.Join(leanFiles, "\n"), strings.Join(fullFiles, "\n"))
		}
		if len(fullFiles) == 0 && s.name != "this repository" {
			t.Errorf("%s: rewrite changes no file: the comparison proves nothing", s.name)
		}
		t.Logf("%s: %d findings, %d rewrite findings, %d files rewritten, the same", s.name, len(lean), len(leanFindings), len(leanFiles))
	}
}

// diagnosticKeys lists the diagnostics of results, each once, with their
// fixes' edits.
func diagnosticKeys(results []load.Result) []string {
	seen := map[string]bool{}
	var keys []string
	for _, r := range results {
		fset := r.Package.Fset
		for _, d := range r.Diagnostics {
			pos := fset.Position(d.Pos)
			k := fmt.Sprintf("%s:%d:%d [%s] %s fixes=%d", pos.Filename, pos.Line, pos.Column, d.Category, d.Message, len(d.SuggestedFixes))
			// The edits as a set: lint reports whether there is a fix,
			// rewrite applies them in file order.
			var edits []string
			for _, fix := range d.SuggestedFixes {
				for _, e := range fix.TextEdits {
					edits = append(edits, fmt.Sprintf(" %d-%d %q", fset.Position(e.Pos).Offset, fset.Position(e.End).Offset, e.NewText))
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
