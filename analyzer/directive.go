package analyzer

import (
	"go/ast"
	"go/token"
	"strings"
)

// directivePrefix starts a suppression comment.
const directivePrefix = "//migrate-unique:ignore"

// fileInfo is what the analyzer knows about one file.
type fileInfo struct {
	file       *ast.File
	generated  bool
	directives []*directive
	silenced   map[int]bool // lines whose findings are suppressed
	lineStarts map[int]token.Pos
}

type directive struct {
	comment *ast.Comment
	reason  string
}

func newFileInfo(fset *token.FileSet, f *ast.File) *fileInfo {
	fi := &fileInfo{file: f, generated: ast.IsGenerated(f), silenced: map[int]bool{}}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			// gofmt writes "// migrate-unique:ignore" when the directive
			// sits in a doc comment (it only keeps known directive forms),
			// so the spaced form counts too.
			rest, ok := strings.CutPrefix(c.Text, directivePrefix)
			if !ok {
				rest, ok = strings.CutPrefix(c.Text, "// "+directivePrefix[2:])
			}
			if !ok || rest != "" && rest[0] != ' ' && rest[0] != '\t' {
				continue
			}
			// A reason is prose: text that is itself a comment (a trailing
			// "// TODO") is none.
			reason := strings.TrimSpace(rest)
			if strings.HasPrefix(reason, "//") {
				reason = ""
			}
			fi.directives = append(fi.directives, &directive{comment: c, reason: reason})
			// A directive after code on its line covers that line only;
			// one on a line of its own covers the next line and the line
			// after its comment group (a doc comment above a declaration).
			line := fset.Position(c.Slash).Line
			if start, ok := fi.codeStart(fset, line); ok && start < c.Slash {
				fi.silenced[line] = true
				continue
			}
			fi.silenced[line+1] = true
			fi.silenced[fset.Position(cg.End()).Line+1] = true
		}
	}
	return fi
}

func (fi *fileInfo) suppressed(line int) bool { return fi.silenced[line] }

// codeStart returns where the first syntax node on a line starts. The
// line index is built on first use: only files with a directive need it.
func (fi *fileInfo) codeStart(fset *token.FileSet, line int) (token.Pos, bool) {
	if fi.lineStarts == nil {
		fi.lineStarts = map[int]token.Pos{}
		ast.Inspect(fi.file, func(n ast.Node) bool {
			switch n.(type) {
			case nil, *ast.Comment, *ast.CommentGroup:
				return false
			}
			l := fset.Position(n.Pos()).Line
			if p, ok := fi.lineStarts[l]; !ok || n.Pos() < p {
				fi.lineStarts[l] = n.Pos()
			}
			return true
		})
	}
	p, ok := fi.lineStarts[line]
	return p, ok
}

// reportDirectives reports suppression directives that give no reason.
func (p *pass) reportDirectives() {
	for _, f := range p.Files {
		fi := p.files[p.Fset.File(f.FileStart)]
		if fi == nil {
			continue
		}
		for _, d := range fi.directives {
			if d.reason == "" {
				p.Report(diagnostic(d.comment, CodeDirective,
					"//migrate-unique:ignore needs a reason: write why this is not a job to migrate"))
			}
		}
	}
}
