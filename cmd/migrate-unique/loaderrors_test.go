package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestLoadErrorsRootCause: a dependency that cannot be downloaded, imported
// by many packages, and a package that does not compile are each reported
// once by lint and by rewrite (exit 2), with none of the errors that follow
// from them (could not import ..., invalid package name), from the module's
// root and from one of its subdirectories.
func TestLoadErrorsRootCause(t *testing.T) {
	bin := builtTool(t)
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/broken\n\ngo 1.24\n\nrequire github.com/nonexistent/nothing v1.2.3\n",
		"go.sum": "github.com/nonexistent/nothing v1.2.3 h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n" +
			"github.com/nonexistent/nothing v1.2.3/go.mod h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
		"bad/bad.go": "package bad\n\nfunc N() int { return \"x\" }\n",
	}
	for i := range 6 {
		files[fmt.Sprintf("p%d/p.go", i)] = fmt.Sprintf("package p%d\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/broken/bad\"\n\t\"github.com/nonexistent/nothing\"\n)\n\nfunc F() { fmt.Println(nothing.X, bad.N()) }\n", i)
	}
	writeFiles(t, dir, files)
	for _, run := range []struct {
		sub  string
		args []string
	}{
		{"", []string{"lint"}},
		{"", []string{"lint", "./..."}},
		{"p3", []string{"lint"}},
		{"", []string{"rewrite", "-diff"}},
		{"p3", []string{"rewrite", "-w"}},
	} {
		out, code := runIn(t, dir+"/"+run.sub, bin, run.args...)
		if code != 2 {
			t.Errorf("%v in %q: exit %d, want 2\n%s", run.args, run.sub, code, out)
		}
		if n := strings.Count(out, `import "github.com/nonexistent/nothing"`); n != 1 || !strings.Contains(out, "met by 6 packages") {
			t.Errorf("%v in %q: the missing module is named %d times, want once, met by 6 packages\n%s", run.args, run.sub, n, out)
		}
		if n := strings.Count(out, `cannot use "x" (untyped string constant) as int value`); n != 1 {
			t.Errorf("%v in %q: the package that does not compile is reported %d times, want once\n%s", run.args, run.sub, n, out)
		}
		for _, followOn := range []string{"could not import", "invalid package name", "no metadata"} {
			if strings.Contains(out, followOn) {
				t.Errorf("%v in %q: a follow-on error (%s) is listed\n%s", run.args, run.sub, followOn, out)
			}
		}
		if lines := strings.Count(out, "\n"); lines > 4 {
			t.Errorf("%v in %q: %d lines, want the two causes only\n%s", run.args, run.sub, lines, out)
		}
	}
}
