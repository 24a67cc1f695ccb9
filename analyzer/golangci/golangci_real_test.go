package golangci_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestGolangciLintBinary builds a real golangci-lint with the plugin the way
// `golangci-lint custom` builds it, at the version docs/code-migration.md's
// .custom-gcl.yml names, and runs it with the docs' .golangci.yml (both read
// from the docs, so they cannot drift apart from what is tested) over a
// legacy job module. Its findings must be migrate-unique lint's, position
// for position and message for message, and its --fix must leave the files
// migrate-unique rewrite -w leaves.
//
// `golangci-lint custom` clones golangci-lint's repository; the test takes
// the same source from the Go module proxy (go mod download), then does
// what custom does: it writes cmd/golangci-lint/plugins.go with a blank
// import of the plugin, adds a replace of this module to this checkout (the
// docs' path:), runs go mod tidy and go build ./cmd/golangci-lint. The
// build uses the go command's usual module and build caches: warm, the
// test takes about a minute; on empty caches it downloads and compiles all
// of golangci-lint. The binary's own custom command also reads the docs'
// .custom-gcl.yml (checkCustomConfig).
func TestGolangciLintBinary(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "code-migration.md"))
	if err != nil {
		t.Fatal(err)
	}
	customYML := docsBlock(t, string(doc), "`.custom-gcl.yml`")
	golangciYML := docsBlock(t, string(doc), "`.golangci.yml`")

	version := yamlValue(t, customYML, "version")
	module := yamlValue(t, customYML, "module")
	importPath := yamlValue(t, customYML, "import")
	if module != "github.com/migrate-unique/migrate-unique" || importPath != module+"/analyzer/golangci" {
		t.Fatalf(".custom-gcl.yml in the docs names module %q, import %q: not this module and this package", module, importPath)
	}
	if yamlValue(t, customYML, "path") == "" {
		t.Fatalf(".custom-gcl.yml in the docs gives no path: for a local checkout")
	}

	tmp := t.TempDir()
	bin := buildGolangciLint(t, root, version, module, importPath, tmp)
	checkCustomConfig(t, bin, customYML, version, tmp)
	mu := filepath.Join(tmp, "migrate-unique")
	goCmd(t, root, "build", "-o", mu, "./cmd/migrate-unique")

	// The module's settings are the docs' example's (queue.Job,
	// jobs.queue_jobs and the two renames), and each of them changes the
	// findings: Job is a job interface only because it is named (Start is
	// no method the default detection knows), store's SQL is reported only
	// because its table is named, and the renames are findings of their
	// own. A setting the binary did not pass on shows as a difference.
	muFlags := []string{
		"-interface", "example.com/app/queue.Job",
		"-table", "jobs.queue_jobs",
		"-rename", "example.com/app/queue.WithUniqueKey=WithConcurrencyKey",
		"-rename", "example.com/app/queue.ErrDuplicate=ErrConcurrencyLimitReached",
	}
	for _, want := range []string{"example.com/app/queue.Job", "jobs.queue_jobs", "old: example.com/app/queue.WithUniqueKey", "new: WithConcurrencyKey", "old: example.com/app/queue.ErrDuplicate", "new: ErrConcurrencyLimitReached", "all-sql: false"} {
		if !strings.Contains(golangciYML, want) {
			t.Fatalf("the docs' .golangci.yml no longer says %q: update this test's module and flags with it", want)
		}
	}

	// Findings.
	lintDir := writeModule(t, filepath.Join(tmp, "lint"))
	wantOut, _ := run(t, lintDir, nil, mu, append(append([]string{"lint", "-json"}, muFlags...), "./...")...)
	var lintFindings []struct {
		File    string `json:"file"`
		Line    int    `json:"line"`
		Column  int    `json:"column"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(wantOut, &lintFindings); err != nil {
		t.Fatalf("migrate-unique lint -json: %v\n%s", err, wantOut)
	}
	var want []string
	for _, f := range lintFindings {
		want = append(want, fmt.Sprintf("%s:%d:%d: %s", f.File, f.Line, f.Column, f.Message))
	}
	slices.Sort(want)
	// Every default that would hide a finding is exercised: five call
	// sites on one line with one text, and a generated file.
	if len(want) < 12 || !slices.ContainsFunc(want, func(s string) bool { return strings.Contains(s, "tasks/gen.go") }) {
		t.Fatalf("migrate-unique lint reports too little for the test to mean anything:\n%s", strings.Join(want, "\n"))
	}

	if err := os.WriteFile(filepath.Join(lintDir, ".golangci.yml"), []byte(golangciYML), 0o666); err != nil {
		t.Fatal(err)
	}
	// A cache of its own, and no wait on (or failure for) another
	// golangci-lint running on the machine: it locks a file in the temp
	// directory by default.
	gcl := []string{"GOLANGCI_LINT_CACHE=" + filepath.Join(tmp, "gcl-cache")}
	gotOut, _ := run(t, lintDir, gcl, bin, "run", "--allow-parallel-runners", "--output.json.path=stdout", "--output.text.path=", "./...")
	var report struct {
		Issues []struct {
			FromLinter string
			Text       string
			Pos        struct {
				Filename     string
				Line, Column int
			}
		}
	}
	// The JSON report, then golangci-lint's count of issues.
	if err := json.NewDecoder(bytes.NewReader(gotOut)).Decode(&report); err != nil {
		t.Fatalf("golangci-lint run: %v\n%s", err, gotOut)
	}
	var got []string
	for _, is := range report.Issues {
		if is.FromLinter != "migrateunique" {
			t.Errorf("finding from linter %q: %s", is.FromLinter, is.Text)
			continue
		}
		got = append(got, fmt.Sprintf("%s:%d:%d: %s", filepath.ToSlash(is.Pos.Filename), is.Pos.Line, is.Pos.Column, is.Text))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("golangci-lint %s with the docs' .golangci.yml reports\n%s\nwant (migrate-unique lint)\n%s", version, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Fixes.
	fixDir := writeModule(t, filepath.Join(tmp, "fix"))
	if err := os.WriteFile(filepath.Join(fixDir, ".golangci.yml"), []byte(golangciYML), 0o666); err != nil {
		t.Fatal(err)
	}
	run(t, fixDir, gcl, bin, "run", "--allow-parallel-runners", "--fix", "./...")
	if err := os.Remove(filepath.Join(fixDir, ".golangci.yml")); err != nil {
		t.Fatal(err)
	}
	rewriteDir := writeModule(t, filepath.Join(tmp, "rewrite"))
	run(t, rewriteDir, nil, mu, append(append([]string{"rewrite", "-w"}, muFlags...), "./...")...)
	fixed, rewritten := readTree(t, fixDir), readTree(t, rewriteDir)
	if reflectDiff := diffTrees(fixed, rewritten); reflectDiff != "" {
		t.Errorf("golangci-lint --fix and migrate-unique rewrite -w leave different files:\n%s", reflectDiff)
	}
	if orig := readTree(t, writeModule(t, filepath.Join(tmp, "orig"))); diffTrees(orig, rewritten) == "" {
		t.Errorf("rewrite -w changed nothing: the fix comparison means nothing")
	}
}

// buildGolangciLint builds golangci-lint version with the plugin as
// `golangci-lint custom` does (pkg/commands/internal/builder.go), from the
// module proxy's copy of its source, and returns the binary's path.
func buildGolangciLint(t *testing.T, root, version, module, importPath, tmp string) string {
	t.Helper()
	const gclModule = "github.com/golangci/golangci-lint/v2"
	out, err := goOutput(tmp, "mod", "download", "-json", gclModule+"@"+version)
	if err != nil {
		t.Fatalf("cannot get golangci-lint %s's source from the Go module proxy (this test needs it reachable, or the module in GOMODCACHE): go mod download: %v\n%s", version, err, out)
	}
	var dl struct{ Dir, Error string }
	if err := json.Unmarshal(out, &dl); err != nil || dl.Dir == "" {
		t.Fatalf("go mod download %s@%s: %v %s\n%s", gclModule, version, err, dl.Error, out)
	}
	src := filepath.Join(tmp, "golangci-lint")
	if err := os.CopyFS(src, os.DirFS(dl.Dir)); err != nil {
		t.Fatal(err)
	}
	// custom's template, go/format'ed.
	plugins := fmt.Sprintf("package main\n\nimport (\n\t_ %q\n)\n", importPath)
	if err := os.WriteFile(filepath.Join(src, "cmd", "golangci-lint", "plugins.go"), []byte(plugins), 0o666); err != nil {
		t.Fatal(err)
	}
	goCmd(t, src, "mod", "edit", "-replace", module+"="+root)
	if out, err := goOutput(src, "mod", "tidy"); err != nil {
		t.Fatalf("go mod tidy in golangci-lint %s with the plugin (it may need the Go module proxy for modules not in GOMODCACHE): %v\n%s", version, err, out)
	}
	bin := filepath.Join(tmp, "custom-gcl")
	goCmd(t, src, "build", "-ldflags", "-s -w -X 'main.version="+version+"-custom-gcl'", "-o", bin, "./cmd/golangci-lint")
	return bin
}

// checkCustomConfig has the built binary's own `custom` command read and
// validate the docs' .custom-gcl.yml: with a git on PATH that records its
// arguments and fails, custom gets as far as cloning golangci-lint at the
// configured version only if it accepted the file.
func checkCustomConfig(t *testing.T, bin, customYML, version, tmp string) {
	t.Helper()
	dir := filepath.Join(tmp, "custom")
	fakeBin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(fakeBin, 0o777); err != nil {
		t.Fatal(err)
	}
	argsFile := filepath.Join(dir, "git-args")
	script := "#!/bin/sh\necho \"$@\" > '" + argsFile + "'\nexit 3\n"
	if err := os.WriteFile(filepath.Join(fakeBin, "git"), []byte(script), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".custom-gcl.yml"), []byte(customYML), 0o666); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "custom")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+fakeBin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("golangci-lint custom with a failing git succeeded:\n%s", out)
	}
	args, readErr := os.ReadFile(argsFile)
	if readErr != nil {
		t.Fatalf("golangci-lint custom rejects the docs' .custom-gcl.yml before cloning: %v\n%s", err, out)
	}
	if !strings.Contains(string(args), "--branch "+version+" ") {
		t.Fatalf("golangci-lint custom with the docs' .custom-gcl.yml clones %q, want version %s", args, version)
	}
}

// docsBlock returns the fenced block that follows the line label in the
// docs' golangci-lint section.
func docsBlock(t *testing.T, doc, label string) string {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n## golangci-lint\n")
	if !ok {
		t.Fatal("docs/code-migration.md has no golangci-lint section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	m := regexp.MustCompile("(?s)\n" + regexp.QuoteMeta(label) + "\n```yaml\n(.*?)\n```\n").FindStringSubmatch(section)
	if m == nil {
		t.Fatalf("docs/code-migration.md's golangci-lint section has no yaml block after %s", label)
	}
	return m[1] + "\n"
}

// yamlValue returns key's value in the simple YAML of the docs' blocks,
// without a trailing comment.
func yamlValue(t *testing.T, yml, key string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^[ -]*` + regexp.QuoteMeta(key) + `: *([^ #\n]*)`).FindStringSubmatch(yml)
	if m == nil {
		t.Fatalf("no %s: in\n%s", key, yml)
	}
	return strings.Trim(m[1], `"`)
}

