package golangci_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/golangci/plugin-module-register/register"
	"golang.org/x/tools/go/analysis/analysistest"

	_ "github.com/migrate-unique/migrate-unique/analyzer/golangci"
)

// TestPlugin builds the plugin the way golangci-lint does (by name, from
// decoded YAML settings) and runs its analyzer over the analyzer's testdata.
func TestPlugin(t *testing.T) {
	newPlugin, err := register.GetPlugin("migrateunique")
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPlugin(map[string]any{"interfaces": []any{"exact.Task"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.GetLoadMode(); got != register.LoadModeTypesInfo {
		t.Errorf("load mode %q, want %q", got, register.LoadModeTypesInfo)
	}
	analyzers, err := p.BuildAnalyzers()
	if err != nil || len(analyzers) != 1 {
		t.Fatalf("BuildAnalyzers: %v, %d analyzers", err, len(analyzers))
	}
	testdata, err := filepath.Abs(filepath.Join("..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	analysistest.RunWithSuggestedFixes(t, testdata, analyzers[0], "exact")
}

func TestPluginRejectsBadSettings(t *testing.T) {
	newPlugin, err := register.GetPlugin("migrateunique")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		settings any
		want     string
	}{
		{map[string]any{"interface": []any{"a.B"}}, "unknown field"},
		{map[string]any{"interfaces": []any{"nodot"}}, "want importpath.Name"},
		{map[string]any{"renames": []any{map[string]any{"old": "a.Old", "new": "not an ident"}}}, "not a Go identifier"},
		{map[string]any{"renames": []any{map[string]any{"old": "a.Old", "new": "b.New"}}}, "same package"},
		{map[string]any{"renames": []any{map[string]any{"old": "a.Old"}}}, "want both old"},
		{map[string]any{"renames": []any{map[string]any{"old": "a.Old", "new": "X"}, map[string]any{"old": "a.Old", "new": "Y"}}}, "renamed twice"},
		{map[string]any{"renames": []any{map[string]any{"from": "a.Old", "to": "X"}}}, "unknown field"},
		// The map form golangci-lint's loader cannot carry is refused.
		{map[string]any{"renames": map[string]any{"a.Old": "X"}}, "renames"},
	} {
		_, err := newPlugin(tc.settings)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("settings %v: err = %v, want it to mention %q", tc.settings, err, tc.want)
		}
	}
	if _, err := newPlugin(nil); err != nil {
		t.Errorf("no settings: %v", err)
	}
}

// TestPluginRenames: renames given as golangci-lint's loader carries them
// (a list of objects) reach the analyzer: the analyzer's testdata, whose
// wanted findings include the rename, pass with them.
func TestPluginRenames(t *testing.T) {
	newPlugin, err := register.GetPlugin("migrateunique")
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPlugin(map[string]any{"renames": []any{map[string]any{"old": "jobs.ErrDuplicate", "new": "ErrConcurrencyLimitReached"}}})
	if err != nil {
		t.Fatal(err)
	}
	analyzers, err := p.BuildAnalyzers()
	if err != nil {
		t.Fatal(err)
	}
	testdata, err := filepath.Abs(filepath.Join("..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	analysistest.RunWithSuggestedFixes(t, testdata, analyzers[0], "jobs")
}
