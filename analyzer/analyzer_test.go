package analyzer_test

import (
	"path/filepath"
	"testing"

	"github.com/migrate-unique/migrate-unique/analyzer"
	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/analysistest"
)

func TestAnalyzer(t *testing.T) {
	a, err := analyzer.New(analyzer.Config{Renames: map[string]string{"jobs.ErrDuplicate": "ErrConcurrencyLimitReached"}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a, "jobs", "app", "shapes", "register", "traps", "tasks")
}

func TestExactInterface(t *testing.T) {
	a, err := analyzer.New(analyzer.Config{Interfaces: []string{"exact.Task"}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a, "exact", "exactjobs", "exactuse")
}

func run(t *testing.T, a *analysis.Analyzer, pkgs ...string) {
	t.Helper()
	if *update {
		writeGoldens(t, analysistest.Run(t, analysistest.TestData(), a, pkgs...))
	}
	analysistest.RunWithSuggestedFixes(t, analysistest.TestData(), a, pkgs...)
}

// TestDependencyModule runs in module mode: lib is a dependency module, so
// its interface and methods are never edited, and the main module's code
// keeps what lib requires.
func TestDependencyModule(t *testing.T) {
	a, err := analyzer.New(analyzer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "mod"))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		writeGoldens(t, analysistest.Run(t, dir, a, "./app"))
	}
	analysistest.RunWithSuggestedFixes(t, dir, a, "./app")
}
