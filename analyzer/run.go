package analyzer

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// runMethods are the method names that make an interface declaring
// UniqueKey() string a job interface in the default detection.
var runMethods = map[string]bool{
	"Run": true, "Perform": true, "Execute": true, "Handle": true,
	"Process": true, "Work": true, "Do": true,
}

const (
	legacyName = "UniqueKey"
	keyName    = "ConcurrencyKey"
	limitName  = "ConcurrencyLimit"
)

// pass is one run of the analyzer over one package.
type pass struct {
	*analysis.Pass
	s *settings

	files      map[*token.File]*fileInfo
	funcDecls  map[*types.Func]*ast.FuncDecl
	typeSpecs  map[*types.TypeName]typeDecl
	ifaceField map[*types.Func]ifaceMethod

	jobIfaces []*jobIface
	migrating map[*types.Func]bool   // local methods renamed to ConcurrencyKey
	jobValue  map[types.Type]bool    // cache for isJobValue
	callees   map[ast.Expr]bool      // functions of calls, built on first use
	tags      map[*ast.BasicLit]bool // struct field tags, built on first use
	// queueTables records whether a string literal of the package names
	// one of the layout's tables, decided on first use.
	queueTables *bool
	prog        *Program // the run's job model, when the driver gives one
	shapeOK     *bool    // shapeRule, decided on first use
	jobTypes    int      // the job types this package declares
}

type typeDecl struct {
	spec *ast.TypeSpec
	decl *ast.GenDecl
}

// ifaceMethod is a method declared in an interface type of this package.
type ifaceMethod struct {
	field *ast.Field
	iface *ast.InterfaceType
}

// jobIface is a legacy job interface known to this package.
type jobIface struct {
	obj      *types.TypeName
	iface    *types.Interface
	legacy   *types.Func
	generic  bool
	migrated bool
}

func (s *settings) run(ap *analysis.Pass) (any, error) {
	p := &pass{
		Pass:       ap,
		s:          s,
		files:      map[*token.File]*fileInfo{},
		funcDecls:  map[*types.Func]*ast.FuncDecl{},
		typeSpecs:  map[*types.TypeName]typeDecl{},
		ifaceField: map[*types.Func]ifaceMethod{},
		migrating:  map[*types.Func]bool{},
		jobValue:   map[types.Type]bool{},
		prog:       s.prog,
	}
	// Only the analysed module is edited or reported: a package of a
	// dependency module has a version, the main module's packages have none.
	editable := ap.Module == nil || ap.Module.Version == ""
	if editable && ownModule(ap.Pkg.Path(), ap.Module) {
		p.ExportPackageFact(&OwnPackageFact{})
	}
	p.index()
	p.findJobInterfaces()
	if editable {
		p.planInterfaces()
	}
	for _, j := range p.jobIfaces {
		if j.obj.Pkg() == p.Pkg {
			p.ExportObjectFact(j.obj, &JobInterfaceFact{Migrated: j.migrated})
		}
	}
	if !editable {
		return nil, nil
	}
	p.planJobTypes()
	p.checkConversions()
	for _, f := range p.Files {
		p.walk(f)
	}
	p.reportDirectives()
	return nil, nil
}

// index records the declarations of this package by their objects.
func (p *pass) index() {
	for _, f := range p.Files {
		tf := p.Fset.File(f.FileStart)
		if tf == nil {
			continue
		}
		p.files[tf] = newFileInfo(p.Fset, f)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if fn, ok := p.TypesInfo.Defs[d.Name].(*types.Func); ok && d.Recv != nil {
					p.funcDecls[fn] = d
				}
			case *ast.GenDecl:
				if d.Tok != token.TYPE {
					continue
				}
				for _, spec := range d.Specs {
					ts := spec.(*ast.TypeSpec)
					if tn, ok := p.TypesInfo.Defs[ts.Name].(*types.TypeName); ok {
						p.typeSpecs[tn] = typeDecl{ts, d}
					}
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			it, ok := n.(*ast.InterfaceType)
			if !ok {
				return true
			}
			for _, fld := range it.Methods.List {
				if len(fld.Names) == 0 {
					continue
				}
				if fn, ok := p.TypesInfo.Defs[fld.Names[0]].(*types.Func); ok {
					p.ifaceField[fn] = ifaceMethod{fld, it}
				}
			}
			return true
		})
	}
}

