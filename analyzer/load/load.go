// Package load is the program loader of the code migration's drivers
// (migrate-unique lint, migrate-unique rewrite and their benchmarks): it
// loads the packages a run names and runs the migrateunique analyzer over
// them, with the job model of the whole run, at the cost of go vet.
//
//  1. One go list (with -deps and -export) gives the package graph and every
//     package's export data; dependencies are read from export data, never
//     type-checked from source.
//  2. The job model of the run ([analyzer.Config.ForProgram]) comes from a
//     declarations-only type check of the packages named (no function
//     bodies, no types.Info); those types stay, and are what each
//     package's importers are type-checked against.
//  3. Each package is then type-checked in full into a package of its own,
//     analysed and dropped (syntax, types.Info and the types with every
//     local object), in dependency order, one at a time; its facts are
//     moved onto its declarations' objects by object path, as go vet passes
//     them from one package's process to its importers', and flow to its
//     importers as the analysis checker passes them.
//
// A package with tests is analysed once, as its test variant ("p [p.test]":
// its files and its in-package tests), where go/packages type-checks it
// twice. A load that does not go cleanly (a package with an error, a type
// error) is loaded again the way go/packages and the analysis checker load
// it, which either reports its errors, reduced to their root causes
// ([Causes], as a [*LoadError]), or analyses it holding every package at
// once. [Config.Full] takes that path from the start: it is the reference
// the tests hold the lean path to.
//
// Drivers that see one package at a time (go vet -vettool, go fix -fixtool,
// golangci-lint) do not use this package.
package load

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"

	"github.com/migrate-unique/migrate-unique/analyzer"
)

// Config says how to load.
type Config struct {
	// Dir is the directory the patterns are resolved in; "" is the current
	// directory.
	Dir string
	// Env is the go command's environment; nil means the process's.
	Env []string
	// Tags is one build-tag set, comma-separated as for go build -tags.
	Tags string
	// Root is the directory positions in load errors are shown relative
	// to (the module's or the workspace's root); "" shows them as they are.
	Root string
	// Tests loads each package's tests too: its in-package test variant
	// and its external _test package.
	Tests bool
	// Full loads and analyses every package at once with go/packages and
	// the analysis checker, as the lean path falls back to: for tests that
	// compare the two.
	Full bool
}

// ErrNoPackages is returned when the patterns match no package.
var ErrNoPackages = errors.New("the patterns match no package of the main module")

// Program is one load: the package graph of the patterns, with the
// packages to analyse.
type Program struct {
	cfg      Config
	patterns []string
	ctx      context.Context
	// roots are the packages analysed from source: the packages named
	// (a test variant standing for its package) and the packages of the
	// run's own modules they import that the patterns leave out.
	roots []*packages.Package
	// named are the packages the patterns name, reported.
	named map[*packages.Package]bool
	// full: the graph came from go/packages with syntax and types.
	full bool
	// analysed: the lean analysis left every root's declarations' types,
	// for Check.
	analysed bool
	// release lets the lean analysis drop each package's types once no
	// package left to analyse imports it: for Lint, which does not Check.
	release bool
}

// Result is the findings of one package the patterns name.
type Result struct {
	// Package is the package; its Fset gives the diagnostics' positions.
	// Its syntax and types.Info are no longer held.
	Package *packages.Package
	// Diagnostics are the analyzer's.
	Diagnostics []analysis.Diagnostic
}

// metaMode asks the go command for the package graph and the export data
// of every package, and nothing go/packages would type-check itself.
const metaMode = packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles |
	packages.NeedImports | packages.NeedDeps | packages.NeedModule | packages.NeedExportFile |
	packages.NeedTypesSizes | packages.NeedForTest

// fullMode loads the packages named from source and their dependencies
// from export data, every package's syntax and types held at once.
const fullMode = packages.LoadSyntax | packages.NeedModule

func (c Config) packagesConfig(ctx context.Context, mode packages.LoadMode) *packages.Config {
	cfg := &packages.Config{Context: ctx, Mode: mode, Dir: c.Dir, Env: c.Env, Tests: c.Tests}
	if mode&packages.NeedSyntax != 0 {
		cfg.ParseFile = ParseFile
	}
	if c.Tags != "" {
		cfg.BuildFlags = []string{"-tags=" + c.Tags}
	}
	return cfg
}

// ParseFile parses a file without the deprecated ast.Object resolution,
// which nothing here reads (types.Info says what every identifier is): a
// module's syntax then takes less memory.
func ParseFile(fset *token.FileSet, filename string, src []byte) (*ast.File, error) {
	return parser.ParseFile(fset, filename, src, parser.AllErrors|parser.ParseComments|parser.SkipObjectResolution)
}

