package load

import (
	"fmt"
	"go/types"
	"os"
	"reflect"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/packages"
)

// factStore runs one analyzer over packages one at a time, dependencies
// first, and passes facts from a package to the packages importing it,
// directly or not, as the checker does (an object's fact goes downstream
// where the object may be visible: see visibleFrom).
type factStore struct {
	objects  map[objectFactKey]ownedFact
	packages map[packageFactKey]ownedFact
	deps     map[*packages.Package]map[*packages.Package]bool
}

type objectFactKey struct {
	obj types.Object
	t   reflect.Type
}

type packageFactKey struct {
	pkg *types.Package
	t   reflect.Type
}

type ownedFact struct {
	owner *packages.Package
	fact  analysis.Fact
}

func newFactStore() *factStore {
	return &factStore{objects: map[objectFactKey]ownedFact{}, packages: map[packageFactKey]ownedFact{}, deps: map[*packages.Package]map[*packages.Package]bool{}}
}

// depsOf is the set of p and the packages it imports, directly or not.
func (s *factStore) depsOf(p *packages.Package) map[*packages.Package]bool {
	if d, ok := s.deps[p]; ok {
		return d
	}
	d := map[*packages.Package]bool{p: true}
	for _, imp := range p.Imports {
		for q := range s.depsOf(imp) {
			d[q] = true
		}
	}
	s.deps[p] = d
	return d
}

// visibleFrom reports whether the checker would pass a fact about obj,
// exported by owner, on to p: the checker keeps, at each import edge, the
// facts about objects that may be visible to an importer of the package
// (its exportedFrom): types, constants, fields and methods always, other
// functions and variables only from their own package to its direct
// importers.
func (s *factStore) visibleFrom(p, owner *packages.Package, obj types.Object) bool {
	if owner == p {
		return true
	}
	if !s.depsOf(p)[owner] {
		return false
	}
	direct := false
	for _, imp := range p.Imports {
		direct = direct || imp == owner
	}
	switch obj := obj.(type) {
	case *types.Func:
		return obj.Signature().Recv() != nil || direct && obj.Exported() && obj.Pkg() == owner.Types
	case *types.Var:
		return obj.IsField() || direct && obj.Pkg() == owner.Types
	case *types.TypeName, *types.Const:
		return true
	}
	return false
}

// analyse runs a on p and returns its diagnostics.
func (s *factStore) analyse(a *analysis.Analyzer, p *packages.Package) (diags []analysis.Diagnostic, err error) {
	module := &analysis.Module{}
	if m := p.Module; m != nil {
		module = &analysis.Module{Path: m.Path, Version: m.Version, GoVersion: m.GoVersion}
	}
	pass := &analysis.Pass{
		Analyzer:     a,
		Fset:         p.Fset,
		Files:        p.Syntax,
		OtherFiles:   p.OtherFiles,
		IgnoredFiles: p.IgnoredFiles,
		Pkg:          p.Types,
		TypesInfo:    p.TypesInfo,
		TypesSizes:   p.TypesSizes,
		Module:       module,
		ResultOf:     map[*analysis.Analyzer]any{},
		Report:       func(d analysis.Diagnostic) { diags = append(diags, d) },
		ReadFile:     os.ReadFile,
		ImportObjectFact: func(obj types.Object, ptr analysis.Fact) bool {
			f, ok := s.objects[objectFactKey{obj, reflect.TypeOf(ptr)}]
			if !ok || !s.visibleFrom(p, f.owner, obj) {
				return false
			}
			reflect.ValueOf(ptr).Elem().Set(reflect.ValueOf(f.fact).Elem())
			return true
		},
		ExportObjectFact: func(obj types.Object, fact analysis.Fact) {
			s.objects[objectFactKey{obj, reflect.TypeOf(fact)}] = ownedFact{p, fact}
		},
		ImportPackageFact: func(pkg *types.Package, ptr analysis.Fact) bool {
			f, ok := s.packages[packageFactKey{pkg, reflect.TypeOf(ptr)}]
			if !ok || !s.depsOf(p)[f.owner] {
				return false
			}
			reflect.ValueOf(ptr).Elem().Set(reflect.ValueOf(f.fact).Elem())
			return true
		},
		ExportPackageFact: func(fact analysis.Fact) {
			s.packages[packageFactKey{p.Types, reflect.TypeOf(fact)}] = ownedFact{p, fact}
		},
		AllObjectFacts: func() []analysis.ObjectFact {
			var out []analysis.ObjectFact
			for k, f := range s.objects {
				if s.visibleFrom(p, f.owner, k.obj) {
					out = append(out, analysis.ObjectFact{Object: k.obj, Fact: f.fact})
				}
			}
			return out
		},
		AllPackageFacts: func() []analysis.PackageFact {
			var out []analysis.PackageFact
			for k, f := range s.packages {
				if s.depsOf(p)[f.owner] {
					out = append(out, analysis.PackageFact{Package: k.pkg, Fact: f.fact})
				}
			}
			return out
		},
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("analyse %s: %v", p.PkgPath, r)
		}
	}()
	if _, err := a.Run(pass); err != nil {
		return nil, err
	}
	return diags, nil
}