// legacyMethod returns the UniqueKey() string method of an interface.
func legacyMethod(it *types.Interface) *types.Func {
	for m := range it.Methods() {
		if m.Name() == legacyName && isLegacySignature(m) {
			return m
		}
	}
	return nil
}

func isLegacySignature(fn *types.Func) bool {
	sig := fn.Signature()
	return sig.Params().Len() == 0 && sig.Results().Len() == 1 &&
		types.Identical(sig.Results().At(0).Type(), types.Typ[types.String])
}

// isJobInterface applies the detection rule to a named interface.
func (s *settings) isJobInterface(tn *types.TypeName, it *types.Interface) bool {
	if legacyMethod(it) == nil {
		return false
	}
	if len(s.interfaces) > 0 {
		return tn.Pkg() != nil && s.interfaces[tn.Pkg().Path()+"."+tn.Name()]
	}
	for m := range it.Methods() {
		if runMethods[m.Name()] {
			return true
		}
	}
	return false
}

// findJobInterfaces collects the job interfaces of this package and, from
// facts, of every package it depends on.
func (p *pass) findJobInterfaces() {
	scope := p.Pkg.Scope()
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok || tn.IsAlias() {
			continue
		}
		if it, ok := tn.Type().Underlying().(*types.Interface); ok && p.s.isJobInterface(tn, it) {
			p.jobIfaces = append(p.jobIfaces, newJobIface(tn, it, false))
		}
	}
	for _, of := range p.AllObjectFacts() {
		jf, ok := of.Fact.(*JobInterfaceFact)
		if !ok {
			continue
		}
		tn, ok := of.Object.(*types.TypeName)
		if !ok || tn.Pkg() == p.Pkg {
			continue
		}
		if it, ok := tn.Type().Underlying().(*types.Interface); ok {
			p.jobIfaces = append(p.jobIfaces, newJobIface(tn, it, jf.Migrated))
		}
	}
}

func newJobIface(tn *types.TypeName, it *types.Interface, migrated bool) *jobIface {
	generic := false
	if n, ok := tn.Type().(*types.Named); ok && n.TypeParams().Len() > 0 {
		generic = true
	}
	return &jobIface{obj: tn, iface: it, legacy: legacyMethod(it), generic: generic, migrated: migrated}
}

// isMigrating reports whether fn (an origin method) is renamed to
// ConcurrencyKey, here or by the package that declares it.
func (p *pass) isMigrating(fn *types.Func) bool {
	if p.migrating[fn] {
		return true
	}
	if fn.Pkg() == nil || fn.Pkg() == p.Pkg {
		return false
	}
	if p.prog != nil {
		return p.prog.migrates(fn)
	}
	return p.ImportObjectFact(fn, new(MigratedFact))
}

// markMigrating records that fn (an origin method of this package) is
// renamed to ConcurrencyKey, for this package and its importers: a
// MigratedFact, or, with the program's job model, the model's own record
// (a run that loads a whole module would otherwise copy every method's fact
// into every package that imports it, directly or not).
func (p *pass) markMigrating(fn *types.Func) {
	p.migrating[fn] = true
	if p.prog != nil {
		p.prog.markMigrating(fn)
		return
	}
	p.ExportObjectFact(fn, &MigratedFact{})
}