// Load lists the packages the patterns name, with the go command, and their
// dependencies. Its errors are [ErrNoPackages] (wrapped, naming the
// patterns), a [*LoadError] listing the root causes of the load's errors,
// or a go command failure.
func Load(ctx context.Context, cfg Config, patterns []string) (*Program, error) {
	p := &Program{cfg: cfg, patterns: patterns, ctx: ctx}
	if !cfg.Full {
		pkgs, err := packages.Load(cfg.packagesConfig(ctx, metaMode), patterns...)
		if err != nil {
			return nil, fmt.Errorf("load %s%s: %w", strings.Join(patterns, " "), tagsSuffix(cfg.Tags), err)
		}
		if err := p.noPackages(pkgs); err != nil {
			return nil, err
		}
		if roots, ok := leanRoots(pkgs); ok {
			p.roots = roots
			p.named = make(map[*packages.Package]bool, len(roots))
			for _, r := range roots {
				p.named[r] = true
			}
			// The packages of the run's own modules that the named ones
			// import but the patterns leave out would come from export
			// data, without the syntax their analysis needs to say which of
			// their methods migrate (the call sites in the named packages
			// depend on it): they are loaded from source too, and not
			// reported.
			if more := unnamedOwnDeps(roots, p.named); len(more) > 0 {
				pkgs, err := packages.Load(cfg.packagesConfig(ctx, metaMode), append(append([]string(nil), patterns...), more...)...)
				if err != nil {
					return nil, fmt.Errorf("load %s%s: %w", strings.Join(patterns, " "), tagsSuffix(cfg.Tags), err)
				}
				if p.roots, ok = leanRoots(pkgs); ok {
					p.named = renamed(p.named, p.roots)
					return p, nil
				}
			} else {
				return p, nil
			}
		}
	}
	return p, p.loadFull()
}

// renamed maps the packages named in one listing to their counterparts in
// another, by ID.
func renamed(named map[*packages.Package]bool, roots []*packages.Package) map[*packages.Package]bool {
	ids := map[string]bool{}
	for p := range named {
		ids[p.ID] = true
	}
	out := map[*packages.Package]bool{}
	for _, r := range roots {
		if ids[r.ID] {
			out[r] = true
		}
	}
	return out
}

// noPackages returns ErrNoPackages when the patterns name no package: the
// go command lists none, or lists a pattern as a package with an error and
// no files.
func (p *Program) noPackages(pkgs []*packages.Package) error {
	if len(pkgs) == 0 {
		return fmt.Errorf("%w: %s%s", ErrNoPackages, strings.Join(p.patterns, " "), tagsSuffix(p.cfg.Tags))
	}
	for _, pkg := range pkgs {
		if len(pkg.Errors) > 0 && len(pkg.GoFiles) == 0 && len(pkg.IgnoredFiles) == 0 {
			return fmt.Errorf("%w: %s%s: %v", ErrNoPackages, strings.Join(p.patterns, " "), tagsSuffix(p.cfg.Tags), pkg.Errors[0].Msg)
		}
	}
	return nil
}

// loadFull loads the packages with go/packages, syntax and types, and
// reports their errors.
func (p *Program) loadFull() error {
	p.full, p.analysed = true, false
	load := func(patterns []string) ([]*packages.Package, error) {
		pkgs, err := packages.Load(p.cfg.packagesConfig(p.ctx, fullMode), patterns...)
		if err != nil {
			return nil, fmt.Errorf("load %s%s: %w", strings.Join(patterns, " "), tagsSuffix(p.cfg.Tags), err)
		}
		if err := p.noPackages(pkgs); err != nil {
			return nil, err
		}
		if problems := Causes(pkgs, p.cfg.Root); len(problems) > 0 {
			return nil, &LoadError{Tags: p.cfg.Tags, Problems: problems}
		}
		return pkgs, nil
	}
	pkgs, err := load(p.patterns)
	if err != nil {
		return err
	}
	p.named = make(map[*packages.Package]bool, len(pkgs))
	for _, pkg := range pkgs {
		p.named[pkg] = true
	}
	if more := unnamedOwnDeps(pkgs, p.named); len(more) > 0 {
		all, err := load(append(append([]string(nil), p.patterns...), more...))
		if err != nil {
			return err
		}
		p.named = renamed(p.named, all)
		pkgs = all
	}
	p.roots = pkgs
	return nil
}

// Named returns the packages the patterns name (a package with tests as
// its test variant, unless the load is full), as listed: their Module,
// GoFiles and Imports are set, their syntax and types not.
func (p *Program) Named() []*packages.Package {
	var out []*packages.Package
	for _, r := range p.roots {
		if p.named[r] {
			out = append(out, r)
		}
	}
	return out
}

// Visit calls f for every package of the load, dependencies first.
func (p *Program) Visit(f func(*packages.Package)) {
	packages.Visit(p.roots, nil, f)
}

// Analyze runs the analyzer that program returns for the load (given its
// packages with their declarations' types, to compute the job model of the
// run) over every package, dependencies first, with facts, and returns the
// diagnostics of the packages named, in dependency order.
func (p *Program) Analyze(program func([]*packages.Package) (*analysis.Analyzer, error)) ([]Result, error) {
	if !p.full {
		results, ok, err := p.analyzeLean(program)
		if err != nil || ok {
			return results, err
		}
		// A type error or a failed analysis: go/packages and the checker
		// decide, and report the errors.
		if err := p.loadFull(); err != nil {
			return nil, err
		}
	}
	return p.analyzeFull(program)
}

