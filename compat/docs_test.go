package compat_test

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the Go blocks of docs/runtime.md from the examples they name")

const runtimeDoc = "../docs/runtime.md"

// marker names, above each Go block of docs/runtime.md, the example function
// (its body is the block) or the declarations (Type.Method, Func) of this
// package's test files that the block shows.
var marker = regexp.MustCompile(`^<!-- example: (.+) -->$`)

// TestRuntimeDocBlocksAreExamples keeps every Go block of docs/runtime.md
// equal to compiled, vetted code: each block names the Example function or
// declarations it shows, and must match them exactly. Run with -update-docs
// to rewrite the blocks from the code.
func TestRuntimeDocBlocksAreExamples(t *testing.T) {
	sources := exampleSources(t)
	doc, err := os.ReadFile(runtimeDoc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(doc), "\n")
	var out []string
	blocks := 0
	for i := 0; i < len(lines); i++ {
		out = append(out, lines[i])
		if lines[i] != "```go" {
			continue
		}
		blocks++
		end := i + 1
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		got := strings.Join(lines[i+1:end], "\n")
		if i > 0 && programMarker.MatchString(lines[i-1]) {
			// A whole program: TestRuntimeDocProgramBuilds builds it.
			out = append(out, lines[i+1:end+1]...)
			i = end
			continue
		}
		var m []string
		if i > 0 {
			m = marker.FindStringSubmatch(lines[i-1])
		}
		if m == nil {
			t.Errorf("%s:%d: Go block without an <!-- example: Name --> line above it naming the compiled example it shows", runtimeDoc, i+1)
			out = append(out, lines[i+1:end+1]...)
			i = end
			continue
		}
		var want []string
		for _, name := range strings.Fields(m[1]) {
			src, ok := sources[name]
			if !ok {
				t.Errorf("%s:%d: the block names %s, which no test file of package compat declares", runtimeDoc, i+1, name)
				continue
			}
			want = append(want, src)
		}
		wantText := strings.Join(want, "\n")
		if got != wantText && !*updateDocs {
			t.Errorf("%s:%d: the block differs from %s; run go test ./compat -run RuntimeDoc -update-docs\n got:\n%s\nwant:\n%s", runtimeDoc, i+1, m[1], got, wantText)
		}
		out = append(out, wantText, "```")
		i = end
	}
	if blocks == 0 {
		t.Fatalf("%s has no Go block", runtimeDoc)
	}
	if *updateDocs {
		if err := os.WriteFile(runtimeDoc, []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// exampleSources maps each function of the package's test files to the text
// a doc block shows: an Example's body (unindented, without its Output
// comment), or any other function's whole declaration.
func exampleSources(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		text := func(from, to token.Pos) string {
			return string(src[fset.Position(from).Offset:fset.Position(to).Offset])
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			key := fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) == 1 {
				typ := fn.Recv.List[0].Type
				if star, ok := typ.(*ast.StarExpr); ok {
					typ = star.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					key = id.Name + "." + key
				}
			}
			if !strings.HasPrefix(key, "Example") {
				sources[key] = text(fn.Pos(), fn.End())
				continue
			}
			var body []string
			for _, line := range strings.Split(strings.Trim(text(fn.Body.Lbrace+1, fn.Body.Rbrace), "\n"), "\n") {
				if strings.TrimSpace(line) == "// Output:" {
					break
				}
				body = append(body, strings.TrimPrefix(line, "\t"))
			}
			sources[key] = strings.Join(body, "\n")
		}
	}
	return sources
}
