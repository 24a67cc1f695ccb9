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

	"golang.org/x/tools/txtar"
)

// TestMain lets the test binary stand in for git when golangci-lint custom
// runs it (see gitClone).
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "git" {
		if err := gitClone(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "git stand-in:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestGolangciLintBinary builds golangci-lint with the plugin as users do,
// with the real `golangci-lint custom` and the docs' .custom-gcl.yml, and
// runs it with the docs' .golangci.yml (both read from
// docs/code-migration.md, so docs and test cannot drift apart) over
// testdata/app.txtar. Its findings must be migrate-unique lint's (position,
// message, whether a fix comes with it), and its --fix must leave the files
// migrate-unique rewrite -w leaves, byte for byte.
//
// golangci-lint custom clones golangci-lint's repository at the version the
// file names; here the only network is the Go module proxy, so a git
// stand-in (this test binary, gitClone) gives it the module proxy's source
// of that version instead. Everything after the clone is golangci-lint's
// own: it reads the file, writes cmd/golangci-lint/plugins.go, adds the
// replace for path: (pointed at this checkout), runs go mod tidy and go
// build. To run custom, the test first builds golangci-lint with the plugin
// by those same steps (buildGolangciLint); with -trimpath, which keeps the
// temporary directories out of the build cache's keys, custom's build then
// finds every package in the cache and only links.
//
// Cost (2 cores): with empty module and build caches, ~250 modules from
// the proxy (~15 s) and one build of golangci-lint, ~2.5 minutes of CPU;
// with warm caches ~15-20 s of CPU (two links, the runs).
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
	// The docs' path: is where the reader's checkout is; here, this one.
	pathLine := regexp.MustCompile(`(?m)^(\s*path:\s*)\S+`)
	if n := len(pathLine.FindAllStringIndex(customYML, -1)); n != 1 {
		t.Fatalf("the docs' .custom-gcl.yml has %d path: lines, want 1 (a local checkout)", n)
	}
	customYML = pathLine.ReplaceAllString(customYML, "${1}"+root)

	// The module's settings are the docs' example's, and each of them
	// changes the findings on testdata/app.txtar (its comment says how): a
	// setting the binary did not pass on shows as a difference.
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

	tmp := t.TempDir()
	trimpath := "GOFLAGS=" + strings.TrimSpace(goEnv(t, "GOFLAGS")+" -trimpath")
	bootstrap := buildGolangciLint(t, root, version, module, importPath, tmp, trimpath)

	// golangci-lint custom, as the docs say, with git standing in.
	gitDir := filepath.Join(tmp, "git")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(gitDir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(gitDir, "git")); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(tmp, "work")
	writeFile(t, filepath.Join(work, ".custom-gcl.yml"), customYML)
	run(t, work, []string{trimpath, "PATH=" + gitDir + string(os.PathListSeparator) + os.Getenv("PATH")}, bootstrap, "custom", "-v")
	bin := filepath.Join(work, "custom-gcl")
	if out, _ := run(t, work, nil, bin, "version"); !strings.Contains(string(out), strings.TrimPrefix(version, "v")+"-custom-gcl") {
		t.Fatalf("custom-gcl version: %s", out)
	}

	mu := filepath.Join(tmp, "migrate-unique")
	goCmd(t, root, nil, "build", "-o", mu, "./cmd/migrate-unique")
	ar, err := txtar.ParseFile(filepath.Join("testdata", "app.txtar"))
	if err != nil {
		t.Fatal(err)
	}

	// Findings.
	lintDir := writeModule(t, ar, filepath.Join(tmp, "lint"))
	wantOut, _ := run(t, lintDir, nil, mu, append(append([]string{"lint", "-json"}, muFlags...), "./...")...)
	var lintFindings []struct {
		File    string `json:"file"`
		Line    int    `json:"line"`
		Column  int    `json:"column"`
		Fixable bool   `json:"fixable"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(wantOut, &lintFindings); err != nil {
		t.Fatalf("migrate-unique lint -json: %v\n%s", err, wantOut)
	}
	var want []string
	for _, f := range lintFindings {
		want = append(want, fmt.Sprintf("%s:%d:%d: fixable=%t: %s", filepath.ToSlash(f.File), f.Line, f.Column, f.Fixable, f.Message))
	}
	slices.Sort(want)
	// What the docs' issues: settings must keep: golangci-lint's default
	// max-issues-per-linter is 50.
	if len(want) <= 50 {
		t.Fatalf("migrate-unique lint reports %d findings; testdata/app.txtar must have more than 50:\n%s", len(want), strings.Join(want, "\n"))
	}

	writeFile(t, filepath.Join(lintDir, ".golangci.yml"), golangciYML)
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
			SuggestedFixes []json.RawMessage
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
		got = append(got, fmt.Sprintf("%s:%d:%d: fixable=%t: %s", filepath.ToSlash(is.Pos.Filename), is.Pos.Line, is.Pos.Column, len(is.SuggestedFixes) > 0, is.Text))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("golangci-lint %s with the docs' .golangci.yml reports (-), migrate-unique lint (+):\n%s", version, lineDiff(got, want))
	}

	// Fixes.
	fixDir := writeModule(t, ar, filepath.Join(tmp, "fix"))
	writeFile(t, filepath.Join(fixDir, ".golangci.yml"), golangciYML)
	run(t, fixDir, gcl, bin, "run", "--allow-parallel-runners", "--fix", "./...")
	if err := os.Remove(filepath.Join(fixDir, ".golangci.yml")); err != nil {
		t.Fatal(err)
	}
	rewriteDir := writeModule(t, ar, filepath.Join(tmp, "rewrite"))
	run(t, rewriteDir, nil, mu, append(append([]string{"rewrite", "-w"}, muFlags...), "./...")...)
	fixed, rewritten := readTree(t, fixDir), readTree(t, rewriteDir)
	if d := diffTrees(fixed, rewritten); d != "" {
		t.Errorf("golangci-lint --fix (-) and migrate-unique rewrite -w (+) leave different files:\n%s", d)
	}
	if orig := readTree(t, writeModule(t, ar, filepath.Join(tmp, "orig"))); diffTrees(orig, rewritten) == "" {
		t.Errorf("rewrite -w changed nothing: the fix comparison means nothing")
	}
}

// buildGolangciLint builds golangci-lint version with the plugin as
// `golangci-lint custom` does (pkg/commands/internal/builder.go), from the
// module proxy's copy of its source, and returns the binary's path.
func buildGolangciLint(t *testing.T, root, version, module, importPath, tmp, trimpath string) string {
	t.Helper()
	src := filepath.Join(tmp, "golangci-lint")
	if err := copyGolangciLint(version, src); err != nil {
		t.Fatal(err)
	}
	// custom's template, go/format'ed: the main package is custom's too.
	plugins := fmt.Sprintf("package main\n\nimport (\n\t_ %q\n)\n", importPath)
	writeFile(t, filepath.Join(src, "cmd", "golangci-lint", "plugins.go"), plugins)
	env := []string{trimpath}
	goCmd(t, src, env, "mod", "edit", "-replace", module+"="+root)
	if out, err := goOutput(src, env, "mod", "tidy"); err != nil {
		t.Fatalf("go mod tidy in golangci-lint %s with the plugin (it needs the Go module proxy for modules not in GOMODCACHE): %v\n%s", version, err, out)
	}
	bin := filepath.Join(tmp, "bootstrap-gcl")
	goCmd(t, src, env, "build", "-o", bin, "./cmd/golangci-lint")
	return bin
}

// gitClone stands in for the one git command golangci-lint custom runs,
// git clone --branch VERSION ... https://github.com/golangci/golangci-lint.git,
// with the module proxy's source of that version.
func gitClone(args []string) error {
	if len(args) == 0 || args[0] != "clone" || args[len(args)-1] != "https://github.com/golangci/golangci-lint.git" {
		return fmt.Errorf("unexpected git %s", strings.Join(args, " "))
	}
	i := slices.Index(args, "--branch")
	if i < 0 || i+1 >= len(args) {
		return fmt.Errorf("no --branch in git %s", strings.Join(args, " "))
	}
	return copyGolangciLint(args[i+1], "golangci-lint")
}

// copyGolangciLint copies golangci-lint's module at version from the
// module proxy (through the module cache) to dir, writable.
func copyGolangciLint(version, dir string) error {
	if major, _, _ := strings.Cut(version, "."); major != "v2" {
		return fmt.Errorf("golangci-lint %s: want a v2 version", version)
	}
	mod := "github.com/golangci/golangci-lint/v2@" + version
	out, err := goOutput("", nil, "mod", "download", "-json", mod)
	var dl struct{ Dir, Error string }
	_ = json.Unmarshal(out, &dl)
	if err != nil || dl.Dir == "" {
		return fmt.Errorf("cannot get golangci-lint %s's source from the Go module proxy (this test needs it reachable, or the module in GOMODCACHE): go mod download %s: %v %s\n%s", version, mod, err, dl.Error, out)
	}
	return filepath.WalkDir(dl.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dl.Dir, p)
		dst := filepath.Join(dir, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o777)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o666)
	})
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

// writeModule writes testdata/app.txtar's files into dir.
func writeModule(t *testing.T, ar *txtar.Archive, dir string) string {
	t.Helper()
	for _, f := range ar.Files {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(f.Name)), string(f.Data))
	}
	return dir
}

func writeFile(t *testing.T, name, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(text), 0o666); err != nil {
		t.Fatal(err)
	}
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

// diffTrees lists, for each file that differs, the lines only in a (-) and
// only in b (+).
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
			fmt.Fprintf(&diff, "%s:\n%s", name, lineDiff(strings.Split(a[name], "\n"), strings.Split(b[name], "\n")))
		}
	}
	return diff.String()
}

// lineDiff lists the lines only in got (-) and only in want (+).
func lineDiff(got, want []string) string {
	only := func(a, b []string, sign string, w *strings.Builder) {
		count := map[string]int{}
		for _, l := range b {
			count[l]++
		}
		for _, l := range a {
			if count[l] > 0 {
				count[l]--
				continue
			}
			fmt.Fprintf(w, "%s %s\n", sign, l)
		}
	}
	var w strings.Builder
	only(got, want, "-", &w)
	only(want, got, "+", &w)
	return w.String()
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

func goEnv(t *testing.T, key string) string {
	t.Helper()
	out, err := goOutput("", nil, "env", key)
	if err != nil {
		t.Fatalf("go env %s: %v\n%s", key, err, out)
	}
	return strings.TrimSpace(string(out))
}

func goOutput(dir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
	return cmd.CombinedOutput()
}

func goCmd(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	if out, err := goOutput(dir, env, args...); err != nil {
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
}
