package analyzer

import (
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// A run method makes a type a job only when it is the type's own: declared
// on it, or promoted from a type of the analysed module(s), or from a type
// that is itself a job (a job interface, or a type whose own method set has
// UniqueKey() string and a run method). A Do or Run promoted from the
// standard library or from a dependency that is no job (sync.Once's Do,
// *exec.Cmd's Run, *http.Client's Do) says nothing about the type: a cache
// entry that embeds a sync.Once is no job.

// OwnPackageFact marks a package of the analysed module(s) (a package with
// no module version that is not in the standard library), so that importing
// packages can tell a run method promoted from one of the module's types
// from one promoted from a dependency's.
type OwnPackageFact struct{}

// AFact marks OwnPackageFact as an analysis fact.
func (*OwnPackageFact) AFact() {}

// String describes the fact, as analysistest fact expectations match it.
func (*OwnPackageFact) String() string { return "package of the analysed module" }

// isStandardPath reports whether an import path is the standard library's,
// by the go command's own rule: its first element has no dot.
func isStandardPath(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// ownedBy reports whether a package belongs to the analysed module(s).
type ownedBy func(pkg *types.Package) bool

// hasOwnRunMethod reports whether the method set of *t has a run method that
// is t's own (see above). isJobIface decides for an embedded interface.
func hasOwnRunMethod(t *types.Named, own ownedBy, isJobIface func(*types.TypeName, *types.Interface) bool) bool {
	ms := types.NewMethodSet(types.NewPointer(t))
	for sel := range ms.Methods() {
		fn, ok := sel.Obj().(*types.Func)
		if !ok || !runMethods[fn.Name()] {
			continue
		}
		if len(sel.Index()) == 1 || fn.Pkg() == nil || fn.Pkg() == t.Obj().Pkg() || own(fn.Pkg()) {
			return true
		}
		if promotedFromJob(fn, isJobIface) {
			return true
		}
	}
	return false
}

// promotedFromJob reports whether a method of another module is declared on
// a type that is itself a job: a job interface, or a type whose method set
// has UniqueKey() string and a run method of its own.
func promotedFromJob(fn *types.Func, isJobIface func(*types.TypeName, *types.Interface) bool) bool {
	recv := fn.Signature().Recv()
	if recv == nil {
		return false
	}
	t := recv.Type()
	if ptr, ok := t.(*types.Pointer); ok {
		t = ptr.Elem()
	}
	named, ok := types.Unalias(t).(*types.Named)
	if !ok {
		return false
	}
	named = named.Origin()
	if it, ok := named.Underlying().(*types.Interface); ok {
		return isJobIface(named.Obj(), it)
	}
	// The declaring type's own methods only: a type of another module is
	// judged within that module, where its declared methods are its own.
	legacy, run := false, false
	for m := range named.Methods() {
		switch {
		case m.Name() == legacyName:
			legacy = isLegacySignature(m)
		case runMethods[m.Name()]:
			run = true
		}
	}
	return legacy && run
}

// ownPackage reports whether pkg belongs to the analysed module(s): this
// package, or one whose analysis marked it (OwnPackageFact).
func (p *pass) ownPackage(pkg *types.Package) bool {
	if pkg == p.Pkg {
		return true
	}
	if p.prog != nil {
		return p.prog.own[pkg.Path()]
	}
	return p.ImportPackageFact(pkg, new(OwnPackageFact))
}

// ownModule reports whether the package a pass analyses belongs to the
// analysed module(s): a module without a version (the main module, a
// workspace's), or, outside module mode, a path that is not the standard
// library's (the standard library has no module).
func ownModule(path string, mod *analysis.Module) bool {
	if mod != nil && mod.Path != "" {
		return mod.Version == ""
	}
	return !isStandardPath(path)
}

// runsOwn reports whether a type that implements a job interface or has the
// job shape has a run method of its own. With -interface, the named
// interfaces decide (their methods need not be run methods at all), so only
// a type read as a job by its shape must pass it.
func (p *pass) runsOwn(t *types.Named) bool {
	return hasOwnRunMethod(t, p.ownPackage, p.s.isJobInterface)
}
