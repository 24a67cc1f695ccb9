package analyzer

import (
	"go/ast"
	"go/types"
	"sort"
	"sync"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/packages"
)

// Program is the job model of everything one run loads: every package of a
// module, or of the modules of a go.work workspace, with their
// dependencies. The analysis of one package sees only what that package
// imports; a Program also sees the packages that import it, so it decides
// which types are jobs the same way wherever a job and its interface are
// declared, whether or not the job's package imports the interface.
//
// In a Program:
//
//   - a job interface is found by the same rule as in one package (the
//     default detection or -interface), in any loaded package; it is in the
//     run when its module is one of the run's (no module version), and it
//     migrates when it is in the run and not left as it is (generated file,
//     directive, clash);
//   - a named type of the run is a job when it implements a job interface
//     of any loaded package, or, where the per-package rule would read it
//     as a job by shape, when it is job-shaped;
//   - a job type that implements no migrating job interface but one the run
//     cannot edit (declared in a dependency module, or kept) stays as it is
//     and is reported as external;
//   - a UniqueKey promoted from an embedded type migrates at its declaration
//     only when no type of the run that promotes it is a non-job; otherwise
//     the job types get delegating methods.
//
// Build one with [Config.ForProgram]; drivers that see one package at a time
// (go vet, go fix, golangci-lint) use the per-package rule instead.
type Program struct {
	// jobs are the run's job types, by typeKey.
	jobs map[string]bool
	// external maps a job type that implements no migrating interface to
	// the interface the run does not migrate that it implements.
	external map[string]string
	// promoters maps a legacy method (funcKey) to the non-job types of the
	// run that promote it.
	promoters map[string][]string
	// own are the paths of the run's own packages (the modules it edits,
	// never the standard library): a run method promoted from one of their
	// types makes a job, one promoted from elsewhere does not.
	own map[string]bool
	// migrating records the methods the analysis renames to ConcurrencyKey
	// (funcKey), as MigratedFact does for the per-package drivers: a
	// package's analysis records them before its importers' analyses read
	// them (the driver runs dependencies first).
	migrating sync.Map
	// usedAs are the job types of the run a package uses as an interface
	// that requires UniqueKey and does not migrate (typeKey to that
	// interface and the using package), found by an analysis over the
	// model: see [Revise].
	usedAs sync.Map
	// kept are the job types such a use keeps as they are, from the
	// previous analysis (typeKey to the interface and the using package).
	kept map[string]string
}

// markUsedAs records that a package uses the job type tn as an interface
// that requires UniqueKey and does not migrate.
func (pr *Program) markUsedAs(tn *types.TypeName, iface, pkg string) {
	if _, ok := pr.kept[typeKey(tn)]; !ok {
		pr.usedAs.LoadOrStore(typeKey(tn), iface+" (in "+pkg+")")
	}
}

// keptFor says why a job type of the run is kept as it is: a package uses
// it as an interface requiring UniqueKey that does not migrate ("" if not).
func (p *pass) keptFor(tn *types.TypeName) string {
	if p.prog == nil {
		return ""
	}
	return p.prog.kept[typeKey(tn)]
}

// anyMigrating reports whether an analysis over the model has renamed a
// method yet.
func (pr *Program) anyMigrating() bool {
	found := false
	pr.migrating.Range(func(any, any) bool { found = true; return false })
	return found
}

// programs maps an analyzer built by ForProgram or Revise to its settings.
var programs sync.Map // *analysis.Analyzer -> *settings

// Revise returns, after a run of a (an analyzer built by
// [Config.ForProgram] or Revise) over the whole load, the analyzer to run
// over it again, and true, when that run found a job type that migrates
// used, in some package, as an interface that requires UniqueKey and does
// not migrate (not a job interface, or one of a dependency): only a second
// run keeps that job type as it is (an external finding at its
// declaration) instead of migrating it in its own package before the use
// is seen, so that the result still builds. Otherwise it returns nil and
// false.
func Revise(a *analysis.Analyzer) (*analysis.Analyzer, bool) {
	v, ok := programs.Load(a)
	if !ok {
		return nil, false
	}
	s := v.(*settings)
	kept := map[string]string{}
	for k, why := range s.prog.kept {
		kept[k] = why
	}
	added := false
	s.prog.usedAs.Range(func(k, why any) bool {
		kept[k.(string)] = why.(string)
		added = true
		return true
	})
	if !added {
		return nil, false
	}
	ns := *s
	ns.prog = &Program{jobs: s.prog.jobs, external: s.prog.external, promoters: s.prog.promoters, own: s.prog.own, kept: kept}
	na := newAnalyzer(&ns)
	programs.Store(na, &ns)
	return na, true
}

