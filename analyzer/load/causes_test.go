package load

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadErrorNamesTheCgoCause: a package whose cgo header is missing is
// reported as go vet reports it, by the compiler's error naming the header,
// not by the type checker's follow-on (could not import C); its importer
// adds nothing.
func TestLoadErrorNamesTheCgoCause(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"go.mod": "module example.com/cgo\n\ngo 1.24\n",
		"p/p.go": "package p\n\n// #include <olm/olm.h>\nimport \"C\"\n\nfunc F() int { return int(C.olm_thing()) }\n",
		"q/q.go": "package q\n\nimport \"example.com/cgo/p\"\n\nvar X = p.F()\n",
	} {
		writeFile(t, filepath.Join(dir, name), content)
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "CGO_ENABLED=1")
	_, err := Load(context.Background(), Config{Dir: dir, Env: env, Tests: true, Root: dir}, []string{"./..."})
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v, want a LoadError", err)
	}
	got := strings.Join(le.Problems, "\n")
	if len(le.Problems) != 1 || !strings.Contains(got, "p/p.go:3:11: fatal error: olm/olm.h: No such file or directory") {
		t.Errorf("problems:\n%s\nwant one, naming the missing header at p/p.go:3:11", got)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