// analyzeFull analyses a full load with the checker.
func (p *Program) analyzeFull(program func([]*packages.Package) (*analysis.Analyzer, error)) ([]Result, error) {
	a, err := program(p.roots)
	if err != nil {
		return nil, err
	}
	graph, err := checker.Analyze([]*analysis.Analyzer{a}, p.roots, nil)
	if err != nil {
		return nil, fmt.Errorf("run analyzer %s: %w", a.Name, err)
	}
	for {
		next, again := analyzer.Revise(a)
		if !again {
			break
		}
		a = next
		if graph, err = checker.Analyze([]*analysis.Analyzer{a}, p.roots, nil); err != nil {
			return nil, fmt.Errorf("run analyzer %s: %w", a.Name, err)
		}
	}
	var results []Result
	for _, act := range graph.Roots {
		if !p.named[act.Package] {
			continue
		}
		if act.Err != nil {
			return nil, fmt.Errorf("analyzer %s on %s%s: %w", a.Name, act.Package.ID, tagsSuffix(p.cfg.Tags), act.Err)
		}
		results = append(results, Result{act.Package, act.Diagnostics})
	}
	// What the analysis read of the syntax is not needed any more.
	packages.Visit(p.roots, nil, func(pkg *packages.Package) { pkg.TypesInfo = nil })
	return results, nil
}

// unnamedOwnDeps lists the packages of the run's own modules (no module
// version) that the named packages import, directly or not, and that are
// not named themselves.
func unnamedOwnDeps(pkgs []*packages.Package, named map[*packages.Package]bool) []string {
	// A package named under one ID counts as named under all: a test's
	// recompiled copy of a named package ("x [y.test]") is left to export
	// data, its files being analysed in the package named.
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[p.PkgPath] = true
	}
	var out []string
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		if named[p] || p.Module == nil || p.Module.Version != "" || p.PkgPath == "" || seen[p.PkgPath] {
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

// LoadError means the packages could not be loaded or do not type-check, so
// no finding or fix can be trusted.
type LoadError struct {
	// Tags is the build-tag set of the failing load ("" for none).
	Tags string
	// Problems are the root causes (see [Causes]), each led by its position.
	Problems []string
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("the module does not load or type-check%s; fix it first (go build ./... && go vet ./...), then rerun:\n%s",
		tagsSuffix(e.Tags), listProblems(e.Problems))
}

// maxListed bounds how many individual problems an error message lists.
const maxListed = 10

func listProblems(ps []string) string {
	var b strings.Builder
	for i, p := range ps {
		if i == maxListed {
			fmt.Fprintf(&b, "\t... and %d more\n", len(ps)-maxListed)
			break
		}
		fmt.Fprintf(&b, "\t%s\n", p)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func tagsSuffix(tags string) string {
	if tags == "" {
		return ""
	}
	return fmt.Sprintf(" with -tags %s", tags)
}

// relPath returns path relative to dir when it is inside it, else path.
func relPath(dir, path string) string {
	if dir == "" {
		return path
	}
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return path
	}
	return filepath.ToSlash(rel)
}

// Finding is one diagnostic of the analyzer, as lint reports it: once,
// however many variants of a package saw it.
type Finding struct {
	// Package is the import path of the package it is in (an external test
	// package under its package's path).
	Package string
	// Position is where it is; Filename is absolute.
	Position token.Position
	// Code is its category, an analyzer.Code.
	Code string
	// Fixable reports whether it carries a suggested fix.
	Fixable bool
	// Message is the analyzer's message.
	Message string
}

// Lint loads the packages the patterns name and returns the findings of
// the analyzer configured by c, with the job model of the load, each once,
// in file order.
func Lint(ctx context.Context, cfg Config, patterns []string, c analyzer.Config) ([]Finding, error) {
	prog, err := Load(ctx, cfg, patterns)
	if err != nil {
		return nil, err
	}
	prog.release = true
	results, err := prog.Analyze(c.ForProgram)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var found []Finding
	for _, r := range results {
		for _, d := range r.Diagnostics {
			pos := r.Package.Fset.Position(d.Pos)
			key := fmt.Sprintf("%s:%d:%d:%s", pos.Filename, pos.Line, pos.Column, d.Message)
			if seen[key] {
				continue
			}
			seen[key] = true
			found = append(found, Finding{
				Package: strings.TrimSuffix(r.Package.PkgPath, "_test"), Position: pos,
				Code: d.Category, Fixable: len(d.SuggestedFixes) > 0, Message: d.Message,
			})
		}
	}
	sort.SliceStable(found, func(i, j int) bool {
		a, b := found[i].Position, found[j].Position
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return found, nil
}