// planInterfaces reports this package's job interfaces (and the interfaces
// they embed that declare the legacy method) with their fix.
func (p *pass) planInterfaces() {
	done := map[*ast.Field]bool{}
	for _, j := range p.jobIfaces {
		if j.obj.Pkg() != p.Pkg {
			continue
		}
		spec := p.typeSpecs[j.obj].spec
		if spec == nil || p.silenced(spec.Name) {
			continue
		}
		m := j.legacy
		im, local := p.ifaceField[m]
		switch {
		case p.isMigrating(m):
			j.migrated = true
			continue
		case !local:
			p.report(spec.Name, spec.Name, CodeExternal, fmt.Sprintf(
				"job interface %s gets UniqueKey from %s, declared in another package: migrate that interface by hand",
				j.obj.Name(), types.TypeString(recvOrOwner(m), p.qualify)), nil)
			continue
		case hasMember(j.obj.Type(), p.Pkg, keyName) || hasMember(j.obj.Type(), p.Pkg, limitName):
			p.report(im.field, im.field, CodeClash, fmt.Sprintf(
				"job interface %s already has %s or %s beside UniqueKey: resolve by hand", j.obj.Name(), keyName, limitName), nil)
			continue
		}
		if done[im.field] {
			continue
		}
		done[im.field] = true
		msg := fmt.Sprintf("interface %s declares UniqueKey: declare ConcurrencyKey and ConcurrencyLimit instead", j.obj.Name())
		if owner := p.interfaceName(im.iface); owner != j.obj.Name() {
			msg = fmt.Sprintf("interface %s declares UniqueKey for job interface %s: declare ConcurrencyKey and ConcurrencyLimit instead", owner, j.obj.Name())
		}
		if !p.report(im.field.Names[0], im.field, CodeInterface, msg, p.interfaceFix(im)) {
			continue
		}
		p.markMigrating(m)
		j.migrated = true
	}
	// An interface embedding a migrated one is migrated with it.
	for _, j := range p.jobIfaces {
		if j.obj.Pkg() == p.Pkg && !j.migrated && p.isMigrating(j.legacy) {
			j.migrated = true
		}
	}
}

// interfaceName names the interface type declaring a method, for messages.
func (p *pass) interfaceName(it *ast.InterfaceType) string {
	for tn, td := range p.typeSpecs {
		if td.spec.Type == it {
			return tn.Name()
		}
	}
	return "interface{...}"
}

// recvOrOwner names what declares a method, for messages.
func recvOrOwner(fn *types.Func) types.Type {
	if r := fn.Signature().Recv(); r != nil {
		return r.Type()
	}
	return types.Typ[types.Invalid]
}

// hasMember reports whether t or *t has a field or method called name.
func hasMember(t types.Type, pkg *types.Package, name string) bool {
	obj, _, _ := types.LookupFieldOrMethod(t, true, pkg, name)
	return obj != nil
}

// implements reports whether the named type t (or *t) implements job
// interface j. Generic types and interfaces are compared by method names,
// with the legacy method's signature checked exactly.
func (p *pass) implements(t *types.Named, j *jobIface) bool {
	if !j.generic && t.TypeParams().Len() == 0 {
		return types.Implements(t, j.iface) || types.Implements(types.NewPointer(t), j.iface)
	}
	for m := range j.iface.Methods() {
		obj, _, _ := types.LookupFieldOrMethod(t, true, m.Pkg(), m.Name())
		fn, ok := obj.(*types.Func)
		if !ok || (m.Name() == legacyName && !isLegacySignature(fn)) {
			return false
		}
	}
	return true
}

// jobCandidate is a named type of this package that the job rule reads as
// a job.
type jobCandidate struct {
	tn    *types.TypeName
	named *types.Named
	impl  []*jobIface // the known job interfaces it implements; none: by shape
}

// planJobTypes finds this package's job types and reports each legacy
// method once, with its fix.
func (p *pass) planJobTypes() {
	var jobs []jobCandidate
	scope := p.Pkg.Scope()
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok || tn.IsAlias() {
			continue
		}
		named, ok := tn.Type().(*types.Named)
		if !ok || types.IsInterface(named) {
			continue
		}
		if impl, ok := p.jobRule(named); ok {
			jobs = append(jobs, jobCandidate{tn, named, impl})
		}
	}
	p.jobTypes = len(jobs)
	for _, j := range jobs {
		p.planJobType(j)
	}
}

