// Package golangci registers the migrateunique analyzer as a golangci-lint
// module plugin. Build a custom golangci-lint with it (golangci-lint custom,
// reading .custom-gcl.yml) and enable it in .golangci.yml; the snippets are
// in docs/code-migration.md.
package golangci

import (
	"fmt"

	"github.com/golangci/plugin-module-register/register"
	"golang.org/x/tools/go/analysis"

	"github.com/migrate-unique/migrate-unique/analyzer"
)

func init() {
	register.Plugin(analyzer.Name, New)
}

// Settings are the plugin's settings, read from
// linters.settings.custom.migrateunique.settings in .golangci.yml. They
// mean what the analyzer's -interface, -rename, -table and -all-sql flags
// mean.
type Settings struct {
	// Interfaces names the legacy job interfaces exactly
	// ("importpath.Name"); empty means the default detection.
	Interfaces []string `json:"interfaces"`
	// Renames are the -rename pairs, a list of objects: golangci-lint's
	// configuration loader splits map keys on '.', so an "importpath.Old"
	// cannot be a key.
	Renames []Rename `json:"renames"`
	// Tables are the queue layout's tables; empty means plain-jobs'.
	Tables []string `json:"tables"`
	// AllSQL reports SQL naming unique_key in every package.
	AllSQL bool `json:"all-sql"`
}

// Rename is one -rename pair: in .golangci.yml,
//
//	renames:
//	  - old: example.com/app/queue.WithUniqueKey
//	    new: WithConcurrencyKey
type Rename struct {
	// Old is the package-level name to rename, "importpath.Old".
	Old string `json:"old"`
	// New is its new name, "New" or "importpath.New" (same package).
	New string `json:"new"`
}

// plugin is the golangci-lint plugin.
type plugin struct {
	analyzer *analysis.Analyzer
}

// New builds the plugin from its raw settings; golangci-lint calls it.
func New(settings any) (register.LinterPlugin, error) {
	s, err := register.DecodeSettings[Settings](settings)
	if err != nil {
		return nil, fmt.Errorf("%s settings: %w", analyzer.Name, err)
	}
	var renames map[string]string
	for i, r := range s.Renames {
		if r.Old == "" || r.New == "" {
			return nil, fmt.Errorf("%s settings: renames[%d]: want both old (importpath.Old) and new (New), e.g. {old: example.com/app/queue.WithUniqueKey, new: WithConcurrencyKey}", analyzer.Name, i)
		}
		if renames == nil {
			renames = map[string]string{}
		}
		if prev, ok := renames[r.Old]; ok && prev != r.New {
			return nil, fmt.Errorf("%s settings: renames: %s is renamed twice (to %s and %s)", analyzer.Name, r.Old, prev, r.New)
		}
		renames[r.Old] = r.New
	}
	a, err := analyzer.New(analyzer.Config{Interfaces: s.Interfaces, Renames: renames, Tables: s.Tables, AllSQL: s.AllSQL})
	if err != nil {
		return nil, fmt.Errorf("%s settings: %w", analyzer.Name, err)
	}
	return &plugin{analyzer: a}, nil
}

// BuildAnalyzers returns the configured analyzer.
func (p *plugin) BuildAnalyzers() ([]*analysis.Analyzer, error) {
	return []*analysis.Analyzer{p.analyzer}, nil
}

// GetLoadMode asks for type information: job types are found on
// types.Info, never by spelling.
func (p *plugin) GetLoadMode() string { return register.LoadModeTypesInfo }