func typeKey(tn *types.TypeName) string {
	if tn.Pkg() == nil {
		return tn.Name()
	}
	return tn.Pkg().Path() + "." + tn.Name()
}

func funcKey(fn *types.Func) string { return fn.Origin().FullName() }

func (pr *Program) isJob(tn *types.TypeName) bool { return pr.jobs[typeKey(tn)] }

func (pr *Program) markMigrating(fn *types.Func) { pr.migrating.Store(funcKey(fn), true) }

func (pr *Program) migrates(fn *types.Func) bool {
	_, ok := pr.migrating.Load(funcKey(fn))
	return ok
}

func (pr *Program) nonJobPromoters(fn *types.Func) []string { return pr.promoters[funcKey(fn)] }

// externalFor names the interface this run does not migrate that a job type
// with no migrating interface implements ("" if none).
func (p *pass) externalFor(tn *types.TypeName) string {
	if p.prog == nil {
		return ""
	}
	return p.prog.external[typeKey(tn)]
}

// inRun reports whether a loaded package belongs to one of the run's own
// modules (the main module, the modules of a workspace, or no module at
// all): a dependency module has a version.
func inRun(pkg *packages.Package) bool {
	return pkg.Module == nil || pkg.Module.Version == ""
}

// ForProgram returns an analyzer configured by c that takes the job model
// of pkgs, every package a run loaded (the roots; their dependencies are
// visited too). Drivers that load a whole module or workspace at once
// (migrate-unique rewrite and lint) run it over that same load; its
// decisions then hold over the whole run, not one package at a time.
func (c Config) ForProgram(pkgs []*packages.Package) (*analysis.Analyzer, error) {
	s, err := c.settings()
	if err != nil {
		return nil, err
	}
	s.prog = newProgram(s, pkgs)
	a := newAnalyzer(s)
	programs.Store(a, s)
	return a, nil
}

// programIface is a job interface of a loaded package.
type programIface struct {
	obj      *types.TypeName
	iface    *types.Interface
	generic  bool
	migrates bool
}