// jobRule decides whether a named type of this package is a job, and which
// of the job interfaces this package knows it implements. The program's job
// model, when the driver gives one, decides for types this package cannot
// see the interfaces of; otherwise a type with no known job interface is a
// job by shape (UniqueKey() string and a run method in its method set), as
// long as no job interface named by -interface is in sight.
func (p *pass) jobRule(named *types.Named) ([]*jobIface, bool) {
	var impl []*jobIface
	for _, j := range p.jobIfaces {
		if p.implements(named, j) {
			impl = append(impl, j)
		}
	}
	if len(impl) > 0 && (len(p.s.interfaces) > 0 || p.runsOwn(named)) {
		return impl, true
	}
	if p.prog != nil {
		return nil, p.prog.isJob(named.Obj())
	}
	return nil, p.shapeRule() && jobShaped(named) && p.runsOwn(named)
}

// shapeRule reports whether a job-shaped type counts as a job here: always
// with the default detection; with -interface only where none of the named
// interfaces is in sight (the package cannot tell which interface its types
// are converted to).
func (p *pass) shapeRule() bool {
	if p.shapeOK == nil {
		v := len(p.s.interfaces) == 0 || !p.s.seesNamed(p.Pkg)
		p.shapeOK = &v
	}
	return *p.shapeOK
}

// seesNamed reports whether pkg is or imports (directly or not) the package
// of an interface -interface names, migrated or not: a package that sees
// the interface decides by it, not by shape.
func (s *settings) seesNamed(pkg *types.Package) bool {
	seen := map[*types.Package]bool{}
	var visit func(q *types.Package) bool
	visit = func(q *types.Package) bool {
		if q == nil || seen[q] {
			return false
		}
		seen[q] = true
		if s.declaresNamed(q) {
			return true
		}
		for _, imp := range q.Imports() {
			if visit(imp) {
				return true
			}
		}
		return false
	}
	return visit(pkg)
}

// declaresNamed reports whether pkg is the package of an interface
// -interface names (whether or not it still declares it).
func (s *settings) declaresNamed(pkg *types.Package) bool {
	for name := range s.interfaces {
		if path, _, _ := splitQualified(name); path == pkg.Path() {
			return true
		}
	}
	return false
}

// jobShaped reports whether the method set of *t has UniqueKey() string and
// a run method (Run, Perform, Execute, Handle, Process, Work or Do).
func jobShaped(t *types.Named) bool {
	ms := types.NewMethodSet(types.NewPointer(t))
	legacy, run := false, false
	for sel := range ms.Methods() {
		fn, ok := sel.Obj().(*types.Func)
		if !ok {
			continue
		}
		switch {
		case fn.Name() == legacyName:
			legacy = isLegacySignature(fn)
		case runMethods[fn.Name()]:
			run = true
		}
	}
	return legacy && run
}

// hasNewAPI reports whether t (or *t) already has ConcurrencyKey() string
// and ConcurrencyLimit() (int, bool): a migrated job, whatever UniqueKey it
// still carries (the runtime reads the new methods first).
func hasNewAPI(t types.Type, pkg *types.Package) bool {
	key, _, _ := types.LookupFieldOrMethod(t, true, pkg, keyName)
	limit, _, _ := types.LookupFieldOrMethod(t, true, pkg, limitName)
	kf, ok1 := key.(*types.Func)
	lf, ok2 := limit.(*types.Func)
	if !ok1 || !ok2 {
		return false
	}
	ks, ls := kf.Signature(), lf.Signature()
	return ks.Params().Len() == 0 && ks.Results().Len() == 1 && types.Identical(ks.Results().At(0).Type(), types.Typ[types.String]) &&
		ls.Params().Len() == 0 && ls.Results().Len() == 2 &&
		types.Identical(ls.Results().At(0).Type(), types.Typ[types.Int]) && types.Identical(ls.Results().At(1).Type(), types.Typ[types.Bool])
}

