package analyzer

import (
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/types/typeutil"
)

// alwaysNonEmpty lists functions whose string result is never empty.
var alwaysNonEmpty = map[string]bool{
	"strconv.Itoa":        true,
	"strconv.FormatInt":   true,
	"strconv.FormatUint":  true,
	"strconv.FormatBool":  true,
	"strconv.FormatFloat": true,
	"strconv.Quote":       true,
}

// nonEmptyBody reports whether every return statement of a function body
// provably returns a non-empty string. A body without a return statement
// (it panics) does not count as provable.
func (p *pass) nonEmptyBody(body *ast.BlockStmt) bool {
	returns, ok := 0, true
	ast.Inspect(body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.ReturnStmt:
			returns++
			if len(x.Results) != 1 || !p.nonEmpty(x.Results[0]) {
				ok = false
			}
		}
		return ok
	})
	return ok && returns > 0
}

// nonEmpty reports whether a string expression is provably non-empty.
func (p *pass) nonEmpty(e ast.Expr) bool {
	e = ast.Unparen(e)
	if tv, ok := p.TypesInfo.Types[e]; ok && tv.Value != nil {
		return tv.Value.Kind() == constant.String && constant.StringVal(tv.Value) != ""
	}
	switch x := e.(type) {
	case *ast.BinaryExpr:
		return x.Op == token.ADD && (p.nonEmpty(x.X) || p.nonEmpty(x.Y))
	case *ast.CallExpr:
		fn, ok := typeutil.Callee(p.TypesInfo, x).(*types.Func)
		if !ok || fn.Pkg() == nil || fn.Signature().Recv() != nil {
			return false
		}
		name := fn.Pkg().Path() + "." + fn.Name()
		if alwaysNonEmpty[name] {
			return true
		}
		if name == "fmt.Sprintf" && len(x.Args) > 0 {
			tv := p.TypesInfo.Types[x.Args[0]]
			return tv.Value != nil && tv.Value.Kind() == constant.String && formatHasText(constant.StringVal(tv.Value))
		}
	}
	return false
}

// formatHasText reports whether a printf format writes at least one byte of
// its own, whatever its operands.
func formatHasText(format string) bool {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			return true
		}
		i++
		if i < len(format) && format[i] == '%' {
			return true
		}
		// Skip flags, argument indexes, width and precision up to the verb.
		for i < len(format) && strings.IndexByte("+-# 0123456789.*[]", format[i]) >= 0 {
			i++
		}
	}
	return false
}
