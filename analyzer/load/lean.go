package load

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"os"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/gcexportdata"
	"golang.org/x/tools/go/packages"

	"github.com/migrate-unique/migrate-unique/analyzer"
)

// analyzeLean is the analysis at the cost of go vet (see the package
// documentation): it holds one package's syntax and type information at a
// time, where go/packages and the checker hold every named package's at
// once. ok is false when the load is one it does not handle exactly as
// go/packages would: a type error, a failed analysis.
func (pr *Program) analyzeLean(program func([]*packages.Package) (*analysis.Analyzer, error)) (results []Result, ok bool, err error) {
	roots := pr.roots
	source := map[*packages.Package]bool{}
	for _, p := range roots {
		source[p] = true
	}
	var all []*packages.Package // dependencies first
	packages.Visit(roots, nil, func(p *packages.Package) { all = append(all, p) })
	// As go/packages: the direct imports of a package from source have
	// their types from export data, the others are empty placeholders.
	needTypes := map[*packages.Package]bool{}
	for p := range source {
		for _, dep := range p.Imports {
			needTypes[dep] = true
		}
	}
	// declare type-checks the declarations of the packages from source
	// and reads the others' types from export data: the job model's types,
	// which stay; each package's importers are type-checked against them.
	declare := func() bool {
		fset := token.NewFileSet()
		for _, p := range all {
			p.Fset, p.Types, p.Syntax, p.TypesInfo = fset, types.NewPackage(p.PkgPath, p.Name), nil, nil
		}
		for _, p := range all {
			switch {
			case source[p]:
				if !checkSource(p, false) {
					return false
				}
			case needTypes[p]:
				if readExport(p) != nil {
					return false
				}
			}
		}
		return true
	}
	if !declare() {
		return nil, false, nil
	}
	a, err := program(roots)
	if err != nil {
		return nil, false, err
	}
	for _, p := range roots {
		p.Syntax = nil
	}

	// Each package in full, analysed, dropped; again when the analysis
	// revised the job model (analyzer.Revise), on types declared again
	// when the first analysis let go of them.
	for {
		if results, ok = pr.analyseEach(a, all, source); !ok {
			return nil, false, nil
		}
		next, again := analyzer.Revise(a)
		if !again {
			break
		}
		a = next
		if pr.release && !declare() {
			return nil, false, nil
		}
		for _, p := range roots {
			p.Syntax = nil
		}
	}
	pr.analysed = !pr.release
	return results, true, nil
}

// analyseEach type-checks each package from source in full, into a
// package of its own, analyses it and drops it (its syntax, types.Info and
// types, with every local object of its functions), dependencies first:
// its importers see the declarations' types the job model was built from,
// and its facts are moved onto their objects, as go vet passes facts from
// one package's process to its importers' by object path. With release
// (lint, which does not Check), each package's types and facts are let go
// of as soon as no package left to analyse imports it, directly or not.
func (pr *Program) analyseEach(a *analysis.Analyzer, all []*packages.Package, source map[*packages.Package]bool) (results []Result, ok bool) {
	facts := newFactStore()
	var lastUse []int
	if pr.release {
		lastUse = lastUses(all, source)
	}
	for i, p := range all {
		decl := p.Types
		if source[p] {
			p.Types = types.NewPackage(p.PkgPath, p.Name)
			if !checkSource(p, true) {
				p.Types = decl
				return nil, false
			}
		}
		diags, err := facts.analyse(a, p)
		if source[p] {
			facts.moveFacts(p, decl)
			p.Types = decl
		}
		if err != nil {
			return nil, false
		}
		if pr.named[p] {
			results = append(results, Result{p, diags})
		}
		p.Syntax, p.TypesInfo = nil, nil
		if pr.release && source[p] {
			for j, q := range all[:i+1] {
				if lastUse[j] == i {
					facts.release(q)
					q.Types = nil
				}
			}
		}
	}
	return results, true
}

// lastUses returns, for each package of all (dependencies first), the
// index of the last package from source that has it in its dependencies,
// directly or not, or is it (-1 for none): the package's types are needed
// until that package is analysed, and not after.
func lastUses(all []*packages.Package, source map[*packages.Package]bool) []int {
	index := make(map[*packages.Package]int, len(all))
	closure := make([][]uint64, len(all))
	last := make([]int, len(all))
	for i, p := range all {
		index[p] = i
		last[i] = -1
		set := make([]uint64, i/64+1)
		set[i/64] |= 1 << (i % 64)
		for _, imp := range p.Imports {
			for w, bits := range closure[index[imp]] {
				set[w] |= bits
			}
		}
		closure[i] = set
		if !source[p] {
			continue
		}
		for w, bits := range set {
			for b := 0; b < 64; b++ {
				if bits&(1<<b) != 0 {
					last[w*64+b] = i
				}
			}
		}
	}
	return last
}

