package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

// realDepsModule extracts testdata/realdeps/module.txtar into a new
// directory, with this repository's requirements as its go.mod and its
// go.sum, so that pgx, x/sync and x/tools resolve offline from the module
// cache at the versions this repository builds with.
func realDepsModule(t *testing.T) string {
	t.Helper()
	ar, err := txtar.ParseFile(filepath.Join("testdata", "realdeps", "module.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{}
	for _, f := range ar.Files {
		files[f.Name] = string(f.Data)
	}
	gomod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	gosum, err := os.ReadFile(filepath.Join("..", "..", "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	files["go.mod"] = strings.Replace(string(gomod), "module github.com/migrate-unique/migrate-unique", "module example.com/realdeps", 1)
	files["go.sum"] = string(gosum)
	writeFiles(t, dir, files)
	return dir
}

// anyFindingLine matches a finding's position in the output of lint, go vet
// (./file.go:...) and rewrite's summary (a tab, then file.go:...).
var anyFindingLine = regexp.MustCompile(`(?m)^\s*(?:\./)?([^\s:#]+\.go):(\d+):(\d+): `)

func positionsOf(out string) []string {
	var pos []string
	for _, m := range anyFindingLine.FindAllStringSubmatch(out, -1) {
		pos = append(pos, m[1]+":"+m[2]+":"+m[3])
	}
	sort.Strings(pos)
	return pos
}

// TestRealDependencies runs lint, go vet -vettool and rewrite over a
// module that imports pgx, x/sync and x/tools: the legacy job code is
// reported alike by all three, the false-positive shapes (a run method
// promoted from sync.Once, *exec.Cmd, *http.Client and x/sync's
// singleflight.Group; a Run field of an x/tools type; Redis Lua, a Redis
// field name, JSON, tags and River's SQL) by none, and go fix -fixtool and
// rewrite -w both leave a module that builds, vets and passes its tests,
// the same files byte for byte.
func TestRealDependencies(t *testing.T) {
	bin := builtTool(t)
	dir := realDepsModule(t)

	lintOut, code := runIn(t, dir, bin, "lint", "-json", "./...")
	if code != 1 {
		t.Fatalf("lint -json: exit %d, want 1\n%s", code, lintOut)
	}
	var findings []lintFinding
	if err := json.Unmarshal([]byte(lintOut), &findings); err != nil {
		t.Fatalf("lint -json: %v\n%s", err, lintOut)
	}
	var codes, lintPos []string
	for _, f := range findings {
		codes = append(codes, f.File+" "+f.Code)
		lintPos = append(lintPos, f.File+":"+strconv.Itoa(f.Line)+":"+strconv.Itoa(f.Column))
	}
	sort.Strings(codes)
	sort.Strings(lintPos)
	want := []string{
		"app/app.go call-site",
		"jobs/jobs.go call-site",
		"jobs/jobs.go job-type",
		"queue/queue.go call-site",
		"queue/queue.go interface",
		"queue/queue.go sql",
		"queue/queue.go unique-violation",
	}
	if strings.Join(codes, "\n") != strings.Join(want, "\n") {
		t.Errorf("lint findings:\n%s\nwant:\n%s\n%s", strings.Join(codes, "\n"), strings.Join(want, "\n"), lintOut)
	}

	// Part of the module: the call site in app of a method declared in jobs
	// is reported as in the whole run (jobs is loaded from source too).
	part, code := runIn(t, dir, bin, "lint", "./app/...")
	if code != 1 || !strings.Contains(part, "app/app.go:8:56: [call-site] call of jobs.Email.UniqueKey: now ConcurrencyKey") || strings.Contains(part, "jobs/jobs.go") {
		t.Errorf("lint ./app/...: exit %d, want app's call site only\n%s", code, part)
	}
	// From a subdirectory, every path is relative to it, sorted by file.
	sub, _ := runIn(t, filepath.Join(dir, "jobs"), bin, "lint", "./...", "../queue/...")
	var files []string
	for _, l := range strings.Split(strings.TrimSpace(sub), "\n") {
		if f, _, ok := strings.Cut(l, ":"); ok && strings.HasSuffix(f, ".go") {
			files = append(files, f)
		}
	}
	if strings.Join(files, " ") != "jobs.go jobs.go ../queue/queue.go ../queue/queue.go ../queue/queue.go ../queue/queue.go" {
		t.Errorf("lint from jobs/: files %v\n%s", files, sub)
	}

	vetOut, code := goIn(t, dir, "vet", "-vettool="+bin, "./...")
	if code == 0 {
		t.Errorf("go vet -vettool: exit 0, want findings\n%s", vetOut)
	}
	if got := positionsOf(vetOut); strings.Join(got, " ") != strings.Join(lintPos, " ") {
		t.Errorf("go vet -vettool reports %v, lint %v\n%s", got, lintPos, vetOut)
	}
	diffOut, code := runIn(t, dir, bin, "rewrite", "-diff", "./...")
	if code != 1 {
		t.Errorf("rewrite -diff: exit %d, want 1 (a diff)\n%s", code, diffOut)
	}
	summary := diffOut[strings.Index(diffOut, "example.com/realdeps:"):]
	if got := positionsOf(summary); strings.Join(got, " ") != strings.Join(lintPos, " ") {
		t.Errorf("rewrite reports %v, lint %v\n%s", got, lintPos, summary)
	}

	// Both ways of fixing leave the same module, which builds, vets and
	// passes its tests, with the traps byte for byte as they were.
	byFix, byRewrite := realDepsModule(t), realDepsModule(t)
	if out, code := goIn(t, byFix, "fix", "-fixtool="+bin, "./..."); code != 0 {
		t.Fatalf("go fix -fixtool: exit %d\n%s", code, out)
	}
	if out, code := runIn(t, byRewrite, bin, "rewrite", "-w", "./..."); code != 0 {
		t.Fatalf("rewrite -w: exit %d\n%s", code, out)
	}
	before := snapshot(t, dir)
	fixed, rewritten := snapshot(t, byFix), snapshot(t, byRewrite)
	for _, name := range []string{"traps/traps.go", "traps/traps_test.go"} {
		if fixed[name] != before[name] || rewritten[name] != before[name] {
			t.Errorf("%s changed", name)
		}
	}
	for name, content := range fixed {
		if name != "go.mod" && name != "go.sum" && rewritten[name] != content {
			t.Errorf("%s differs between go fix -fixtool and rewrite -w:\ngo fix:\n%s\nrewrite:\n%s", name, content, rewritten[name])
		}
	}
	if !strings.Contains(fixed["jobs/jobs.go"], "func (e Email) ConcurrencyKey() string") {
		t.Errorf("go fix did not migrate Email:\n%s", fixed["jobs/jobs.go"])
	}
	for _, d := range []string{byFix, byRewrite} {
		if out, code := goIn(t, d, "build", "./..."); code != 0 {
			t.Errorf("go build after the fix: exit %d\n%s", code, out)
		}
		if out, code := goIn(t, d, "vet", "./..."); code != 0 {
			t.Errorf("go vet after the fix: exit %d\n%s", code, out)
		}
		if out, code := goIn(t, d, "test", "./..."); code != 0 {
			t.Errorf("go test after the fix: exit %d\n%s", code, out)
		}
	}
}
