package analyzer

import (
	"go/ast"
	"go/token"
	"go/types"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/tools/go/analysis"
)

const (
	legacySpanError = "DuplicateJob" //migrate-unique:ignore the string the analyzer looks for, not a span error
	newSpanError    = "ConcurrencyLimitReached"
	pgerrcodePath   = "github.com/jackc/pgerrcode"
)

// uniqueKeyColumn matches the legacy column name as a whole word.
var uniqueKeyColumn = regexp.MustCompile(`(?i)(^|[^a-z0-9_])unique_key([^a-z0-9_]|$)`)

// columnOnly matches a string that is only a column reference
// ("unique_key", "r.unique_key", `"unique_key"`), as query builders use.
var columnOnly = regexp.MustCompile(`(?i)^\s*([a-z_][a-z0-9_]*\.)?"?unique_key"?\s*$`)

// sqlShapes are shapes of SQL text: a statement's clause pairs, a
// comparison on the column, a parenthesised column list. Prose that
// mentions the column ("tables with a unique_key column, and the flags that
// select them") matches none.
var sqlShapes = []*regexp.Regexp{
	regexp.MustCompile(`(?is)\bselect\b.*\bfrom\b`),
	regexp.MustCompile(`(?is)\binsert\s+into\b`),
	regexp.MustCompile(`(?is)\bupdate\b.*\bset\b`),
	regexp.MustCompile(`(?is)\bdelete\s+from\b`),
	regexp.MustCompile(`(?is)\b(alter|create|drop)\s+(unique\s+)?(table|index|constraint|column)\b`),
	regexp.MustCompile(`(?is)\bon\s+conflict\b`),
	regexp.MustCompile(`(?is)\bjoin\b.*\bon\b`),
	regexp.MustCompile(`(?is)\breturning\b`),
	regexp.MustCompile(`(?is)unique_key"?\s*(=|<>|!=|<|>|\bis\b|\bin\s*\(|\blike\b)`),
	regexp.MustCompile(`(?i)\(\s*([a-z_][a-z0-9_."]*\s*,\s*)*"?unique_key"?(\s*,\s*[a-z_][a-z0-9_."]*)*\s*\)`),
}

// namesColumn reports whether a string literal refers to the unique_key
// column: a bare column reference, or SQL text naming it.
func namesColumn(val string) bool {
	if !uniqueKeyColumn.MatchString(val) {
		return false
	}
	if columnOnly.MatchString(val) {
		return true
	}
	for _, re := range sqlShapes {
		if re.MatchString(val) {
			return true
		}
	}
	return false
}

// hasWord reports whether a camelCase or snake_case identifier contains
// word (lower case) as one of its words: EnqueueTx and tryEnqueue do,
// inEnqueuer does not.
func hasWord(ident, word string) bool {
	start := 0
	for i := 1; i <= len(ident); i++ {
		boundary := i == len(ident) || ident[i] == '_' ||
			(ident[i] >= 'A' && ident[i] <= 'Z' && ident[i-1] >= 'a' && ident[i-1] <= 'z')
		if !boundary {
			continue
		}
		if strings.EqualFold(strings.Trim(ident[start:i], "_"), word) {
			return true
		}
		start = i
	}
	return false
}

func diagnostic(n ast.Node, code Code, msg string) analysis.Diagnostic {
	return analysis.Diagnostic{Pos: n.Pos(), End: n.End(), Category: string(code), Message: msg}
}

// walk reports the findings inside declarations: call sites, renames,
// string literals and unique-violation handling.
func (p *pass) walk(f *ast.File) {
	for _, decl := range f.Decls {
		// Whether the function enqueues is only needed when it handles a
		// unique violation, which is rare: decide it then, once.
		decided, enqueues := false, false
		inEnqueuer := func() bool {
			if !decided {
				decided = true
				if fd, ok := decl.(*ast.FuncDecl); ok && fd.Body != nil {
					// The enqueue itself (func Enqueue, enqueueTx), or a
					// function that calls one, where the violation can come
					// from the queue's legacy unique rule.
					enqueues = p.uniqueViolationInScope() && (hasWord(fd.Name.Name, "enqueue") || p.enqueues(fd.Body))
				}
			}
			return enqueues
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.ImportSpec:
				return false
			case *ast.SelectorExpr:
				p.callSite(x)
			case *ast.TypeAssertExpr:
				if x.Type != nil {
					p.assertion(x.Type)
				}
			case *ast.TypeSwitchStmt:
				for _, clause := range x.Body.List {
					for _, typ := range clause.(*ast.CaseClause).List {
						p.assertion(typ)
					}
				}
			case *ast.Ident:
				p.ident(x, inEnqueuer)
			case *ast.BasicLit:
				if x.Kind == token.STRING {
					p.literal(x, inEnqueuer)
				}
			}
			return true
		})
	}
}

// callSite renames a call, method value or method expression of a migrated
// UniqueKey.
func (p *pass) callSite(x *ast.SelectorExpr) {
	if x.Sel.Name != legacyName {
		return
	}
	sel, ok := p.TypesInfo.Selections[x]
	if !ok {
		return
	}
	fn, ok := sel.Obj().(*types.Func)
	if !ok || !p.isMigrating(fn.Origin()) {
		return
	}
	what := "call of"
	switch sel.Kind() {
	case types.MethodVal:
		if !p.isCalled(x) {
			what = "method value"
		}
	case types.MethodExpr:
		what = "method expression"
	}
	p.report(x.Sel, x.Sel, CodeCallSite, what+" "+types.TypeString(sel.Recv(), p.qualify)+".UniqueKey: now ConcurrencyKey",
		&analysis.SuggestedFix{
			Message:   "Rename UniqueKey to ConcurrencyKey",
			TextEdits: []analysis.TextEdit{{Pos: x.Sel.Pos(), End: x.Sel.End(), NewText: []byte(keyName)}},
		})
}

