package analyzer

import (
	"fmt"
	"go/ast"
	"go/types"

	"golang.org/x/tools/refactor/satisfy"
)

// checkConversions reports the places where a migrated job value must still
// satisfy an interface that requires UniqueKey (a Keyer in a helper, a
// third-party interface): after the fix the job no longer implements it,
// and only a person can decide whether the interface or the job changes.
func (p *pass) checkConversions() {
	if len(p.migrating) == 0 && len(p.jobIfaces) == 0 && !p.seesMigrated() {
		return
	}
	var f satisfy.Finder
	if !findConstraints(&f, p.TypesInfo, p.Files) {
		return
	}
	seen := map[string]bool{}
	for c := range f.Result {
		it, ok := c.LHS.Underlying().(*types.Interface)
		if !ok {
			continue
		}
		lm := legacyMethod(it)
		if lm == nil {
			continue
		}
		obj, _, _ := types.LookupFieldOrMethod(c.RHS, false, p.Pkg, legacyName)
		fn, ok := obj.(*types.Func)
		if !ok {
			continue
		}
		var msg string
		lhs, rhs := types.TypeString(c.LHS, p.qualify), types.TypeString(c.RHS, p.qualify)
		switch lhsMigrates, rhsMigrates := p.isMigrating(lm.Origin()), p.isMigrating(fn.Origin()); {
		case rhsMigrates && !lhsMigrates:
			if tn := declaringType(c.RHS, fn); tn != nil && p.prog != nil && p.prog.isJob(tn) {
				// The whole run's model keeps that job as it is on its
				// next run (Revise), so the use still builds.
				p.prog.markUsedAs(tn, types.TypeString(c.LHS, nil), p.Pkg.Path())
			}
			msg = fmt.Sprintf("%s is used as %s, which requires UniqueKey: once migrated it no longer implements %s; migrate that interface or keep a UniqueKey wrapper by hand", rhs, lhs, lhs)
		case lhsMigrates && !rhsMigrates && !p.isJobValue(c.RHS):
			// A helper interface a job interface embeds migrates with it;
			// a type that is no job but is used as it keeps UniqueKey.
			msg = fmt.Sprintf("%s is used as %s, which migrates to ConcurrencyKey with the job interfaces, but %s is no job and keeps UniqueKey: give it ConcurrencyKey and ConcurrencyLimit by hand", rhs, lhs, rhs)
		case lhsMigrates && !rhsMigrates && p.unseenJob(c.RHS, fn):
			msg = fmt.Sprintf("%s is used as %s, which migrates, but %s's package does not see that interface (it implements it without importing it), so its UniqueKey was not migrated: migrate %s by hand, or import the interface there (var _ %s = ...) and run again", rhs, lhs, rhs, rhs, lhs)
		default:
			continue
		}
		if seen[lhs+"="+rhs] {
			continue
		}
		seen[lhs+"="+rhs] = true
		at := p.declOf(c.LHS, c.RHS)
		if at == nil {
			at = p.useOf(c.LHS, c.RHS)
		}
		if at == nil {
			continue // no position in this package's files to report at
		}
		p.report(at, at, CodeExternal, msg, nil)
	}
}

// findConstraints runs the satisfy finder, which panics on code it does not
// expect; a package it cannot read gets no conversion report.
func findConstraints(f *satisfy.Finder, info *types.Info, files []*ast.File) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	f.Find(info, files)
	return true
}

// declOf returns where to report a conversion problem: the interface's
// declaration when it is in this package, else the job type's, else nil
// (the use is reported instead).
func (p *pass) declOf(types_ ...types.Type) ast.Node {
	for _, t := range types_ {
		if ptr, ok := t.(*types.Pointer); ok {
			t = ptr.Elem()
		}
		if n, ok := t.(*types.Named); ok {
			if td, ok := p.typeSpecs[n.Origin().Obj()]; ok {
				return td.spec.Name
			}
		}
	}
	return nil
}

