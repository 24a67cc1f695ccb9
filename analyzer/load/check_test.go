package load

import (
	"context"
	"os"
	"path/filepath"
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
