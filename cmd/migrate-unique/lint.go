package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/analysis/unitchecker"
	"golang.org/x/tools/go/packages"

	"github.com/migrate-unique/migrate-unique/analyzer"
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

// lintMode loads the named packages from source and their dependencies
// (other modules, the standard library, packages of the module left out)
// from the go command's export data, as go vet and rewrite do: lint costs
// what go vet costs, not a type check of the whole dependency graph.
const lintMode = packages.LoadSyntax | packages.NeedModule

// lint loads the packages (arguments as rewrite reads them) and returns the
// findings of the analyzer, configured by ac and given the load's job
// model, each once (a package and its test variant share files), in file
// order.
func lint(ctx context.Context, ac analyzer.Config, tags string, tests bool, args []string) ([]lintFinding, error) {
	target, err := rewrite.Resolve(ctx, "", nil, args)
	if err != nil {
		return nil, err
	}
	patterns := target.Patterns
	cfg := &packages.Config{Context: ctx, Mode: lintMode, Tests: tests, ParseFile: rewrite.ParseFile}
	if len(args) == 0 {
		cfg.Dir = target.Root // the whole module, from any directory of it
	}
	if tags != "" {
		cfg.BuildFlags = []string{"-tags=" + tags}
	}
	results, ok, err := lintLean(ac, *cfg, patterns)
	if err != nil {
		return nil, err
	}
	if !ok {
		if results, err = lintFull(ac, cfg, target.Root, tags, patterns); err != nil {
			return nil, err
		}
	}
	wd, _ := os.Getwd()
	type located struct {
		lintFinding
		abs string
	}
	seen := map[string]bool{}
	var found []located
	for _, r := range results {
		for _, d := range r.diagnostics {
			pos := r.pkg.Fset.Position(d.Pos)
			key := fmt.Sprintf("%s:%d:%d:%s", pos.Filename, pos.Line, pos.Column, d.Message)
			if seen[key] {
				continue
			}
			seen[key] = true
			found = append(found, located{lintFinding{
				Package: strings.TrimSuffix(r.pkg.PkgPath, "_test"),
				File:    displayPath(wd, pos.Filename), Line: pos.Line, Column: pos.Column,
				Code: d.Category, Fixable: len(d.SuggestedFixes) > 0, Message: d.Message,
			}, pos.Filename})
		}
	}
	// Sorted on the absolute paths: the shown ones may climb out of the
	// current directory (../queue/queue.go) and sort differently.
	sort.SliceStable(found, func(i, j int) bool {
		if found[i].abs != found[j].abs {
			return found[i].abs < found[j].abs
		}
		if found[i].Line != found[j].Line {
			return found[i].Line < found[j].Line
		}
		return found[i].Column < found[j].Column
	})
	findings := make([]lintFinding, len(found))
	for i, f := range found {
		findings[i] = f.lintFinding
	}
	return findings, nil
}

// lintResult is the diagnostics of one named package.
type lintResult struct {
	pkg         *packages.Package
	diagnostics []analysis.Diagnostic
}

// lintFull loads the packages with go/packages (lintMode) and analyses them
// with the checker, holding every package's syntax and types at once: the
// path for loads lintLean does not take, and the one that reports load
// errors.
func lintFull(ac analyzer.Config, cfg *packages.Config, root, tags string, patterns []string) ([]lintResult, error) {
	load := func(patterns []string) ([]*packages.Package, error) {
		pkgs, err := packages.Load(cfg, patterns...)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", strings.Join(patterns, " "), err)
		}
		if problems := rewrite.Causes(pkgs, root); len(problems) > 0 {
			return nil, &rewrite.LoadError{Tags: tags, Problems: problems}
		}
		return pkgs, nil
	}
	pkgs, err := load(patterns)
	if err != nil {
		return nil, err
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("no packages match %s", strings.Join(patterns, " "))
	}
	named := make(map[string]bool, len(pkgs))
	for _, p := range pkgs {
		named[p.ID] = true
	}
	// Packages of the run's modules that the named ones import but the
	// patterns leave out came from export data, without the syntax their
	// analysis needs to say which of their methods migrate (the call sites
	// in the named packages depend on it): load them from source too, and
	// report the named packages only.
	if more := unnamedOwnDeps(pkgs, named); len(more) > 0 {
		if pkgs, err = load(append(append([]string(nil), patterns...), more...)); err != nil {
			return nil, err
		}
	}
	a, err := ac.ForProgram(pkgs)
	if err != nil {
		return nil, err
	}
	graph, err := checker.Analyze([]*analysis.Analyzer{a}, pkgs, nil)
	if err != nil {
		return nil, err
	}
	var results []lintResult
	for _, act := range graph.Roots {
		if !named[act.Package.ID] {
			continue
		}
		if act.Err != nil {
			return nil, fmt.Errorf("analyse %s: %w", act.Package.PkgPath, act.Err)
		}
		results = append(results, lintResult{act.Package, act.Diagnostics})
	}
	return results, nil
}

// unnamedOwnDeps lists the packages of the run's own modules (no module
// version) that the named packages import, directly or not, and that are
// not named themselves.
func unnamedOwnDeps(pkgs []*packages.Package, named map[string]bool) []string {
	// A package named under one ID counts as named under all: a test's
	// recompiled copy of a named package ("x [y.test]") is left to export
	// data, its files being analysed in the package named.
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[p.PkgPath] = true
	}
	var out []string
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		if named[p.ID] || p.Module == nil || p.Module.Version != "" || p.PkgPath == "" || seen[p.PkgPath] {
			return
		}
		if strings.HasSuffix(p.PkgPath, ".test") || strings.HasSuffix(p.PkgPath, "_test") {
			return
		}
		seen[p.PkgPath] = true
		out = append(out, p.PkgPath)
	})
	sort.Strings(out)
	return out
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
