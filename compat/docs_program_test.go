package compat_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
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

// readmeModuleSteps returns the command lines README.md gives under "Using
// compat before a release": the indented lines of its code block.
func readmeModuleSteps(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Using `compat` before a release\n")
	if !ok {
		t.Fatal(`README.md has no section "Using compat before a release"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var steps []string
	for _, line := range strings.Split(section, "\n") {
		if cmd, ok := strings.CutPrefix(line, "    "); ok && strings.TrimSpace(cmd) != "" {
			steps = append(steps, cmd)
		}
	}
	if len(steps) == 0 {
		t.Fatal("README.md's section on compat before a release shows no command")
	}
	return steps
}

// TestRuntimeDocProgramBuilds follows README.md, "Using compat before a
// release", as a new user does: in an empty module holding the whole program
// that opens docs/runtime.md, it runs the README's command lines exactly as
// written (the clone's path put in for ../migrate-unique), builds and vets
// the program, then runs it: the first run enqueues, the next ones are
// skipped at the code's limit, and under a limit-0 override the message
// still says what is true.
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
	// go get reads the go.mod file of every module in the requirement graph,
	// which a build of this repository never needs: on a fresh machine the
	// module cache lacks them. A user's go get fetches them from the module
	// proxy; here "go mod graph" in this repository fetches the same ones
	// through the caller's GOPROXY first, and the README's lines then run
	// offline (a proxy that answers go get's probes of the longer paths
	// github.com/migrate-unique/migrate-unique/compat... with an error other
	// than "not found", as this machine's does, would fail them; a user's
	// answers 404). No checksum database to ask: the cache's checksums are
	// those go.sum holds.
	graph := exec.Command("go", "mod", "graph")
	graph.Dir, graph.Env = root, append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	if out, err := graph.CombinedOutput(); err != nil {
		t.Fatalf("go mod graph in %s (fills the module cache with the graph's go.mod files): %v\n%s", root, err, out)
	}
	env := append(os.Environ(), "GOFLAGS=", "GOWORK=off", "GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local")
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("go", "mod", "init", "example.com/service")
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, step := range readmeModuleSteps(t) {
		run("sh", "-c", strings.ReplaceAll(step, "../migrate-unique", root))
	}
	run("go", "build", "-o", filepath.Join(dir, "service"), ".")
	run("go", "vet", ".")

	url := testdb.New(t, testdb.FromTemplate(legacy.PlainJobs.Key(0)+"/migrated/"+strings.Join(legacy.PlainJobs.Resolved.RuntimeDDL(), ";"), func(ctx context.Context, url string) error {
		if err := legacy.PlainJobs.LoadURL(ctx, url, 0); err != nil {
			return err
		}
		_, err := migrations.Up(ctx, url, legacy.PlainJobs.Layout, migrations.Options{})
		return err
	}))
	service := func() string {
		t.Helper()
		cmd := exec.Command(filepath.Join(dir, "service"))
		cmd.Env = append(os.Environ(), "DATABASE_URL="+url)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the program: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	group := "app.jobs.ChargeJob::customer-7"
	for i, want := range []string{"enqueued request ", "enqueued request ", "not enqueued: " + group + " allows 2 active jobs and is full"} {
		if out := service(); !strings.HasPrefix(out, want) {
			t.Fatalf("run %d printed %q, want %q", i+1, out, want)
		}
	}
	// The maintenance switch: the group holds 2 queued jobs, its limit is 0.
	overrides, err := compat.NewOverrides(compat.Pgx(testdb.Connect(t, url)), legacy.PlainJobs.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if err := overrides.SetLimit(t.Context(), group, 0, "maintenance"); err != nil {
		t.Fatal(err)
	}
	if out := service(); out != "not enqueued: "+group+" allows 0 active jobs and is full" {
		t.Fatalf("under a limit-0 override the program printed %q", out)
	}
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
