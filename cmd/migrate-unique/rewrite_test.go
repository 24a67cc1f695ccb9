package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

// extractModule writes a rewrite test archive into a temporary directory
// and makes its main module the working directory, with the go command
// offline.
func extractModule(t *testing.T, archive string) string {
	t.Helper()
	ar, err := txtar.ParseFile(filepath.Join("..", "..", "rewrite", "testdata", archive))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, f := range ar.Files {
		if !strings.HasPrefix(f.Name, "mod/") && !strings.HasPrefix(f.Name, "dep/") {
			continue
		}
		p := filepath.Join(root, f.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOWORK", "off")
	t.Setenv("GOTOOLCHAIN", "local")
	dir := filepath.Join(root, "mod")
	t.Chdir(dir)
	return dir
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRewriteCommand walks the command's contract: -diff (the default)
// exits 1 with a diff and changes nothing, -w writes, a second -diff exits
// 0 with no output.
func TestRewriteCommand(t *testing.T) {
	dir := extractModule(t, "jobs.txtar")
	jobsFile := filepath.Join(dir, "jobs", "jobs.go")
	original := readFile(t, jobsFile)

	code, out, errOut := runCLI(t, "rewrite", "-tags", "integration")
	if code != 1 {
		t.Fatalf("rewrite (diff) exited %d, want 1 (there is a diff); stderr:\n%s", code, errOut)
	}
	for _, want := range []string{"--- a/jobs/jobs.go", "+++ b/jobs/jobs.go", "+func (e Email) ConcurrencyLimit() (int, bool) {", "--- a/jobs/tagged.go"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"job types migrated: 7", "interfaces migrated: 1", "call sites renamed: 8",
		"jobs/mock_job.go:11:19: [generated file to regenerate]", "store/store.go:11:19: [SQL text to check]",
		"store/store.go:28:49: [unique-violation handling to delete]"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("summary lacks %q:\n%s", want, errOut)
		}
	}
	if readFile(t, jobsFile) != original {
		t.Fatal("rewrite -diff changed a file")
	}

	code, out, errOut = runCLI(t, "rewrite", "-w", "-tags", "integration", "./...")
	if code != 0 || !strings.Contains(out, "wrote 5 file(s)") || !strings.Contains(out, "job types migrated: 7") {
		t.Fatalf("rewrite -w: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(readFile(t, jobsFile), "func (e Email) ConcurrencyKey() string") {
		t.Fatal("rewrite -w did not write jobs.go")
	}

	code, out, errOut = runCLI(t, "rewrite", "-diff", "-tags", "integration")
	if code != 0 || out != "" {
		t.Fatalf("second rewrite -diff: exit %d, want 0 and no diff\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

func TestRewriteCommandBadInput(t *testing.T) {
	dir := extractModule(t, "interface.txtar")
	before := readFile(t, filepath.Join(dir, "app", "app.go"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-diff", "-w"}, "-diff and -w exclude each other"},
		{[]string{"-rename", "WithUniqueKey"}, "want importpath.Old=New"},
		{[]string{"-rename", "example.com/mod/queue.WithUniqueKey=other.pkg.New"}, "same package"},
		{[]string{"-interface", "Task"}, "want importpath.Name"},
		{[]string{"-w", "./nothing/..."}, "match no package"},
		{[]string{"-nosuchflag"}, "flag provided but not defined"},
	} {
		code, _, errOut := runCLI(t, append([]string{"rewrite"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("rewrite %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
	if readFile(t, filepath.Join(dir, "app", "app.go")) != before {
		t.Fatal("a refused rewrite changed a file")
	}
}

// TestRewriteCommandListFlags: -interface and -rename take comma-separated
// lists as lint and go vet do, and give the diff that repeated flags give.
func TestRewriteCommandListFlags(t *testing.T) {
	extractModule(t, "interface.txtar")
	repeated := []string{"rewrite",
		"-interface", "example.com/mod/queue.Task", "-interface", "example.com/mod/queue.Nothing",
		"-rename", "example.com/mod/queue.WithUniqueKey=WithConcurrencyKey",
		"-rename", "example.com/mod/queue.ErrDuplicate=ErrConcurrencyLimitReached"}
	code, want, errOut := runCLI(t, repeated...)
	if code != 1 || !strings.Contains(want, "WithConcurrencyKey") || !strings.Contains(want, "ErrConcurrencyLimitReached") || !strings.Contains(want, "ConcurrencyLimit() (int, bool)") {
		t.Fatalf("rewrite with repeated flags: exit %d\nstdout:\n%s\nstderr:\n%s", code, want, errOut)
	}
	code, got, errOut := runCLI(t, "rewrite",
		"-interface", "example.com/mod/queue.Task, example.com/mod/queue.Nothing",
		"-rename", "example.com/mod/queue.WithUniqueKey=WithConcurrencyKey,example.com/mod/queue.ErrDuplicate=ErrConcurrencyLimitReached")
	if code != 1 || got != want {
		t.Errorf("rewrite with comma-separated flags: exit %d, diff\n%s\nwant the diff of repeated flags:\n%s\nstderr:\n%s", code, got, want, errOut)
	}
}
