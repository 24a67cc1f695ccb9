package compat_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// programMarker names, above a Go block of docs/runtime.md, the file of a
// whole program the block is: it must build as written.
var programMarker = regexp.MustCompile(`^<!-- program: (\S+\.go) -->$`)

// docProgram returns the whole program docs/runtime.md shows first.
func docProgram(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(runtimeDoc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(doc), "\n")
	for i := 0; i+1 < len(lines); i++ {
		if !programMarker.MatchString(lines[i]) || lines[i+1] != "```go" {
			continue
		}
		end := i + 2
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		return strings.Join(lines[i+2:end], "\n") + "\n"
	}
	t.Fatalf("%s has no <!-- program: main.go --> block", runtimeDoc)
	return ""
}

// TestRuntimeDocProgramBuilds builds the whole program that opens
// docs/runtime.md exactly as written, in a fresh module that depends on
// this checkout through a replace directive (README.md, "Using compat
// before a release"), and vets it.
func TestRuntimeDocProgramBuilds(t *testing.T) {
	prog := docProgram(t)
	if !strings.HasPrefix(prog, "package main\n") || !strings.Contains(prog, "\nfunc main() {\n") {
		t.Fatalf("the program block is not a whole program:\n%s", prog)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/service\n\ngo 1.22\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"go.mod": gomod, "main.go": prog, "go.sum": string(sum)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goCmd := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		// Offline: every module comes from the cache this repository's own
		// build filled.
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// The README's steps.
	goCmd("mod", "edit", "-require=github.com/migrate-unique/migrate-unique@v0.0.0")
	goCmd("mod", "edit", "-replace=github.com/migrate-unique/migrate-unique="+root)
	goCmd("build", "-o", filepath.Join(dir, "service"), ".")
	goCmd("vet", ".")
}

// TestGoDocShowsTheProgram: the package comment that go doc prints is the
// program docs/runtime.md opens with, line for line.
func TestGoDocShowsTheProgram(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var code []string
	for _, line := range strings.Split(string(src), "\n") {
		switch {
		case strings.HasPrefix(line, "//\t"):
			code = append(code, strings.TrimPrefix(line, "//\t"))
		case line == "//" && len(code) > 0:
			code = append(code, "")
		}
	}
	got := strings.TrimSpace(strings.Join(code, "\n"))
	if want := strings.TrimSpace(docProgram(t)); got != want {
		t.Fatalf("doc.go's program differs from docs/runtime.md's:\n got:\n%s\nwant:\n%s", got, want)
	}
	out, err := exec.Command("go", "doc", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go doc: %v\n%s", err, out)
	}
	for _, want := range []string{"package main", `res, err := c.Enqueue(ctx, compat.Job{Class: "app.jobs.ChargeJob", Value: job, Args: job})`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("go doc does not show %q:\n%s", want, out)
		}
	}
}