// assertion reports a type assertion or type switch case to an interface
// that requires a UniqueKey which does not migrate, in a package that knows
// a migrated job interface: migrated jobs stop matching it at run time, with
// no compile error to tell.
func (p *pass) assertion(typ ast.Expr) {
	t := p.TypesInfo.TypeOf(typ)
	if t == nil {
		return
	}
	it, ok := t.Underlying().(*types.Interface)
	if !ok {
		return
	}
	lm := legacyMethod(it)
	if lm == nil || p.isMigrating(lm.Origin()) || !p.knowsMigratedJobs() {
		return
	}
	p.report(typ, typ, CodeExternal, "type assertion to "+types.TypeString(t, p.qualify)+
		", which requires UniqueKey: migrated jobs no longer match it at run time; test for ConcurrencyKey and ConcurrencyLimit instead", nil)
}

// knowsMigratedJobs reports whether a job interface this package knows is
// migrated.
func (p *pass) knowsMigratedJobs() bool {
	for _, j := range p.jobIfaces {
		if j.migrated {
			return true
		}
	}
	return false
}

// isCalled reports whether a selector is the function of a call; the
// inspector gives no parent, so the callee set is collected lazily.
func (p *pass) isCalled(x *ast.SelectorExpr) bool {
	if p.callees == nil {
		p.callees = map[ast.Expr]bool{}
		for _, f := range p.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					p.callees[ast.Unparen(c.Fun)] = true
				}
				return true
			})
		}
	}
	return p.callees[x]
}

// ident applies configured renames and spots pgerrcode.UniqueViolation.
func (p *pass) ident(id *ast.Ident, inEnqueuer func() bool) {
	if id.Name != "UniqueViolation" && !p.s.renamed[id.Name] {
		return // the common case, decided without a map lookup by object
	}
	obj := p.TypesInfo.Uses[id]
	if obj == nil {
		obj = p.TypesInfo.Defs[id]
	}
	if obj == nil || obj.Pkg() == nil || obj.Parent() != obj.Pkg().Scope() {
		return
	}
	if obj.Name() == "UniqueViolation" && obj.Pkg().Path() == pgerrcodePath && inEnqueuer() {
		p.report(id, id, CodeUniqueViolation, "handles a unique violation (pgerrcode.UniqueViolation) around an enqueue: "+uniqueViolationAdvice, nil)
		return
	}
	qualified := obj.Pkg().Path() + "." + obj.Name()
	if to, ok := p.s.renames[qualified]; ok && to != id.Name {
		p.report(id, id, CodeRename, "rename "+qualified+" to "+to, &analysis.SuggestedFix{
			Message:   "Rename " + obj.Name() + " to " + to,
			TextEdits: []analysis.TextEdit{{Pos: id.Pos(), End: id.End(), NewText: []byte(to)}},
		})
	}
}

const uniqueViolationAdvice = "a blocked enqueue is no longer a database error; check the enqueue result for the concurrency limit instead"

// literal reports string literals: the span error string, SQL text naming
// unique_key and unique-violation markers.
func (p *pass) literal(lit *ast.BasicLit, inEnqueuer func() bool) {
	val, err := strconv.Unquote(lit.Value)
	if err != nil {
		return
	}
	lower := strings.ToLower(val)
	switch {
	case val == legacySpanError:
		quoted := strconv.Quote(newSpanError)
		if strings.HasPrefix(lit.Value, "`") {
			quoted = "`" + newSpanError + "`"
		}
		p.report(lit, lit, CodeSpanError, `span error string "DuplicateJob": now "ConcurrencyLimitReached"`, &analysis.SuggestedFix{
			Message:   `Replace "DuplicateJob" with "ConcurrencyLimitReached"`,
			TextEdits: []analysis.TextEdit{{Pos: lit.Pos(), End: lit.End(), NewText: []byte(quoted)}},
		})
	case strings.Contains(lower, "unique_key") && uniqueKeyColumn.MatchString(val) && !p.isTag(lit) && p.sqlInScope(val):
		p.report(lit, lit, CodeSQL, "string names the unique_key column, which the database migration renames to concurrency_key: update it by hand", nil)
	case (val == "23505" || strings.Contains(lower, "duplicate key")) && inEnqueuer():
		p.report(lit, lit, CodeUniqueViolation, "handles a unique violation ("+strconv.Quote(val)+") around an enqueue: "+uniqueViolationAdvice, nil)
	}
}

// isTag reports whether a literal is a struct field's tag.
func (p *pass) isTag(lit *ast.BasicLit) bool {
	if p.tags == nil {
		p.tags = map[*ast.BasicLit]bool{}
		for _, f := range p.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				if fld, ok := n.(*ast.Field); ok && fld.Tag != nil {
					p.tags[fld.Tag] = true
				}
				return true
			})
		}
	}
	return p.tags[lit]
}

// enqueues reports whether a function body enqueues a job: it calls a
// function named like Enqueue, or passes a job value to a call.
func (p *pass) enqueues(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || found {
			return !found
		}
		var name string
		switch fun := ast.Unparen(call.Fun).(type) {
		case *ast.Ident:
			name = fun.Name
		case *ast.SelectorExpr:
			name = fun.Sel.Name
		}
		if hasWord(name, "enqueue") {
			found = true
			return false
		}
		if tv, ok := p.TypesInfo.Types[call.Fun]; ok && tv.IsType() {
			return true // a conversion, not a call
		}
		for _, arg := range call.Args {
			if p.isJobValue(p.TypesInfo.TypeOf(arg)) {
				found = true
				return false
			}
		}
		return true
	})
	return found
}
