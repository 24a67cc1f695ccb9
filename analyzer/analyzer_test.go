package analyzer_test

import (
	"path/filepath"
	"strings"
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
	run(t, a, "jobs", "app", "shapes", "register", "traps", "tasks", "store", "neoqlike")
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

// TestSQLScope runs the sql finding with its two settings: -table names
// the layout's tables (replacing plain-jobs'), -all-sql reports SQL in
// every package whatever its table.
func TestSQLScope(t *testing.T) {
	a, err := analyzer.New(analyzer.Config{Tables: []string{"jobs.queue_jobs"}})
	if err != nil {
		t.Fatal(err)
	}
	analysistest.Run(t, analysistest.TestData(), a, "tables")
	a, err = analyzer.New(analyzer.Config{AllSQL: true})
	if err != nil {
		t.Fatal(err)
	}
	analysistest.Run(t, analysistest.TestData(), a, "allsql")
	if _, err := analyzer.New(analyzer.Config{Tables: []string{"jobs; drop"}}); err == nil || !strings.Contains(err.Error(), "want a table name") {
		t.Errorf("a table name with a space and a semicolon: err = %v, want a refusal", err)
	}
}