func (p *pass) planJobType(c jobCandidate) {
	tn, named := c.tn, c.named
	td := p.typeSpecs[tn]
	if td.spec == nil || p.silenced(td.spec.Name) {
		return // a directive on the type silences the job type as a whole
	}
	obj, _, _ := types.LookupFieldOrMethod(named, true, p.Pkg, legacyName)
	fn, ok := obj.(*types.Func)
	if !ok {
		return
	}
	fn = fn.Origin()
	if p.isMigrating(fn) || hasNewAPI(named, p.Pkg) {
		return // promoted from a migrated type or interface, or migrated already
	}
	var migrated, foreign *jobIface
	for _, j := range c.impl {
		if j.migrated {
			migrated = j
		} else if j.obj.Pkg() != p.Pkg {
			foreign = j
		}
	}
	fd := p.funcDecls[fn]
	at := ast.Node(td.spec.Name)
	if fd != nil {
		at = fd.Name
	}
	if migrated == nil && len(c.impl) > 0 {
		if foreign != nil {
			p.report(at, at, CodeExternal, fmt.Sprintf(
				"job type %s implements %s, which this run does not migrate (declared in %s): keep UniqueKey until that interface moves to ConcurrencyKey",
				tn.Name(), foreign.obj.Name(), foreign.obj.Pkg().Path()), nil)
		}
		return // a local interface that is not migrated has its own finding
	}
	if use := p.keptFor(tn); migrated == nil && use != "" {
		p.report(at, at, CodeExternal, fmt.Sprintf(
			"job type %s is used as %s, which requires UniqueKey and which this run does not migrate: keep UniqueKey until that interface moves to ConcurrencyKey, or change that use by hand",
			tn.Name(), use), nil)
		return
	}
	if ext := p.externalFor(tn); migrated == nil && ext != "" {
		p.report(at, at, CodeExternal, fmt.Sprintf(
			"job type %s implements %s, which this run does not migrate (its package does not import it, the run sees it elsewhere): keep UniqueKey until that interface moves to ConcurrencyKey",
			tn.Name(), ext), nil)
		return
	}
	if hasMember(named, p.Pkg, keyName) || hasMember(named, p.Pkg, limitName) {
		p.report(at, at, CodeClash, fmt.Sprintf(
			"job type %s already has %s or %s beside UniqueKey: resolve by hand", tn.Name(), keyName, limitName), nil)
		return
	}
	owner := ""
	if fd != nil {
		owner = receiverTypeName(fd)
	}
	if fd != nil && owner != tn.Name() {
		if others := p.nonJobPromoters(fn); len(others) > 0 {
			// The embedded type also serves types that are no jobs: its
			// UniqueKey stays, and the job type gets methods of its own.
			pointer := types.NewMethodSet(named).Lookup(p.Pkg, legacyName) == nil
			p.report(td.spec.Name, td.spec.Name, CodeJobType, fmt.Sprintf(
				"job type %s promotes UniqueKey from %s, which %s also embeds and which is no job: add ConcurrencyKey and ConcurrencyLimit delegating to it (%s keeps UniqueKey)",
				tn.Name(), owner, strings.Join(others, ", "), owner), p.delegateFix(td, pointer))
			return
		}
	}
	if fd != nil {
		msg := fmt.Sprintf("job type %s: rename UniqueKey to ConcurrencyKey and add ConcurrencyLimit", tn.Name())
		if owner != tn.Name() {
			msg = fmt.Sprintf("job type %s promotes UniqueKey from %s: rename it to ConcurrencyKey and add ConcurrencyLimit", tn.Name(), owner)
		}
		if p.report(fd.Name, fd.Name, CodeJobType, msg, p.methodFix(fd)) {
			p.markMigrating(fn)
		}
		return
	}
	// The method comes from an embedded type this package cannot edit:
	// add both methods to the job type, delegating to it.
	pointer := types.NewMethodSet(named).Lookup(p.Pkg, legacyName) == nil
	p.report(td.spec.Name, td.spec.Name, CodeJobType, fmt.Sprintf(
		"job type %s promotes UniqueKey from %s: add ConcurrencyKey and ConcurrencyLimit delegating to it",
		tn.Name(), types.TypeString(recvOrOwner(fn), p.qualify)), p.delegateFix(td, pointer))
}

