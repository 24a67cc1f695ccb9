package load

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/packages"

	"github.com/migrate-unique/migrate-unique/analyzer"
)

// TestCheck: the check of rewritten files after a lean analysis reuses its
// types and finds what a full type check finds, across packages and test
// variants.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":          "module example.com/m\n\ngo 1.22\n",
		"a/a.go":          "package a\n\nimport \"strings\"\n\nfunc Key() string { return strings.ToUpper(\"k\") }\n",
		"a/a_test.go":     "package a\n\nimport \"testing\"\n\nfunc TestKey(t *testing.T) { _ = Key() }\n",
		"b/b.go":          "package b\n\nimport \"example.com/m/a\"\n\nvar K = a.Key()\n",
		"b/b_ext_test.go": "package b_test\n\nimport (\n\t\"testing\"\n\n\t\"example.com/m/a\"\n)\n\nfunc TestK(t *testing.T) { _ = a.Key() }\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Dir: dir, Tests: true, Env: append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")}
	// Check consumes a load: each case loads the module again.
	load := func(t *testing.T) *Program {
		prog, err := Load(context.Background(), cfg, []string{"./..."})
		if err != nil {
			t.Fatal(err)
		}
		a, err := analyzer.New(analyzer.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := prog.Analyze(func([]*packages.Package) (*analysis.Analyzer, error) { return a, nil }); err != nil {
			t.Fatal(err)
		}
		return prog
	}
	aGo := filepath.Join(dir, "a", "a.go")
	for _, tc := range []struct {
		name    string
		changed map[string][]byte
		want    []string // substrings of the problems, in any order; none = clean
	}{
		{name: "no change", changed: nil},
		{name: "compatible change", changed: map[string][]byte{
			aGo: []byte("package a\n\nimport \"strings\"\n\nfunc Key() string { return strings.ToLower(\"k\") }\n"),
		}},
		{name: "renamed function breaks importers and tests", changed: map[string][]byte{
			aGo: []byte("package a\n\nimport \"strings\"\n\nfunc NewKey() string { return strings.ToUpper(\"k\") }\n"),
		}, want: []string{"b.go:5:11: undefined: a.Key", "a_test.go:5:34: undefined: Key", "b_ext_test.go:9:34: undefined: a.Key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems, ok := load(t).Check(tc.changed)
			if !ok {
				t.Fatal("Check could not stand in for a full type check")
			}
			full, err := Verify(context.Background(), cfg, []string{"./..."}, tc.changed)
			if err != nil {
				t.Fatal(err)
			}
			if len(full) != len(problems) {
				t.Errorf("Check finds %d problems, a full type check %d:\n%s\n---\n%s", len(problems), len(full), strings.Join(problems, "\n"), strings.Join(full, "\n"))
			}
			got := strings.Join(problems, "\n")
			if len(tc.want) == 0 && len(problems) > 0 {
				t.Fatalf("problems on good code:\n%s", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("problems lack %q:\n%s", w, got)
				}
			}
		})
	}
}

// TestLeanPathTaken: a clean load is analysed one package at a time (not
// by the full fallback), with the same findings as the full load.
func TestLeanPathTaken(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"go.mod":      "module example.com/m\n\ngo 1.22\n",
		"q/q.go":      "package q\n\n// Job is the legacy job interface.\ntype Job interface {\n\tUniqueKey() string\n\tRun() error\n}\n",
		"j/j.go":      "package j\n\n// Mail is a job.\ntype Mail struct{ To string }\n\nfunc (m Mail) UniqueKey() string { return m.To }\n\nfunc (m Mail) Run() error { return nil }\n",
		"j/j_test.go": "package j\n\nimport \"testing\"\n\nfunc TestKey(t *testing.T) { _ = Mail{}.UniqueKey() }\n",
		"r/r.go":      "package r\n\nimport (\n\t\"example.com/m/j\"\n\t\"example.com/m/q\"\n)\n\nvar Jobs = []q.Job{j.Mail{}}\n\nfunc Keys() string { return Jobs[0].UniqueKey() + j.Mail{}.UniqueKey() }\n",
	} {
		writeFile(t, filepath.Join(dir, name), content)
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	var keys [2][]string
	for i, full := range []bool{false, true} {
		prog, err := Load(context.Background(), Config{Dir: dir, Env: env, Tests: true, Full: full}, []string{"./..."})
		if err != nil {
			t.Fatal(err)
		}
		results, err := prog.Analyze(analyzer.Config{}.ForProgram)
		if err != nil {
			t.Fatal(err)
		}
		if !full && (prog.full || !prog.analysed) {
			t.Fatalf("the lean path fell back to the full load")
		}
		if !full {
			// j is analysed once, as its test variant: the plain package
			// is neither named nor analysed.
			var ids []string
			for _, p := range prog.Named() {
				if p.PkgPath == "example.com/m/j" {
					ids = append(ids, p.ID)
				}
			}
			if len(ids) != 1 || ids[0] != "example.com/m/j [example.com/m/j.test]" {
				t.Errorf("j analysed as %q, want only its test variant", ids)
			}
		}
		// Each finding once, as Lint reports it (the full load analyses
		// j twice: as itself and as its test variant).
		seen := map[string]bool{}
		for _, r := range results {
			for _, d := range r.Diagnostics {
				if k := r.Package.Fset.Position(d.Pos).String() + " " + d.Message; !seen[k] {
					seen[k] = true
					keys[i] = append(keys[i], k)
				}
			}
		}
		sort.Strings(keys[i])
	}
	if len(keys[1]) < 4 || strings.Join(keys[0], "\n") != strings.Join(keys[1], "\n") {
		t.Errorf("lean:\n%s\nfull:\n%s", strings.Join(keys[0], "\n"), strings.Join(keys[1], "\n"))
	}
}
