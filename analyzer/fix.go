package analyzer

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
)

const (
	limitDocProvable = "// ConcurrencyLimit admits one active job per concurrency key, the legacy unique-key rule."
	limitDocGuarded  = "// ConcurrencyLimit admits one active job per concurrency key, the legacy unique-key rule;\n// an empty key means no limit."
)

// methodFix renames a UniqueKey declaration to ConcurrencyKey and adds
// ConcurrencyLimit after it, with the same receiver.
func (p *pass) methodFix(fd *ast.FuncDecl) *analysis.SuggestedFix {
	edits := []analysis.TextEdit{{Pos: fd.Name.Pos(), End: fd.Name.End(), NewText: []byte(keyName)}}
	edits = append(edits, docEdits(fd.Doc)...)

	recv := fd.Recv.List[0]
	name := ""
	if len(recv.Names) > 0 && recv.Names[0].Name != "_" {
		name = recv.Names[0].Name
	}
	doc, result := limitDocProvable, "true"
	if fd.Body == nil || !p.nonEmptyBody(fd.Body) {
		if name == "" {
			name = receiverNameFor(baseTypeName(recv.Type), typeParamNames(recv.Type))
		}
		doc, result = limitDocGuarded, name+"."+keyName+`() != ""`
	}
	recvText := types.ExprString(recv.Type)
	if name != "" {
		recvText = name + " " + recvText
	}
	text := "\n\n" + doc + "\nfunc (" + recvText + ") " + limitName + "() (int, bool) {\n\treturn 1, " + result + "\n}"
	at := p.lineEnd(fd.End())
	text += p.separator(at)
	edits = append(edits, analysis.TextEdit{Pos: at, End: at, NewText: []byte(text)})
	return &analysis.SuggestedFix{
		Message:   "Rename UniqueKey to ConcurrencyKey and add ConcurrencyLimit",
		TextEdits: edits,
	}
}

// typeParamNames collects the type parameter names of a receiver type
// expression such as *Job[K, V].
func typeParamNames(e ast.Expr) map[string]bool {
	names := map[string]bool{}
	ast.Inspect(e, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.IndexExpr:
			if id, ok := x.Index.(*ast.Ident); ok {
				names[id.Name] = true
			}
		case *ast.IndexListExpr:
			for _, ix := range x.Indices {
				if id, ok := ix.(*ast.Ident); ok {
					names[id.Name] = true
				}
			}
		}
		return true
	})
	return names
}

// interfaceFix replaces an interface's UniqueKey() string with
// ConcurrencyKey() string and ConcurrencyLimit() (int, bool).
func (p *pass) interfaceFix(im ifaceMethod) *analysis.SuggestedFix {
	fld := im.field
	edits := []analysis.TextEdit{{Pos: fld.Names[0].Pos(), End: fld.Names[0].End(), NewText: []byte(keyName)}}
	edits = append(edits, docEdits(fld.Doc)...)
	at := fld.End()
	if fld.Comment != nil {
		at = fld.Comment.End()
	}
	var text string
	if p.Fset.Position(fld.Pos()).Line == p.Fset.Position(im.iface.Methods.Opening).Line {
		text = "; " + limitName + "() (int, bool)"
	} else {
		indent := strings.Repeat("\t", max(p.Fset.Position(fld.Pos()).Column-1, 1))
		text = "\n" + indent + limitName + "() (int, bool)"
	}
	edits = append(edits, analysis.TextEdit{Pos: at, End: at, NewText: []byte(text)})
	return &analysis.SuggestedFix{
		Message:   "Declare ConcurrencyKey and ConcurrencyLimit instead of UniqueKey",
		TextEdits: edits,
	}
}

// delegateFix adds ConcurrencyKey and ConcurrencyLimit to a job type whose
// UniqueKey is promoted from a type this package cannot edit.
func (p *pass) delegateFix(td typeDecl, pointer bool) *analysis.SuggestedFix {
	typ := td.spec.Name.Name
	taken := map[string]bool{}
	if tps := td.spec.TypeParams; tps != nil {
		var names []string
		for _, f := range tps.List {
			for _, n := range f.Names {
				names = append(names, n.Name)
				taken[n.Name] = true
			}
		}
		typ += "[" + strings.Join(names, ", ") + "]"
	}
	if pointer {
		typ = "*" + typ
	}
	r := receiverNameFor(td.spec.Name.Name, taken)
	text := "\n\n// ConcurrencyKey is the job's concurrency key: its legacy unique key.\n" +
		"func (" + r + " " + typ + ") " + keyName + "() string { return " + r + "." + legacyName + "() }\n\n" +
		limitDocGuarded + "\n" +
		"func (" + r + " " + typ + ") " + limitName + "() (int, bool) { return 1, " + r + "." + keyName + `() != "" }`
	at := p.lineEnd(td.decl.End())
	text += p.separator(at)
	return &analysis.SuggestedFix{
		Message:   "Add ConcurrencyKey and ConcurrencyLimit delegating to the promoted UniqueKey",
		TextEdits: []analysis.TextEdit{{Pos: at, End: at, NewText: []byte(text)}},
	}
}

// docEdits renames the word UniqueKey in a comment group.
func docEdits(cg *ast.CommentGroup) []analysis.TextEdit {
	if cg == nil {
		return nil
	}
	var edits []analysis.TextEdit
	for _, c := range cg.List {
		for _, off := range wordOffsets(c.Text, legacyName) {
			pos := c.Slash + token.Pos(off)
			edits = append(edits, analysis.TextEdit{Pos: pos, End: pos + token.Pos(len(legacyName)), NewText: []byte(keyName)})
		}
	}
	return edits
}

// wordOffsets returns the offsets of word in text where it is not part of a
// longer identifier.
func wordOffsets(text, word string) []int {
	var offs []int
	for i := 0; ; {
		j := strings.Index(text[i:], word)
		if j < 0 {
			return offs
		}
		start, end := i+j, i+j+len(word)
		if (start == 0 || !isIdentByte(text[start-1])) && (end == len(text) || !isIdentByte(text[end])) {
			offs = append(offs, start)
		}
		i = end
	}
}

func isIdentByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// lineEnd moves an insertion point past a comment that trails the
// declaration ending at pos on the same line, so the comment stays with it.
func (p *pass) lineEnd(pos token.Pos) token.Pos {
	fi := p.files[p.Fset.File(pos)]
	if fi == nil {
		return pos
	}
	line := p.Fset.Position(pos).Line
	for _, cg := range fi.file.Comments {
		if cg.Pos() >= pos && p.Fset.Position(cg.Pos()).Line == line {
			return cg.End()
		}
	}
	return pos
}

// separator returns the newline that keeps a blank line between declarations
// inserted at the end of pos's line and code or a comment on the very next
// line (one-line methods written one after the other), or "" when that line
// is blank or there is none.
func (p *pass) separator(pos token.Pos) string {
	fi := p.files[p.Fset.File(pos)]
	if fi == nil {
		return ""
	}
	next := p.Fset.Position(pos).Line + 1
	for _, d := range fi.file.Decls {
		if p.Fset.Position(d.Pos()).Line == next {
			return "\n"
		}
	}
	for _, cg := range fi.file.Comments {
		if p.Fset.Position(cg.Pos()).Line == next {
			return "\n"
		}
	}
	return ""
}
