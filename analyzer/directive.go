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
	generated  bool
	directives []*directive
	silenced   map[int]bool // lines whose findings are suppressed
}

type directive struct {
	comment *ast.Comment
	reason  string
}

func newFileInfo(fset *token.FileSet, f *ast.File) *fileInfo {
	fi := &fileInfo{generated: ast.IsGenerated(f), silenced: map[int]bool{}}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			rest, ok := strings.CutPrefix(c.Text, directivePrefix)
			if !ok || rest != "" && rest[0] != ' ' && rest[0] != '\t' {
				continue
			}
			fi.directives = append(fi.directives, &directive{comment: c, reason: strings.TrimSpace(rest)})
			// The directive covers its own line, the next one, and the
			// line after its comment group (a doc comment above a
			// declaration).
			line := fset.Position(c.Slash).Line
			fi.silenced[line] = true
			fi.silenced[line+1] = true
			fi.silenced[fset.Position(cg.End()).Line+1] = true
		}
	}
	return fi
}

func (fi *fileInfo) suppressed(line int) bool { return fi.silenced[line] }

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
