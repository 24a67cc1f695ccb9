package analyzer_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"

	"github.com/migrate-unique/migrate-unique/analyzer"
)

// ExampleNew runs the analyzer from Go over a small module, the way the
// rewrite command does, and prints each finding with its code.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "analyzer-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	files := map[string]string{
		"go.mod": "module example.com/app\n\ngo 1.24\n",
		"jobs/jobs.go": `package jobs

// Job is the legacy job interface.
type Job interface {
	UniqueKey() string
	Run() error
}

// Email is sent at most once per address at a time.
type Email struct{ To string }

func (e Email) UniqueKey() string { return e.To }
func (e Email) Run() error        { return nil }

// Entry is a cache entry: its UniqueKey is no job's.
type Entry struct{ Slot string }

func (c Entry) UniqueKey() string { return c.Slot }
`,
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			log.Fatal(err)
		}
	}

	a, err := analyzer.New(analyzer.Config{Interfaces: []string{"example.com/app/jobs.Job"}})
	if err != nil {
		log.Fatal(err)
	}
	pkgs, err := packages.Load(&packages.Config{Mode: packages.LoadAllSyntax | packages.NeedModule, Dir: dir, Env: append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")}, "./...")
	if err != nil {
		log.Fatal(err)
	}
	graph, err := checker.Analyze([]*analysis.Analyzer{a}, pkgs, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, act := range graph.Roots {
		for _, d := range act.Diagnostics {
			pos := act.Package.Fset.Position(d.Pos)
			fmt.Printf("%s:%d: [%s] %s (fixable: %v)\n", filepath.Base(pos.Filename), pos.Line, d.Category, d.Message, analyzer.Code(d.Category).Fixable())
		}
	}
	// Output:
	// jobs.go:5: [interface] interface Job declares UniqueKey: declare ConcurrencyKey and ConcurrencyLimit instead (fixable: true)
	// jobs.go:12: [job-type] job type Email: rename UniqueKey to ConcurrencyKey and add ConcurrencyLimit (fixable: true)
}