func newProgram(s *settings, roots []*packages.Package) *Program {
	pr := &Program{jobs: map[string]bool{}, external: map[string]string{}, promoters: map[string][]string{}, own: map[string]bool{}}
	var all []*packages.Package
	packages.Visit(roots, nil, func(pkg *packages.Package) {
		if pkg.Types != nil {
			all = append(all, pkg)
		}
	})
	for _, pkg := range all {
		if pkg.Module != nil {
			pr.own[pkg.PkgPath] = pkg.Module.Version == ""
		} else {
			pr.own[pkg.PkgPath] = !isStandardPath(pkg.PkgPath)
		}
	}
	own := func(pkg *types.Package) bool { return pr.own[pkg.Path()] }
	runsOwn := func(t *types.Named) bool { return hasOwnRunMethod(t, own, s.isJobInterface) }

	// The job interfaces, by package: a type is checked against them all.
	var ifaces []programIface
	for _, pkg := range all {
		scope := pkg.Types.Scope()
		for _, name := range scope.Names() {
			tn, ok := scope.Lookup(name).(*types.TypeName)
			if !ok || tn.IsAlias() {
				continue
			}
			it, ok := tn.Type().Underlying().(*types.Interface)
			if !ok || !s.isJobInterface(tn, it) {
				continue
			}
			j := programIface{obj: tn, iface: it, migrates: inRun(pkg) && !keptInterface(pkg, tn, it)}
			if n, ok := tn.Type().(*types.Named); ok && n.TypeParams().Len() > 0 {
				j.generic = true
			}
			ifaces = append(ifaces, j)
		}
	}

	// sees reports whether pkg is or imports (transitively) a package
	// declaring an interface -interface names: only a package that sees
	// none reads job-shaped types as jobs.
	seen := map[*packages.Package]bool{}
	var sees func(pkg *packages.Package) bool
	sees = func(pkg *packages.Package) bool {
		if v, ok := seen[pkg]; ok {
			return v
		}
		seen[pkg] = false
		v := s.declaresNamed(pkg.Types)
		for _, dep := range pkg.Imports {
			if v {
				break
			}
			v = sees(dep)
		}
		seen[pkg] = v
		return v
	}

	type candidate struct {
		tn    *types.TypeName
		named *types.Named
	}
	var cands []candidate
	for _, pkg := range all {
		if !inRun(pkg) {
			continue
		}
		shape := len(s.interfaces) == 0 || !sees(pkg)
		scope := pkg.Types.Scope()
		for _, name := range scope.Names() {
			tn, ok := scope.Lookup(name).(*types.TypeName)
			if !ok || tn.IsAlias() {
				continue
			}
			named, ok := tn.Type().(*types.Named)
			if !ok || types.IsInterface(named) {
				continue
			}
			cands = append(cands, candidate{tn, named})
			key := typeKey(tn)
			migrates, kept := false, ""
			ownRun := len(s.interfaces) > 0 || runsOwn(named)
			for _, j := range ifaces {
				if !ownRun || !implementsIface(named, j.iface, j.generic) {
					continue
				}
				if j.migrates {
					migrates = true
				} else if kept == "" {
					kept = types.TypeString(j.obj.Type(), nil)
				}
			}
			switch {
			case migrates:
				pr.jobs[key] = true
			case kept != "":
				pr.jobs[key] = true
				if _, ok := pr.external[key]; !ok {
					pr.external[key] = kept
				}
			case shape && jobShaped(named) && runsOwn(named):
				pr.jobs[key] = true
			}
			if migrates {
				delete(pr.external, key) // another variant of the package sees a migrating one
			}
		}
	}

	// The non-job types of the run that promote a legacy method of the run.
	seenPromoter := map[string]bool{}
	for _, c := range cands {
		if pr.jobs[typeKey(c.tn)] {
			continue
		}
		obj, index, _ := types.LookupFieldOrMethod(c.named, true, c.tn.Pkg(), legacyName)
		fn, ok := obj.(*types.Func)
		if !ok || len(index) < 2 || !isLegacySignature(fn) {
			continue
		}
		k := funcKey(fn)
		name := c.tn.Name()
		if c.tn.Pkg() != nil && (fn.Pkg() == nil || fn.Pkg().Path() != c.tn.Pkg().Path()) {
			name = c.tn.Pkg().Name() + "." + name
		}
		if !seenPromoter[k+" "+name] {
			seenPromoter[k+" "+name] = true
			pr.promoters[k] = append(pr.promoters[k], name)
		}
	}
	for k := range pr.promoters {
		sort.Strings(pr.promoters[k])
	}
	return pr
}

// implementsIface reports whether t or *t implements a job interface, as
// pass.implements does.
func implementsIface(t *types.Named, it *types.Interface, generic bool) bool {
	if !generic && t.TypeParams().Len() == 0 {
		return types.Implements(t, it) || types.Implements(types.NewPointer(t), it)
	}
	for m := range it.Methods() {
		obj, _, _ := types.LookupFieldOrMethod(t, true, m.Pkg(), m.Name())
		fn, ok := obj.(*types.Func)
		if !ok || (m.Name() == legacyName && !isLegacySignature(fn)) {
			return false
		}
	}
	return true
}

// keptInterface reports whether the analysis of its own package leaves a
// job interface of the run as it is: declared in a generated file, silenced
// by a directive, clashing with the new methods, or getting UniqueKey from
// another package. Its jobs then keep UniqueKey too.
func keptInterface(pkg *packages.Package, tn *types.TypeName, it *types.Interface) bool {
	if hasMember(tn.Type(), tn.Pkg(), keyName) || hasMember(tn.Type(), tn.Pkg(), limitName) {
		return true
	}
	if lm := legacyMethod(it); lm == nil || lm.Pkg() == nil || lm.Pkg().Path() != tn.Pkg().Path() {
		return true
	}
	if pkg.Fset == nil {
		return false
	}
	for _, f := range pkg.Syntax {
		tf := pkg.Fset.File(f.FileStart)
		if tf == nil || tf != pkg.Fset.File(tn.Pos()) {
			continue
		}
		fi := newFileInfo(pkg.Fset, f)
		if fi.generated {
			return true
		}
		var spec *ast.TypeSpec
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Pos() == tn.Pos() {
				spec = ts
			}
			return spec == nil
		})
		return spec != nil && fi.suppressed(pkg.Fset.Position(spec.Name.Pos()).Line)
	}
	return false
}