// useOf finds the use that makes a value of type rhs an lhs: an expression
// of type rhs passed, assigned, returned or stored where an lhs is
// expected. It prefers a use whose target has type lhs exactly, else the
// first use of a value of type rhs in such a place, else the first
// expression of type rhs.
func (p *pass) useOf(lhs, rhs types.Type) ast.Node {
	var exact, first, anyUse ast.Node
	isRHS := func(e ast.Expr) bool {
		t := p.TypesInfo.TypeOf(e)
		return t != nil && types.Identical(t, rhs)
	}
	target := func(e ast.Expr, want types.Type) {
		if !isRHS(e) {
			return
		}
		if first == nil {
			first = e
		}
		if exact == nil && want != nil && types.Identical(want, lhs) {
			exact = e
		}
	}
	for _, f := range p.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			if exact != nil {
				return false
			}
			if e, ok := n.(ast.Expr); ok && anyUse == nil && isRHS(e) {
				anyUse = e
			}
			switch x := n.(type) {
			case *ast.CallExpr:
				sig, ok := p.TypesInfo.TypeOf(x.Fun).(*types.Signature)
				if !ok {
					if tv, ok := p.TypesInfo.Types[x.Fun]; ok && tv.IsType() && len(x.Args) == 1 {
						target(x.Args[0], tv.Type) // a conversion
					}
					return true
				}
				for i, a := range x.Args {
					var want types.Type
					switch {
					case sig.Variadic() && i >= sig.Params().Len()-1:
						if sl, ok := sig.Params().At(sig.Params().Len() - 1).Type().(*types.Slice); ok {
							want = sl.Elem()
						}
					case i < sig.Params().Len():
						want = sig.Params().At(i).Type()
					}
					target(a, want)
				}
			case *ast.CompositeLit:
				var elem types.Type
				switch u := types.Unalias(p.TypesInfo.TypeOf(x)).Underlying().(type) {
				case *types.Slice:
					elem = u.Elem()
				case *types.Array:
					elem = u.Elem()
				case *types.Map:
					elem = u.Elem()
				}
				for _, e := range x.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						e = kv.Value
					}
					target(e, elem)
				}
			case *ast.AssignStmt:
				for i, r := range x.Rhs {
					var want types.Type
					if len(x.Lhs) == len(x.Rhs) {
						want = p.TypesInfo.TypeOf(x.Lhs[i])
					}
					target(r, want)
				}
			case *ast.ValueSpec:
				var want types.Type
				if x.Type != nil {
					want = p.TypesInfo.TypeOf(x.Type)
				}
				for _, v := range x.Values {
					target(v, want)
				}
			case *ast.ReturnStmt:
				for _, r := range x.Results {
					target(r, nil)
				}
			case *ast.SendStmt:
				target(x.Value, nil)
			}
			return true
		})
	}
	switch {
	case exact != nil:
		return exact
	case first != nil:
		return first
	}
	return anyUse // a use this walk has no rule for: the first value of the type
}

// unseenJob reports whether t is a job type of another package whose own
// UniqueKey (declared on it, not promoted) did not migrate and which has no
// ConcurrencyKey or ConcurrencyLimit either: its package could not tell it
// was a job. Types left as they are on purpose (clashes, suppressed,
// generated, external) were reported in their own package.
func (p *pass) unseenJob(t types.Type, legacy *types.Func) bool {
	if ptr, ok := t.(*types.Pointer); ok {
		t = ptr.Elem()
	}
	named, ok := t.(*types.Named)
	if !ok || types.IsInterface(named) || named.Obj().Pkg() == p.Pkg || named.Obj().Pkg() == nil {
		return false
	}
	if _, index, _ := types.LookupFieldOrMethod(named, true, legacy.Pkg(), legacyName); len(index) != 1 {
		return false // promoted: its package adds delegating methods
	}
	return !hasMember(named, p.Pkg, keyName) && !hasMember(named, p.Pkg, limitName)
}

// seesMigrated reports whether a method this package can see migrates: a
// job value of another package may then be used here as an interface that
// still requires UniqueKey.
func (p *pass) seesMigrated() bool {
	if p.prog != nil {
		return p.prog.anyMigrating()
	}
	for _, f := range p.AllObjectFacts() {
		if _, ok := f.Fact.(*MigratedFact); ok {
			return true
		}
	}
	return false
}

// declaringType returns the named type t (or *t) when the legacy method fn is
// declared on it, not promoted from an embedded type.
func declaringType(t types.Type, fn *types.Func) *types.TypeName {
	if ptr, ok := t.(*types.Pointer); ok {
		t = ptr.Elem()
	}
	named, ok := t.(*types.Named)
	if !ok {
		return nil
	}
	recv := fn.Signature().Recv()
	if recv == nil {
		return nil
	}
	rt := recv.Type()
	if ptr, ok := rt.(*types.Pointer); ok {
		rt = ptr.Elem()
	}
	if rn, ok := rt.(*types.Named); ok && rn.Origin().Obj() == named.Origin().Obj() {
		return named.Origin().Obj()
	}
	return nil
}