// leanRoots returns, of the packages the go command listed, the ones to
// analyse: the named packages less those their test
// variants stand for, every import of such a package redirected to the
// variant (the variant never imports the plain package, directly or not:
// the go command recompiles for the test each package between them, so the
// graph stays acyclic). ok is false when a package has an error.
func leanRoots(pkgs []*packages.Package) (roots []*packages.Package, ok bool) {
	if len(pkgs) == 0 {
		return nil, false
	}
	clean := true
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		if len(p.Errors) > 0 || p.PkgPath == "" || p.TypesSizes == nil {
			clean = false
		}
	})
	if !clean {
		return nil, false
	}
	variant := map[string]*packages.Package{}
	for _, p := range pkgs {
		if p.ForTest != "" && p.PkgPath == p.ForTest && p.ID != p.PkgPath {
			variant[p.PkgPath] = p
		}
	}
	for _, p := range pkgs {
		if v := variant[p.PkgPath]; v != nil && p.ID == p.PkgPath {
			continue
		}
		roots = append(roots, p)
	}
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for path, dep := range p.Imports {
			if v := variant[dep.PkgPath]; v != nil && dep.ID == dep.PkgPath && v != p {
				p.Imports[path] = v
			}
		}
	})
	return roots, true
}

// readExport completes p's types from its export data.
//
// The go command's export data is the compiler's (unified IR, which also
// holds the bodies of inlinable functions), and every name its reader makes
// is part of one string holding all of it: the package's types would keep
// the whole export data for as long as they live. It is read once into
// packages of its own, written again in the indexed format (types only,
// gcexportdata.Write) and that is read into the run's packages: their
// names are strings of their own, and the export data is let go.
func readExport(p *packages.Package) error {
	if p.ExportFile == "" {
		return fmt.Errorf("%s: no export data", p.ID)
	}
	f, err := os.Open(p.ExportFile)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := gcexportdata.NewReader(f)
	if err != nil {
		return err
	}
	view := map[string]*types.Package{}
	own := map[string]*types.Package{}
	seen := map[*packages.Package]bool{}
	var visit func(map[string]*packages.Package)
	visit = func(imports map[string]*packages.Package) {
		for _, d := range imports {
			if !seen[d] {
				seen[d] = true
				view[d.PkgPath] = d.Types
				own[d.PkgPath] = types.NewPackage(d.PkgPath, d.Name)
				visit(d.Imports)
			}
		}
	}
	visit(p.Imports)
	fset := token.NewFileSet()
	tpkg, err := gcexportdata.Read(r, fset, own, p.PkgPath)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := gcexportdata.Write(&buf, fset, tpkg); err != nil {
		return err
	}
	if tpkg, err = gcexportdata.Read(&buf, p.Fset, view, p.PkgPath); err != nil {
		return err
	}
	p.Types = tpkg
	return nil
}

// checkSource parses and type-checks p as go/packages does for a package
// named by the patterns (full), or its declarations only, ignoring errors;
// false on any error of a full check.
func checkSource(p *packages.Package, full bool) bool {
	fset := p.Fset
	var files []*ast.File
	for _, name := range p.CompiledGoFiles {
		src, err := os.ReadFile(name)
		if err != nil {
			return false
		}
		f, err := ParseFile(fset, name, src)
		if f == nil || (err != nil && full) {
			return false
		}
		files = append(files, f)
	}
	var info *types.Info
	if full {
		info = &types.Info{
			Types:        map[ast.Expr]types.TypeAndValue{},
			Defs:         map[*ast.Ident]types.Object{},
			Uses:         map[*ast.Ident]types.Object{},
			Implicits:    map[ast.Node]types.Object{},
			Instances:    map[*ast.Ident]types.Instance{},
			Scopes:       map[ast.Node]*types.Scope{},
			Selections:   map[*ast.SelectorExpr]*types.Selection{},
			FileVersions: map[*ast.File]string{},
		}
	}
	failed := false
	tc := &types.Config{
		Importer: importerFunc(func(path string) (*types.Package, error) {
			if path == "unsafe" {
				return types.Unsafe, nil
			}
			if d := p.Imports[path]; d != nil && d.Types != nil && d.Types.Complete() {
				return d.Types, nil
			}
			return nil, fmt.Errorf("no metadata for %s", path)
		}),
		Error:            func(error) { failed = true },
		Sizes:            p.TypesSizes,
		IgnoreFuncBodies: !full,
	}
	if p.Module != nil && p.Module.GoVersion != "" {
		tc.GoVersion = "go" + p.Module.GoVersion
	}
	if err := types.NewChecker(tc, fset, p.Types, info).Files(files); full && (err != nil || failed) {
		return false
	}
	if !full {
		files = declarationsOnly(files)
	}
	p.Syntax, p.TypesInfo, p.IllTyped = files, info, false
	return true
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// declarationsOnly keeps, of a declarations-only type check's syntax, what
// the job model reads (analyzer.Config.ForProgram: the file declaring a job
// interface, for its generated-file comment and directives): the files that
// declare a type other than a struct, without their function bodies.
func declarationsOnly(files []*ast.File) []*ast.File {
	var kept []*ast.File
	for _, f := range files {
		keep := false
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				d.Body = nil
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok {
						if _, isStruct := ts.Type.(*ast.StructType); !isStruct {
							keep = true
						}
					}
				}
			}
		}
		if keep {
			kept = append(kept, f)
		}
	}
	return kept
}
