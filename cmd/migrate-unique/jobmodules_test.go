package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

// jobModule is a txtar archive of testdata/jobmodules: a module (or a
// go.work workspace) whose comment says where to run (root:), whether it is
// a workspace, the files a migration changes (changes:) and how many
// external findings stay (external:).
type jobModule struct {
	archive   *txtar.Archive
	root      string // relative to the extracted tree
	workspace bool
	changes   []string
	external  int
	patterns  []string // for the go command and lint (default ./...)
}

func readJobModule(t *testing.T, name string) *jobModule {
	t.Helper()
	ar, err := txtar.ParseFile(filepath.Join("testdata", "jobmodules", name))
	if err != nil {
		t.Fatal(err)
	}
	m := &jobModule{archive: ar, root: ".", patterns: []string{"./..."}}
	for _, line := range strings.Split(string(ar.Comment), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch key {
		case "root":
			m.root = val
		case "workspace":
			m.workspace = val == "true"
		case "changes":
			m.changes = strings.Fields(val)
			sort.Strings(m.changes)
		case "patterns":
			m.patterns = strings.Fields(val)
		case "external":
			if m.external, err = strconv.Atoi(val); err != nil {
				t.Fatal(err)
			}
		}
	}
	return m
}

// extract writes the archive into a new directory and returns it.
func (m *jobModule) extract(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range m.archive.Files {
		p := filepath.Join(dir, f.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// run runs a command in the archive's root, offline; a workspace runs in
// workspace mode (no -mod=mod, which it refuses).
func (m *jobModule) run(t *testing.T, dir, name string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = filepath.Join(dir, m.root)
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GOWORK=off")
	if m.workspace {
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=", "GOWORK=")
	}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(out), 0
}

func (m *jobModule) mustRun(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	out, code := m.run(t, dir, name, args...)
	if code != 0 {
		t.Fatalf("%s %s: exit %d\n%s", name, strings.Join(args, " "), code, out)
	}
	return out
}

// snapshot reads every file of an extracted tree.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// findingPositions returns the "file:line" of every finding line of go vet
// or lint output, relative to the archive's root, sorted.
var findingLine = regexp.MustCompile(`(?m)^(?:\./)?([^\s:]+\.go):(\d+):\d+: `)

func findingPositions(out string) []string {
	var pos []string
	for _, m := range findingLine.FindAllStringSubmatch(out, -1) {
		pos = append(pos, m[1]+":"+m[2])
	}
	sort.Strings(pos)
	return pos
}

// TestJobModulesBothWays migrates each job module of testdata/jobmodules
// twice, on fresh copies: with rewrite -w, and with go vet -vettool and
// go fix -fixtool, the drivers that see one package at a time. Both must
// report the same declarations and leave the same files, exactly the files
// the archive names; then the module builds, vets and passes its tests
// (written for the new semantics, SPEC 2), a second run changes nothing,
// and the vet tool finds nothing but the external findings the archive
// expects.
func TestJobModulesBothWays(t *testing.T) {
	bin := builtTool(t)
	names, err := filepath.Glob(filepath.Join("testdata", "jobmodules", "*.txtar"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no job modules: %v", err)
	}
	for _, name := range names {
		name = filepath.Base(name)
		t.Run(strings.TrimSuffix(name, ".txtar"), func(t *testing.T) {
			t.Parallel()
			m := readJobModule(t, name)
			viaRewrite, viaFix := m.extract(t), m.extract(t)
			before := snapshot(t, viaRewrite)

			// The same declarations and uses, seen whole and per package.
			lintOut, code := m.run(t, viaRewrite, bin, append([]string{"lint"}, m.patterns...)...)
			if code != 1 {
				t.Fatalf("lint: exit %d, want 1 (findings)\n%s", code, lintOut)
			}
			vetOut, code := m.run(t, viaFix, "go", append([]string{"vet", "-vettool=" + bin}, m.patterns...)...)
			if code == 0 {
				t.Fatalf("go vet -vettool: exit 0, want findings\n%s", vetOut)
			}
			if l, v := findingPositions(lintOut), findingPositions(vetOut); strings.Join(l, " ") != strings.Join(v, " ") {
				t.Errorf("lint and go vet -vettool disagree:\nlint: %q\nvet:  %q\n--- lint:\n%s\n--- vet:\n%s", l, v, lintOut, vetOut)
			}
			if strings.Contains(lintOut+vetOut, ".go:1:1: ") {
				t.Errorf("a finding at a package clause:\n%s\n%s", lintOut, vetOut)
			}

			m.mustRun(t, viaRewrite, bin, "rewrite", "-w")
			if out, code := m.run(t, viaFix, "go", append([]string{"fix", "-fixtool=" + bin}, m.patterns...)...); code != 0 && m.external == 0 {
				t.Fatalf("go fix -fixtool: exit %d\n%s", code, out)
			}

			rewritten, fixed := snapshot(t, viaRewrite), snapshot(t, viaFix)
			var changed []string
			for p, b := range before {
				if rewritten[p] != b {
					changed = append(changed, p)
				}
				if rewritten[p] != fixed[p] {
					t.Errorf("%s differs between rewrite -w and go fix -fixtool:\n--- rewrite:\n%s\n--- go fix:\n%s", p, rewritten[p], fixed[p])
				}
			}
			sort.Strings(changed)
			if strings.Join(changed, " ") != strings.Join(m.changes, " ") {
				t.Errorf("changed files %q, want %q (every other file byte-identical)", changed, m.changes)
			}
			if len(rewritten) != len(before) || len(fixed) != len(before) {
				t.Errorf("files appeared: %d before, %d after rewrite, %d after go fix", len(before), len(rewritten), len(fixed))
			}

			for _, dir := range []string{viaRewrite, viaFix} {
				m.mustRun(t, dir, "go", append([]string{"build"}, m.patterns...)...)
				m.mustRun(t, dir, "go", append([]string{"vet"}, m.patterns...)...)
				m.mustRun(t, dir, "go", append([]string{"test", "-count=1"}, m.patterns...)...)
				if out, code := m.run(t, dir, bin, "rewrite", "-diff"); code != 0 {
					t.Errorf("a second rewrite -diff: exit %d\n%s", code, out)
				}
				out, _ := m.run(t, dir, "go", append([]string{"vet", "-vettool=" + bin}, m.patterns...)...)
				if n := len(findingPositions(out)); n != m.external || strings.Count(out, "which this run does not migrate") != m.external {
					t.Errorf("go vet -vettool after the migration: %d findings, want %d external ones\n%s", n, m.external, out)
				}
			}
			if out, _ := m.run(t, viaFix, "go", append([]string{"fix", "-fixtool=" + bin, "-diff"}, m.patterns...)...); strings.Contains(out, "+++") {
				t.Errorf("a second go fix -fixtool -diff is not empty:\n%s", out)
			}
		})
	}
}

// TestLintAndRewriteArguments: lint and rewrite read their arguments the
// same way, as go vet does (package patterns, or .go files naming their
// packages), and outside any module both say there is no go.mod there.
func TestLintAndRewriteArguments(t *testing.T) {
	bin := builtTool(t)
	m := readJobModule(t, "a_noimport.txtar")
	dir := m.extract(t)

	byPattern, code := m.run(t, dir, bin, "lint", "./billing")
	if code != 1 {
		t.Fatalf("lint ./billing: exit %d\n%s", code, byPattern)
	}
	byFile, code := m.run(t, dir, bin, "lint", "billing/billing.go")
	if code != 1 || byFile != byPattern {
		t.Errorf("lint billing/billing.go: exit %d, output differs from lint ./billing:\n%s\n---\n%s", code, byFile, byPattern)
	}
	if !strings.Contains(byFile, "job type ChargeJob") || strings.Contains(byFile, "app/app.go") {
		t.Errorf("lint billing/billing.go: want the billing package's findings only:\n%s", byFile)
	}
	diff, code := m.run(t, dir, bin, "rewrite", "-diff", "billing/billing.go", "app/app.go", "queue/queue.go")
	if code != 1 || !strings.Contains(diff, "+func (j *ChargeJob) ConcurrencyLimit() (int, bool) {") {
		t.Errorf("rewrite -diff with file arguments: exit %d\n%s", code, diff)
	}
	if out, code := m.run(t, dir, bin, "lint", "billing/nosuch.go"); code != 2 || !strings.Contains(out, "billing/nosuch.go: not a Go file") {
		t.Errorf("lint of a missing file: exit %d\n%s", code, out)
	}

	outside := t.TempDir()
	for _, args := range [][]string{{"lint"}, {"rewrite", "-diff"}, {"rewrite", "-w", "./..."}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = outside
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "no go.mod in "+outside) || !strings.Contains(string(out), "cd into the module's directory") {
			t.Errorf("%v outside a module: %v\n%s", args, err, out)
		}
	}
}
