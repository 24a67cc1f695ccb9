package rewrite

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/types"

	"golang.org/x/tools/go/packages"
)

// recheck type-checks the loaded packages of the main module again with the
// rewritten files, reusing the load's syntax for unchanged files and its
// types for every package outside the module (a rewrite never changes
// them). It costs a type check of the module alone. ok is false when it
// cannot stand in for a full load: a cgo package, or a main-module package
// the load did not check from source (a pattern naming part of the module).
// It consumes the load: once it runs, the module's packages have neither
// their old types nor their syntax (each package's syntax is let go as soon
// as it is checked), so a whole module is never held twice.
func recheck(pkgs []*packages.Package, changed map[string][]byte) (problems []string, ok bool) {
	if len(pkgs) == 0 {
		return nil, true
	}
	roots := make(map[*packages.Package]bool, len(pkgs))
	for _, p := range pkgs {
		roots[p] = true
	}
	for _, p := range pkgs {
		if p.Types == nil || p.Fset == nil || len(p.Syntax) != len(p.CompiledGoFiles) || len(p.CompiledGoFiles) != len(p.GoFiles) {
			return nil, false // cgo, or not loaded from source
		}
		for _, dep := range p.Imports {
			if dep.Module != nil && dep.Module.Main && !roots[dep] {
				return nil, false
			}
		}
	}

	// The old types of the module's packages are not read again: the new
	// ones stand in for them.
	for _, p := range pkgs {
		p.Types = nil
	}

	// Imports before importers.
	var order []*packages.Package
	seen := map[*packages.Package]bool{}
	var visit func(p *packages.Package)
	visit = func(p *packages.Package) {
		if seen[p] || !roots[p] {
			return
		}
		seen[p] = true
		for _, dep := range p.Imports {
			visit(dep)
		}
		order = append(order, p)
	}
	for _, p := range pkgs {
		visit(p)
	}

	checked := make(map[*packages.Package]*types.Package, len(order))
	for _, p := range order {
		fset := p.Fset
		files := make([]*ast.File, len(p.Syntax))
		for i, f := range p.Syntax {
			name := fset.File(f.FileStart).Name()
			content, isChanged := changed[name]
			if !isChanged {
				files[i] = f
				continue
			}
			nf, err := parser.ParseFile(fset, name, content, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return append(problems, err.Error()), true
			}
			files[i] = nf
		}
		conf := types.Config{
			Importer: importerFunc(func(path string) (*types.Package, error) {
				if path == "unsafe" {
					return types.Unsafe, nil
				}
				dep := p.Imports[path]
				switch {
				case dep == nil:
					return nil, fmt.Errorf("no package for import %q", path)
				case roots[dep]:
					if tp := checked[dep]; tp != nil {
						return tp, nil
					}
					return nil, fmt.Errorf("import cycle through %q", path)
				case dep.Types == nil:
					return nil, fmt.Errorf("no types for import %q", path)
				}
				return dep.Types, nil
			}),
			Sizes: p.TypesSizes,
			Error: func(err error) { problems = append(problems, err.Error()) },
		}
		if p.Module != nil && p.Module.GoVersion != "" {
			conf.GoVersion = "go" + p.Module.GoVersion
		}
		tp, _ := conf.Check(p.PkgPath, fset, files, nil)
		checked[p] = tp
		p.Syntax = nil
	}
	return problems, true
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }
