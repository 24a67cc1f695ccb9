package load

import (
	"context"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"os"
	"strings"

	"golang.org/x/tools/go/packages"
)

// Check type-checks the analysed packages again with some files changed
// (absolute path to new content), as a rewrite leaves them: each package
// that has a changed file, and each package analysed from source that
// imports one of those, directly or not, from source; every other package
// from the types the analysis left (the packages analysed from source) or
// export data. It returns the type errors. ok is false when it cannot stand
// in for a full type check: the load was not analysed by the lean path, or
// a package to check uses cgo (its compiled files are not its source).
//
// It consumes the load: the types of the packages it checks again are
// dropped before it starts, and each package's syntax once it is checked.
func (p *Program) Check(changed map[string][]byte) (problems []string, ok bool) {
	if !p.analysed {
		return nil, false
	}
	roots := make(map[*packages.Package]bool, len(p.roots))
	for _, r := range p.roots {
		roots[r] = true
	}
	// The packages to check: those with a changed file, then their
	// importers among the roots, in dependency order.
	affected := map[*packages.Package]bool{}
	var order []*packages.Package
	packages.Visit(p.roots, nil, func(pkg *packages.Package) {
		if !roots[pkg] {
			return
		}
		hit := false
		for _, f := range pkg.CompiledGoFiles {
			if _, ok := changed[f]; ok {
				hit = true
			}
		}
		for _, f := range pkg.GoFiles {
			if _, ok := changed[f]; ok {
				hit = true
			}
		}
		for _, dep := range pkg.Imports {
			hit = hit || affected[dep]
		}
		if hit {
			affected[pkg] = true
			order = append(order, pkg)
		}
	})
	for _, pkg := range order {
		if len(pkg.CompiledGoFiles) != len(pkg.GoFiles) {
			return nil, false // cgo
		}
	}
	for _, pkg := range order {
		pkg.Types = nil
	}

	fset := token.NewFileSet()
	checked := make(map[*packages.Package]*types.Package, len(order))
	for _, pkg := range order {
		files := make([]*ast.File, 0, len(pkg.CompiledGoFiles))
		for _, name := range pkg.CompiledGoFiles {
			content, isChanged := changed[name]
			if !isChanged {
				var err error
				if content, err = os.ReadFile(name); err != nil {
					return append(problems, err.Error()), true
				}
			}
			f, err := ParseFile(fset, name, content)
			if err != nil {
				return append(problems, err.Error()), true
			}
			files = append(files, f)
		}
		conf := types.Config{
			Importer: importerFunc(func(path string) (*types.Package, error) {
				if path == "unsafe" {
					return types.Unsafe, nil
				}
				dep := pkg.Imports[path]
				switch {
				case dep == nil:
					return nil, fmt.Errorf("no package for import %q", path)
				case affected[dep]:
					if tp := checked[dep]; tp != nil {
						return tp, nil
					}
					return nil, fmt.Errorf("import cycle through %q", path)
				case dep.Types == nil || !dep.Types.Complete():
					return nil, fmt.Errorf("no types for import %q", path)
				}
				return dep.Types, nil
			}),
			Sizes: pkg.TypesSizes,
			Error: func(err error) { problems = append(problems, err.Error()) },
		}
		if pkg.Module != nil && pkg.Module.GoVersion != "" {
			conf.GoVersion = "go" + pkg.Module.GoVersion
		}
		tp, _ := conf.Check(pkg.PkgPath, fset, files, nil)
		checked[pkg] = tp
	}
	return problems, true
}

// Verify type-checks the packages the patterns name, with overlay (absolute
// path to content) standing in for files on disk, every package from source
// as the go command lists it: the check that decides when [Program.Check]
// cannot, or finds problems. It returns every load, parse and type error.
func Verify(ctx context.Context, cfg Config, patterns []string, overlay map[string][]byte) ([]string, error) {
	// Every package is type-checked from source: export data would mean
	// compiling the rewritten module, which costs more than checking it.
	pc := cfg.packagesConfig(ctx, packages.NeedName|packages.NeedFiles|packages.NeedCompiledGoFiles|packages.NeedImports|packages.NeedDeps|packages.NeedTypes)
	pc.Overlay = overlay
	pkgs, err := packages.Load(pc, patterns...)
	if err != nil {
		return nil, fmt.Errorf("type-check %s%s: %w", strings.Join(patterns, " "), tagsSuffix(cfg.Tags), err)
	}
	var out []string
	seen := map[string]bool{}
	packages.Visit(pkgs, nil, func(pkg *packages.Package) {
		for _, e := range pkg.Errors {
			if msg := e.Error(); !seen[msg] {
				seen[msg] = true
				out = append(out, msg)
			}
		}
	})
	return out, nil
}
