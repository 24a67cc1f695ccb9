package load

import (
	"fmt"
	"go/types"
	"os"
	"reflect"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/types/objectpath"
)

// factStore runs one analyzer over packages one at a time, dependencies
// first, and passes facts from a package to the packages importing it,
// directly or not, as the checker does (an object's fact goes downstream
// where the object may be visible: see visibleFrom).
type factStore struct {
	objects  map[objectFactKey]ownedFact
	packages map[packageFactKey]ownedFact
	// index numbers the packages; deps[index[p]] is the set of p and the
	// packages it imports, directly or not, as a bit set (a map per
	// package would cost megabytes on a large graph).
	index map[*packages.Package]int
	deps  [][]uint64
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
	return &factStore{objects: map[objectFactKey]ownedFact{}, packages: map[packageFactKey]ownedFact{}, index: map[*packages.Package]int{}}
}

// id numbers a package, and computes its dependency set the first time.
func (s *factStore) id(p *packages.Package) int {
	if i, ok := s.index[p]; ok {
		return i
	}
	var set []uint64
	add := func(j int) {
		for len(set) <= j/64 {
			set = append(set, 0)
		}
		set[j/64] |= 1 << (j % 64)
	}
	for _, imp := range p.Imports {
		j := s.id(imp)
		for w, bits := range s.deps[j] {
			for len(set) <= w {
				set = append(set, 0)
			}
			set[w] |= bits
		}
	}
	i := len(s.deps)
	s.index[p] = i
	add(i)
	s.deps = append(s.deps, set)
	return i
}

// imports reports whether p is owner or imports it, directly or not.
func (s *factStore) imports(p, owner *packages.Package) bool {
	set, j := s.deps[s.id(p)], s.id(owner)
	return j/64 < len(set) && set[j/64]&(1<<(j%64)) != 0
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
	if !s.imports(p, owner) {
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
			if !ok || !s.imports(p, f.owner) {
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
				if s.imports(p, f.owner) {
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

// moveFacts moves the facts p's analysis exported about its full type
// check's package and objects onto decl, the declarations' types its
// importers see: each object's fact onto the object of the same path
// (objectpath), as go vet passes facts between processes. A fact about an
// object without a path (a local one) no importer can ask for; it is
// dropped.
func (s *factStore) moveFacts(p *packages.Package, decl *types.Package) {
	full := p.Types
	if full == decl {
		return
	}
	for k, f := range s.packages {
		if k.pkg == full {
			delete(s.packages, k)
			s.packages[packageFactKey{decl, k.t}] = f
		}
	}
	var enc objectpath.Encoder
	for k, f := range s.objects {
		if k.obj.Pkg() != full {
			continue
		}
		delete(s.objects, k)
		path, err := enc.For(k.obj)
		if err != nil {
			continue
		}
		if obj, err := objectpath.Object(decl, path); err == nil {
			s.objects[objectFactKey{obj, k.t}] = f
		}
	}
}

// release drops the facts p exported: no package left to analyse may see
// them.
func (s *factStore) release(p *packages.Package) {
	for k, f := range s.objects {
		if f.owner == p {
			delete(s.objects, k)
		}
	}
	for k, f := range s.packages {
		if f.owner == p {
			delete(s.packages, k)
		}
	}
}