// nonJobPromoters names the types that get the legacy method fn by
// embedding and are no jobs: in this package, or, with the program's job
// model, anywhere in the run. The type declaring fn is none of them.
func (p *pass) nonJobPromoters(fn *types.Func) []string {
	if p.prog != nil {
		return p.prog.nonJobPromoters(fn)
	}
	var out []string
	scope := p.Pkg.Scope()
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok || tn.IsAlias() {
			continue
		}
		named, ok := tn.Type().(*types.Named)
		if !ok || types.IsInterface(named) {
			continue
		}
		obj, index, _ := types.LookupFieldOrMethod(named, true, p.Pkg, legacyName)
		if f, ok := obj.(*types.Func); !ok || f.Origin() != fn || len(index) < 2 {
			continue
		}
		if _, job := p.jobRule(named); !job {
			out = append(out, tn.Name())
		}
	}
	return out
}

// receiverTypeName is the base type name of a method's receiver.
func receiverTypeName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	return baseTypeName(fd.Recv.List[0].Type)
}

func baseTypeName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// isJobValue reports whether a value of type t is a job: a job type, a
// pointer to one, or a job interface.
func (p *pass) isJobValue(t types.Type) bool {
	if t == nil {
		return false
	}
	if ptr, ok := t.(*types.Pointer); ok {
		t = ptr.Elem()
	}
	named, ok := t.(*types.Named)
	if !ok {
		return false
	}
	named = named.Origin()
	if v, ok := p.jobValue[named]; ok {
		return v
	}
	v := false
	for _, j := range p.jobIfaces {
		if named.Obj() == j.obj || (!types.IsInterface(named) && p.implements(named, j) && (len(p.s.interfaces) > 0 || p.runsOwn(named))) {
			v = true
			break
		}
	}
	if !v && !types.IsInterface(named) {
		if p.prog != nil {
			v = p.prog.isJob(named.Obj())
		} else {
			v = p.shapeRule() && jobShaped(named) && p.runsOwn(named)
		}
	}
	p.jobValue[named] = v
	return v
}

// silenced reports whether a directive silences the line of n.
func (p *pass) silenced(n ast.Node) bool {
	fi := p.files[p.Fset.File(n.Pos())]
	return fi != nil && fi.suppressed(p.Fset.Position(n.Pos()).Line)
}

// report emits one finding unless a directive silences it, turning any
// finding in a generated file into a "regenerate" report without a fix. It
// reports whether the fix was emitted, i.e. whether the code is migrated.
func (p *pass) report(from, to ast.Node, code Code, msg string, fix *analysis.SuggestedFix) bool {
	if p.silenced(from) {
		return false
	}
	fi := p.files[p.Fset.File(from.Pos())]
	if fi != nil && fi.generated {
		code, msg, fix = CodeGenerated, "generated file: regenerate it instead of editing it ("+msg+")", nil
	}
	d := analysis.Diagnostic{Pos: from.Pos(), End: to.End(), Category: string(code), Message: msg}
	if fix != nil {
		d.SuggestedFixes = []analysis.SuggestedFix{*fix}
	}
	p.Report(d)
	return fix != nil
}

// receiverNameFor names a receiver after its type's initial ("recv" when
// the type name does not start with a letter or a type parameter already
// has that name).
func receiverNameFor(typeName string, taken map[string]bool) string {
	name := "recv"
	if typeName != "" {
		if c := typeName[0] | 0x20; c >= 'a' && c <= 'z' {
			name = string(rune(c))
		}
	}
	if taken[name] {
		name = "recv"
	}
	return name
}

// qualify names other packages by their name in messages (jobs.Job, not
// example.com/app/jobs.Job) and this package not at all.
func (p *pass) qualify(pkg *types.Package) string {
	if pkg == p.Pkg {
		return ""
	}
	return pkg.Name()
}
