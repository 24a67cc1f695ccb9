package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/jobmodgen"
)

// goIn runs the go command in a module directory and returns its combined
// output and exit code.
func goIn(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	return runIn(t, dir, "go", args...)
}

func runIn(t *testing.T, dir, name string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	return "", 0
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func findingLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, ".go:") {
			lines = append(lines, l)
		}
	}
	return lines
}

// extraPackage adds the shapes jobmodgen does not generate: promotion from
// an embedded type, a generic job, an interface embedding the legacy one
// from another package, a method expression on a generic instance, a
// configured rename and the span error string, used from a test file too.
var extraPackage = map[string]string{
	"extra/extra.go": `// Package extra holds the less common job shapes.
package extra

import (
	"context"
	"errors"
	"fmt"

	"example.com/legacyjobs/queue"
)

// Keyed gives the jobs that embed it their key.
type Keyed struct{ Key string }

// UniqueKey returns the embedded key.
func (k Keyed) UniqueKey() string { return k.Key }

// Import promotes UniqueKey from Keyed.
type Import struct{ Keyed }

// Run runs the import.
func (i *Import) Run(ctx context.Context) error { return nil }

// Batch is a generic job.
type Batch[T any] struct {
	Name  string
	Items []T
}

func (b *Batch[T]) UniqueKey() string { return fmt.Sprintf("batch:%s", b.Name) }

// Run runs the batch.
func (b *Batch[T]) Run(ctx context.Context) error { return nil }

// Retryable is a job interface built on queue.Job.
type Retryable interface {
	queue.Job
	Retries() int
}

// ErrDuplicate is the legacy sentinel.
var ErrDuplicate = errors.New("job already enqueued")

const spanError = "DuplicateJob"

// Keys enqueues a batch and returns keys taken every way.
func Keys(ctx context.Context, q *queue.Queue, r Retryable) ([]string, error) {
	b := &Batch[int]{Name: "b"}
	key := (*Batch[int]).UniqueKey
	if err := q.Enqueue(ctx, b); err != nil {
		return nil, ErrDuplicate
	}
	keys := []string{Import{Keyed{"k"}}.UniqueKey(), key(b), spanError}
	if r != nil {
		keys = append(keys, r.UniqueKey())
	}
	return keys, nil
}

type cacheEntry struct{}

// UniqueKey is no job's: it must stay.
func (cacheEntry) UniqueKey() string { return "cache" }

var _ = cacheEntry{}.UniqueKey()
`,
	"extra/extra_test.go": `package extra

import (
	"context"
	"errors"
	"testing"

	"example.com/legacyjobs/queue"
)

func TestKeys(t *testing.T) {
	var q queue.Queue
	keys, err := Keys(context.Background(), &q, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"k", "batch:b", "DuplicateJob"}
	for i := range want {
		if keys[i] != want[i] {
			t.Errorf("key %d = %q, want %q", i, keys[i], want[i])
		}
	}
	if got := (&Batch[string]{Name: "x"}).UniqueKey(); got != "batch:x" {
		t.Errorf("Batch key %q", got)
	}
	if _, err := Keys(context.Background(), &q, nil); !errors.Is(err, ErrDuplicate) {
		t.Errorf("second enqueue: %v", err)
	}
}
`,
}

// extraFindings is what the analyzer reports in extraPackage with the
// rename configured: Keyed and Batch (job-type), the method expression,
// Import's call, r's call and the test's call (call-site), ErrDuplicate
// declared and used twice (rename), "DuplicateJob" twice (span-error).
const extraFindings = 2 + 4 + 3 + 2

const renameFlag = "-migrateunique.rename=example.com/legacyjobs/extra.ErrDuplicate=ErrConcurrencyLimitReached"

