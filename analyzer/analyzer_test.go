package analyzer_test

import (
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
	run(t, a, "jobs", "app")
}

func TestExactInterface(t *testing.T) {
	a, err := analyzer.New(analyzer.Config{Interfaces: []string{"exact.Task"}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a, "exact")
}

func run(t *testing.T, a *analysis.Analyzer, pkgs ...string) {
	t.Helper()
	if *update {
		writeGoldens(t, analysistest.Run(t, analysistest.TestData(), a, pkgs...))
	}
	analysistest.RunWithSuggestedFixes(t, analysistest.TestData(), a, pkgs...)
}