// legacyModule uses every setting of the docs' example (see muFlags).
var legacyModule = map[string]string{
	"go.mod": "module example.com/app\n\ngo 1.22\n",
	"queue/queue.go": `// Package queue is the app's legacy queue.
package queue

import "errors"

// Job is the legacy job interface. Start is not a method the default
// detection knows: only settings.interfaces makes Job a job interface.
type Job interface {
	UniqueKey() string
	Start() error
}

// ErrDuplicate is returned for a job whose key is taken.
var ErrDuplicate = errors.New("queue: duplicate job")

// Option configures Enqueue.
type Option func(*options)

type options struct{ key string }

// WithUniqueKey sets the job's key.
func WithUniqueKey(key string) Option { return func(o *options) { o.key = key } }

// Enqueue enqueues j.
func Enqueue(j Job, opts ...Option) error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.key == "" {
		o.key = j.UniqueKey()
	}
	return j.Start()
}
`,
	"tasks/tasks.go": `// Package tasks holds the app's jobs.
package tasks

import (
	"errors"

	"example.com/app/queue"
)

// Upload is a job.
type Upload struct{ Bucket string }

func (u Upload) UniqueKey() string { return u.Bucket }

func (u Upload) Start() error { return nil }

// Keys has five findings on one line with one text: golangci-lint's
// defaults would show one of them.
func Keys(u Upload) []string {
	return []string{u.UniqueKey(), u.UniqueKey(), u.UniqueKey(), u.UniqueKey(), u.UniqueKey()}
}

// Submit enqueues u.
func Submit(u Upload) error {
	err := queue.Enqueue(u, queue.WithUniqueKey(u.UniqueKey()))
	if errors.Is(err, queue.ErrDuplicate) {
		return nil
	}
	return err
}
`,
	"tasks/gen.go": `// Code generated by hand for the test. DO NOT EDIT.

package tasks

// Fetch is a generated job: golangci-lint's defaults leave its finding out.
type Fetch struct{ URL string }

func (f Fetch) UniqueKey() string { return f.URL }

func (f Fetch) Start() error { return nil }
`,
	"store/store.go": `// Package store has no job: its SQL is reported because it names a
// table of settings.tables.
package store

// ByKey finds a job by its key.
const ByKey = ` + "`SELECT id FROM jobs.queue_jobs WHERE unique_key = $1`" + `
`,
}

func writeModule(t *testing.T, dir string) string {
	t.Helper()
	for name, text := range legacyModule {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func diffTrees(a, b map[string]string) string {
	var names []string
	for name := range a {
		names = append(names, name)
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var diff strings.Builder
	for _, name := range names {
		if a[name] != b[name] {
			fmt.Fprintf(&diff, "--- %s (golangci-lint --fix)\n%s\n--- %s (rewrite -w)\n%s\n", name, a[name], name, b[name])
		}
	}
	return diff.String()
}

// run runs name in dir; exit status 1 (findings) is not an error.
func run(t *testing.T, dir string, env []string, name string, args ...string) ([]byte, []byte) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("%s %s (in %s): %v\n%s%s", filepath.Base(name), strings.Join(args, " "), dir, err, stdout.Bytes(), stderr.Bytes())
		}
	}
	return stdout.Bytes(), stderr.Bytes()
}

func goOutput(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	return cmd.CombinedOutput()
}

func goCmd(t *testing.T, dir string, args ...string) {
	t.Helper()
	if out, err := goOutput(dir, args...); err != nil {
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
}
