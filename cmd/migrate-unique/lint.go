package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/tools/go/analysis/unitchecker"

	"github.com/migrate-unique/migrate-unique/analyzer"
	"github.com/migrate-unique/migrate-unique/analyzer/load"
	"github.com/migrate-unique/migrate-unique/rewrite"
)

// Owned by the analyzer issue: lint, and the go vet / go fix tool protocol.

// vetToolProtocol reports whether the go command invoked this binary as a
// -vettool or -fixtool (-V=full, -flags, or a .cfg argument). It looks at the
// raw arguments, before any flag parsing, and never claims a command line
// that starts with one of this binary's commands.
func vetToolProtocol(args []string) bool {
	if len(args) == 0 {
		return false
	}
	for _, c := range commands {
		if args[0] == c.name {
			return false
		}
	}
	for _, a := range args {
		if a == "-flags" || a == "--flags" || a == "-V" || strings.HasPrefix(a, "-V=") || strings.HasPrefix(a, "--V=") {
			return true
		}
	}
	return strings.HasSuffix(args[len(args)-1], ".cfg")
}

// runVetTool hands the process to the unitchecker driver, which speaks the
// go command's protocol and exits.
func runVetTool() {
	unitchecker.Main(analyzer.Analyzer)
}

// lintFinding is one finding of the lint command, as -json prints it.
type lintFinding struct {
	Package string `json:"package"`
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Code    string `json:"code"`
	Fixable bool   `json:"fixable"`
	Message string `json:"message"`
}

const lintUsage = `lint [-json] [-interface importpath.Name]... [-rename importpath.Old=New]... [-tags list] [-test=false] [-table name]... [-all-sql] [packages]

Reports legacy unique-key job code in the packages (package patterns, or
paths of .go files naming their packages; default: the whole module, or
every module of the go.work workspace from its directory), deciding which
types are jobs over everything it loads, as rewrite does. SQL text is
reported only where it can concern the queue (the layout's tables, -table,
or packages with legacy jobs; -all-sql: everywhere). Exit status: 0 no
findings, 1 findings, 2 bad usage or packages that do not load (their root
causes are listed).
Finding codes:
` // the codes are appended by lintHelp

func lintHelp() string {
	var b strings.Builder
	b.WriteString(lintUsage)
	for _, c := range analyzer.Codes {
		fmt.Fprintf(&b, "  %-17s %s\n", c, c.Describe())
	}
	return strings.TrimRight(b.String(), "\n")
}

func runLint(ctx context.Context, e *env, args []string) error {
	wholeModuleGC()
	fs := newFlagSet(e, "lint", lintHelp())
	asJSON := fs.Bool("json", false, "print findings as a JSON array")
	tags := fs.String("tags", "", "build tags to load the packages with, a comma-separated `list` as for go build -tags")
	tests := fs.Bool("test", true, "also analyse test files")
	cfg := analyzerFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if _, err := analyzer.New(*cfg); err != nil {
		return &exitError{code: 2, err: err}
	}
	findings, err := lint(ctx, *cfg, *tags, *tests, fs.Args())
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if findings == nil {
			findings = []lintFinding{}
		}
		if err := enc.Encode(findings); err != nil {
			return err
		}
	} else {
		fixable := 0
		for _, f := range findings {
			fmt.Fprintf(e.stdout, "%s:%d:%d: [%s] %s\n", f.File, f.Line, f.Column, f.Code, f.Message)
			if f.Fixable {
				fixable++
			}
		}
		if len(findings) > 0 {
			fmt.Fprintf(e.stderr, "%s, %d with a fix (apply them with 'migrate-unique rewrite -w' or 'go fix -fixtool')\n", counted(len(findings), "finding", "findings"), fixable)
		}
	}
	if len(findings) > 0 {
		return &exitError{code: 1}
	}
	return nil
}

// analyzerFlags registers -interface, -rename, -table and -all-sql, as lint and rewrite both
// take them: repeatable, each value a comma-separated list, like the
// analyzer's own flags under go vet. The names are checked by analyzer.New.
func analyzerFlags(fs *flag.FlagSet) *analyzer.Config {
	cfg := &analyzer.Config{}
	fs.Func("interface", "legacy job interface as `importpath.Name` (repeatable or comma-separated); replaces the default detection (interfaces with UniqueKey() string and Run, Perform, Execute, Handle, Process, Work or Do)", func(v string) error {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				cfg.Interfaces = append(cfg.Interfaces, name)
			}
		}
		return nil
	})
	fs.Func("rename", "rename an option function or sentinel error, `importpath.Old=New` (repeatable or comma-separated)", func(v string) error {
		for _, pair := range strings.Split(v, ",") {
			if pair = strings.TrimSpace(pair); pair == "" {
				continue
			}
			old, new, ok := strings.Cut(pair, "=")
			if !ok {
				return fmt.Errorf("%q: want importpath.Old=New, e.g. example.com/app/jobs.WithUniqueKey=WithConcurrencyKey", pair)
			}
			if cfg.Renames == nil {
				cfg.Renames = map[string]string{}
			}
			cfg.Renames[strings.TrimSpace(old)] = strings.TrimSpace(new)
		}
		return nil
	})
	fs.Func("table", "a table of the queue's layout, `name` or schema.name (repeatable or comma-separated; default plain-jobs' tables): SQL naming it and unique_key is reported in any package", func(v string) error {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				cfg.Tables = append(cfg.Tables, name)
			}
		}
		return nil
	})
	fs.BoolVar(&cfg.AllSQL, "all-sql", false, "report SQL naming unique_key in every package, whatever its table (default: SQL naming the layout's tables, or in packages with legacy jobs)")
	return cfg
}

// lint loads the packages (arguments as rewrite reads them) and returns the
// findings of the analyzer configured by ac, with the load's job model
// (package load), each once, in file order.
func lint(ctx context.Context, ac analyzer.Config, tags string, tests bool, args []string) ([]lintFinding, error) {
	target, err := rewrite.Resolve(ctx, "", nil, args)
	if err != nil {
		return nil, err
	}
	cfg := load.Config{Tags: tags, Tests: tests, Root: target.Root}
	if len(args) == 0 {
		cfg.Dir = target.Root // the whole module, from any directory of it
	}
	found, err := load.Lint(ctx, cfg, target.Patterns, ac)
	if err != nil {
		return nil, err
	}
	wd, _ := os.Getwd()
	findings := make([]lintFinding, len(found))
	for i, f := range found {
		findings[i] = lintFinding{
			Package: f.Package, File: displayPath(wd, f.Position.Filename), Line: f.Position.Line, Column: f.Position.Column,
			Code: f.Code, Fixable: f.Fixable, Message: f.Message,
		}
	}
	return findings, nil
}

// displayPath shows a finding's file relative to the current directory,
// climbing out of it when the file is elsewhere in the module (as the go
// command shows paths), so every line of the output has the same form.
func displayPath(wd, file string) string {
	if wd == "" {
		return file
	}
	if rel, err := filepath.Rel(wd, file); err == nil {
		return rel
	}
	return file
}