// TestVetAndFixTool runs the binary under the real go vet -vettool and
// go fix -fixtool on a generated module: the findings, the fixed code, which
// builds, vets and passes its tests, and a second run that finds nothing.
func TestVetAndFixTool(t *testing.T) {
	bin := builtTool(t)
	dir := t.TempDir()
	st, err := jobmodgen.Generate(dir, 3, 12, jobmodgen.Importing)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, extraPackage)

	out, code := goIn(t, dir, "vet", "-vettool="+bin, renameFlag, "./...")
	lines := findingLines(out)
	if want := st.JobTypes + st.Interfaces + st.CallSites + extraFindings; len(lines) != want || code == 0 {
		t.Fatalf("go vet -vettool: exit %d, %d findings, want %d and a non-zero exit:\n%s", code, len(lines), want, out)
	}
	for _, want := range []string{
		"queue/queue.go:12:2: interface Job declares UniqueKey",
		"jobs000/jobs000.go:17:16: job type Job0: rename UniqueKey to ConcurrencyKey",
		"extra/extra.go:16:16: job type Import promotes UniqueKey from Keyed",
		"extra/extra.go:49:23: method expression *Batch[int].UniqueKey",
		"extra/extra.go:55:25: call of Retryable.UniqueKey",
		"extra/extra_test.go:23:40: call of *Batch[string].UniqueKey",
		"extra/extra.go:42:5: rename example.com/legacyjobs/extra.ErrDuplicate to ErrConcurrencyLimitReached",
		`extra/extra.go:44:19: span error string "DuplicateJob"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("go vet -vettool output lacks %q", want)
		}
	}
	if strings.Contains(out, "cacheEntry") {
		t.Errorf("a non-job UniqueKey was reported:\n%s", out)
	}

	diff, code := goIn(t, dir, "fix", "-fixtool="+bin, "-diff", renameFlag, "./...")
	if code != 1 || !strings.Contains(diff, "+func (j *Job0) ConcurrencyLimit() (int, bool) {") {
		t.Fatalf("go fix -fixtool -diff: exit %d, want 1 and the patch\n%s", code, diff)
	}

	before, err := os.ReadFile(filepath.Join(dir, "jobs001", "jobs001.go"))
	if err != nil {
		t.Fatal(err)
	}
	if out, code := goIn(t, dir, "fix", "-fixtool="+bin, renameFlag, "./..."); code != 0 {
		t.Fatalf("go fix -fixtool: exit %d\n%s", code, out)
	}
	after, err := os.ReadFile(filepath.Join(dir, "jobs001", "jobs001.go"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(before, after) {
		t.Fatal("go fix -fixtool changed nothing")
	}
	for _, check := range []struct{ file, want string }{
		{"queue/queue.go", "\tConcurrencyKey() string\n\tConcurrencyLimit() (int, bool)\n"},
		{"jobs001/jobs001.go", "func (j *Job4) ConcurrencyKey() string { return \"Job4:\" + strconv.Itoa(j.ID) }\n\n// ConcurrencyLimit admits one active job per concurrency key, the legacy unique-key rule.\nfunc (j *Job4) ConcurrencyLimit() (int, bool) {\n\treturn 1, true\n}"},
		{"jobs001/jobs001.go", "func (j Job5) ConcurrencyLimit() (int, bool) {\n\treturn 1, j.ConcurrencyKey() != \"\"\n}"},
		{"jobs001/jobs001.go", "func (Job6) ConcurrencyLimit() (int, bool) {\n\treturn 1, true\n}"},
		{"jobs001/jobs001.go", "prev.All()[0].ConcurrencyKey()"},
		{"jobs001/jobs001.go", "cacheEntry{slot}.UniqueKey()"},
		{"extra/extra.go", "func (k Keyed) ConcurrencyLimit() (int, bool) {\n\treturn 1, k.ConcurrencyKey() != \"\"\n}"},
		{"extra/extra.go", "func (b *Batch[T]) ConcurrencyLimit() (int, bool) {\n\treturn 1, true\n}"},
		{"extra/extra.go", "var ErrConcurrencyLimitReached = errors.New"},
		{"extra/extra.go", `const spanError = "ConcurrencyLimitReached"`},
		{"extra/extra.go", "func (cacheEntry) UniqueKey() string"},
		{"extra/extra_test.go", `want := []string{"k", "batch:b", "ConcurrencyLimitReached"}`},
	} {
		src, err := os.ReadFile(filepath.Join(dir, check.file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), check.want) {
			t.Errorf("fixed %s lacks:\n%s\n--- file:\n%s", check.file, check.want, src)
		}
	}
	for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}, {"test", "-count=1", "./..."}} {
		if out, code := goIn(t, dir, args...); code != 0 {
			t.Fatalf("fixed module: go %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	if out, code := goIn(t, dir, "vet", "-vettool="+bin, renameFlag, "./..."); code != 0 || len(findingLines(out)) != 0 {
		t.Fatalf("second go vet -vettool: exit %d\n%s", code, out)
	}
	if out, code := runIn(t, dir, bin, "lint", "./..."); code != 0 {
		t.Fatalf("lint after the fix: exit %d\n%s", code, out)
	}
}

// unfixable is a module whose findings have no fix, plus one interface.
var unfixable = map[string]string{
	"go.mod": "module example.com/unfixable\n\ngo 1.24\n",
	"legacy/legacy.go": `// Package legacy holds what the tool reports but cannot fix.
package legacy

import (
	"errors"
	"strings"
)

// Job is the legacy job interface.
type Job interface {
	UniqueKey() string
	Perform() error
}

// Clash already has the new method.
type Clash struct{}

func (Clash) UniqueKey() string      { return "c" }
func (Clash) ConcurrencyKey() string { return "c" }
func (Clash) Perform() error         { return nil }

const deleteByKey = "DELETE FROM jobs WHERE unique_key = $1"

// Enqueue stands in for the queue.
func Enqueue(j Job) error { return errors.New(deleteByKey) }

func submit(j Job) error {
	err := Enqueue(j)
	if err != nil && strings.Contains(err.Error(), "duplicate key value violates unique constraint") {
		return nil
	}
	return err
}

//migrate-unique:ignore
var _ = submit
`,
	"legacy/mock.go": `// Code generated by MockGen. DO NOT EDIT.

package legacy

// MockJob mocks Job.
type MockJob struct{}

func (*MockJob) UniqueKey() string { return "" }
func (*MockJob) Perform() error    { return nil }
`,
}

// TestLintReportsUnfixable checks the lint command's codes, JSON and exit
// status, and that go vet -vettool reports the same findings.
func TestLintReportsUnfixable(t *testing.T) {
	bin := builtTool(t)
	dir := t.TempDir()
	writeFiles(t, dir, unfixable)

	out, code := runIn(t, dir, bin, "lint", "-json", "./...")
	if code != 1 {
		t.Fatalf("lint -json: exit %d, want 1\n%s", code, out)
	}
	var findings []lintFinding
	if err := json.Unmarshal([]byte(out), &findings); err != nil {
		t.Fatalf("lint -json output: %v\n%s", err, out)
	}
	var codes []string
	for _, f := range findings {
		codes = append(codes, f.Code)
		if f.Fixable != (f.Code == "interface") {
			t.Errorf("finding %+v: fixable = %v", f, f.Fixable)
		}
	}
	sort.Strings(codes)
	want := []string{"clash", "directive", "generated", "interface", "sql", "unique-violation"}
	if strings.Join(codes, " ") != strings.Join(want, " ") {
		t.Errorf("codes = %v, want %v\n%s", codes, want, out)
	}

	text, code := runIn(t, dir, bin, "lint", "./...")
	if code != 1 || !strings.Contains(text, "legacy/legacy.go:22:21: [sql] string names the unique_key column") {
		t.Errorf("lint: exit %d\n%s", code, text)
	}
	vet, code := goIn(t, dir, "vet", "-vettool="+bin, "./...")
	if code == 0 || len(findingLines(vet)) != len(want) {
		t.Errorf("go vet -vettool: exit %d, want %d findings\n%s", code, len(want), vet)
	}
	// -interface replaces the default detection: legacy.Job is no longer a
	// job interface, so only the findings that need no job remain (the SQL
	// on a table "jobs" is no longer in a package with legacy jobs, and
	// jobs is not one of the layout's tables: it goes too, and so does the
	// 23505 handling, which is reported only where a legacy job or the
	// layout's tables are).
	out, code = runIn(t, dir, bin, "lint", "-json", "-interface", "example.com/unfixable/legacy.Other", "./...")
	findings = nil
	if err := json.Unmarshal([]byte(out), &findings); err != nil || code != 1 {
		t.Fatalf("lint -interface: exit %d, %v\n%s", code, err, out)
	}
	codes = codes[:0]
	for _, f := range findings {
		codes = append(codes, f.Code)
	}
	sort.Strings(codes)
	if got := strings.Join(codes, " "); got != "directive" {
		t.Errorf("lint -interface: codes %q\n%s", got, out)
	}

	// -table names the layout's tables: SQL naming one of them and
	// unique_key is reported in any package, jobs or not.
	if out, code := runIn(t, dir, bin, "lint", "-interface", "example.com/unfixable/legacy.Other", "-table", "public.jobs", "./..."); code != 1 ||
		!strings.Contains(out, "legacy/legacy.go:22:21: [sql] string names the unique_key column") {
		t.Errorf("lint -interface -table: exit %d\n%s", code, out)
	}
	if out, code := runIn(t, dir, bin, "lint", "-interface", "nodot", "./..."); code != 2 || !strings.Contains(out, "want importpath.Name") {
		t.Errorf("lint -interface nodot: exit %d\n%s", code, out)
	}
	if out, code := runIn(t, dir, bin, "lint", "./nosuchpkg"); code != 2 {
		t.Errorf("lint ./nosuchpkg: exit %d\n%s", code, out)
	}
}

func TestVetToolProtocol(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"-V=full"}, true},
		{[]string{"-flags"}, true},
		{[]string{"-json", "-migrateunique.interface=a.B", "/tmp/b001/vet.cfg"}, true},
		{[]string{"-fix", "/tmp/b001/vet.cfg"}, true},
		{[]string{"lint", "x.cfg"}, false},
		{[]string{"lint", "-V=full"}, false},
		{[]string{"version"}, false},
		{nil, false},
	} {
		if got := vetToolProtocol(tc.args); got != tc.want {
			t.Errorf("vetToolProtocol(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
