package rewrite_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/txtar"

	"github.com/migrate-unique/migrate-unique/rewrite"
)

// renamer is a small stand-in analyzer that proves the driver on its own: it
// renames every UniqueKey method of the main module (declarations, calls,
// method values, interface methods) to ConcurrencyKey, and reports string
// literals naming unique_key without a fix. mode changes it into a broken
// analyzer for the refusal tests.
func renamer(mode string) *analysis.Analyzer {
	a := &analysis.Analyzer{Name: "renamer", Doc: "renames UniqueKey (test only)"}
	a.Run = func(pass *analysis.Pass) (any, error) {
		mainModule := pass.Module.Path
		inMain := func(obj types.Object) bool {
			p := obj.Pkg().Path()
			return p == mainModule || strings.HasPrefix(p, mainModule+"/")
		}
		for _, file := range pass.Files {
			ast.Inspect(file, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && strings.Contains(lit.Value, "unique_key") {
					pass.Report(analysis.Diagnostic{Pos: lit.Pos(), Category: "sql", Message: "SQL text names unique_key"})
				}
				id, ok := n.(*ast.Ident)
				if !ok || id.Name != "UniqueKey" {
					return true
				}
				obj, def := pass.TypesInfo.Defs[id], true
				if obj == nil {
					obj, def = pass.TypesInfo.Uses[id], false
				}
				fn, ok := obj.(*types.Func)
				if !ok {
					return true
				}
				if mode == "outside" && !inMain(fn) {
					// Edit the dependency's declaration: must be refused.
					pass.Report(fix(fn.Pos(), fn.Pos()+token9, "call", "dependency method", "ConcurrencyKey"))
					return true
				}
				if !inMain(fn) || (mode == "decls-only" && !def) {
					return true
				}
				category := "call"
				if def {
					category = "method"
				}
				pass.Report(fix(id.Pos(), id.End(), category, "UniqueKey -> ConcurrencyKey", "ConcurrencyKey"))
				if mode == "conflict" && def {
					pass.Report(fix(id.Pos(), id.End(), category, "UniqueKey -> Key", "Key"))
				}
				return true
			})
		}
		return nil, nil
	}
	return a
}

const token9 = 9 // len("UniqueKey")

func fix(pos, end token.Pos, category, msg, text string) analysis.Diagnostic {
	return analysis.Diagnostic{Pos: pos, Category: category, Message: msg, SuggestedFixes: []analysis.SuggestedFix{{
		Message: msg, TextEdits: []analysis.TextEdit{{Pos: pos, End: end, NewText: []byte(text)}},
	}}}
}

// module is a txtar archive extracted to a temporary directory. The main
// module is under mod/, a replaced dependency under dep/, and the expected
// content of every file the rewrite changes under want/.
type module struct {
	root, dir string
	want      map[string][]byte // path relative to root -> expected content
	changes   []string          // the comment's "changes:" line: files the rewrite changes
	human     []string          // the comment's "human:" line: categories left for a human
	// regenerated holds generated files as their generator writes them
	// after the rewrite.
	regenerated map[string][]byte
}

func extract(t *testing.T, name string) *module {
	t.Helper()
	ar, err := txtar.ParseFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	m := &module{root: t.TempDir(), want: map[string][]byte{}, regenerated: map[string][]byte{}}
	m.dir = filepath.Join(m.root, "mod")
	for _, line := range strings.Split(string(ar.Comment), "\n") {
		if rest, ok := strings.CutPrefix(line, "changes:"); ok {
			m.changes = strings.Fields(rest)
			sort.Strings(m.changes)
		}
		if rest, ok := strings.CutPrefix(line, "human:"); ok {
			m.human = strings.Fields(rest)
			sort.Strings(m.human)
		}
	}
	for _, f := range ar.Files {
		if rest, ok := strings.CutPrefix(f.Name, "want/"); ok {
			m.want[rest] = f.Data
			continue
		}
		if rest, ok := strings.CutPrefix(f.Name, "regenerated/"); ok {
			m.regenerated[rest] = f.Data
			continue
		}
		p := filepath.Join(m.root, f.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// goEnv runs the go command offline on the extracted modules.
func goEnv() []string {
	return append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
}

func (m *module) options(a *analysis.Analyzer, tags ...string) rewrite.Options {
	return rewrite.Options{Analyzer: a, Dir: m.dir, Tags: tags, Env: goEnv()}
}

// snapshot returns every file under the archive's root.
func (m *module) snapshot(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(m.root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(m.root, p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// goRun runs the go command in the main module and fails the test on error.
func (m *module) goRun(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = m.dir, goEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// checkUnchanged fails unless the tree is exactly before.
func (m *module) checkUnchanged(t *testing.T, before map[string]string) {
	t.Helper()
	after := m.snapshot(t)
	for p, b := range before {
		if after[p] != b {
			t.Errorf("%s changed although the rewrite was refused", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s appeared although the rewrite was refused", p)
		}
	}
}

// checkWritten compares the tree with before plus the archive's want files.
func (m *module) checkWritten(t *testing.T, before map[string]string, want map[string][]byte) {
	t.Helper()
	after := m.snapshot(t)
	for p, b := range before {
		w, changed := want[p]
		switch {
		case changed && after[p] != string(w):
			t.Errorf("%s after rewrite:\n%s\nwant:\n%s", p, after[p], w)
		case !changed && after[p] != b:
			t.Errorf("%s changed but should be byte-identical:\n%s", p, after[p])
		}
	}
	if len(after) != len(before) {
		t.Errorf("the rewrite left %d files, want %d (temporary files?)", len(after), len(before))
	}
}

func TestRewriteWholeModule(t *testing.T) {
	for _, tc := range []struct {
		name string
		tags []string
		// skipWant lists want files that stay unchanged without the tags.
		skipWant []string
		// notLoaded are the not-loaded findings, "file:line".
		notLoaded []string
	}{
		{name: "with tags", tags: []string{"integration"}, notLoaded: []string{"e2e/e2e.go:9"}},
		{name: "without tags", skipWant: []string{"mod/jobs/tagged.go"}, notLoaded: []string{"e2e/e2e.go:9", "jobs/tagged.go:8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m := extract(t, "rename.txtar")
			want := m.want
			for _, p := range tc.skipWant {
				delete(want, p)
			}
			before := m.snapshot(t)

			res, err := rewrite.Plan(ctx, m.options(renamer(""), tc.tags...))
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Files) != len(want) {
				t.Errorf("plan changes %d files, want %d", len(res.Files), len(want))
			}
			var notLoaded []string
			for _, f := range res.Findings {
				if f.Category == rewrite.CategoryNotLoaded {
					rel, _ := filepath.Rel(m.dir, f.Position.Filename)
					notLoaded = append(notLoaded, fmt.Sprintf("%s:%d", filepath.ToSlash(rel), f.Position.Line))
				}
			}
			if got, want := strings.Join(notLoaded, " "), strings.Join(tc.notLoaded, " "); got != want {
				t.Errorf("not-loaded findings at %q, want %q", got, want)
			}
			var diff bytes.Buffer
			if err := res.Diff(&diff); err != nil {
				t.Fatal(err)
			}
			m.checkUnchanged(t, before) // planning and diffing write nothing

			// The diff, applied by git to a pristine copy, gives the same tree as Write.
			applied := extract(t, "rename.txtar")
			cmd := exec.Command("git", "apply", "-p1", "--directory=mod", "-")
			cmd.Dir, cmd.Stdin = applied.root, bytes.NewReader(diff.Bytes())
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git apply: %v\n%s\ndiff:\n%s", err, out, diff.String())
			}
			applied.checkWritten(t, before, want)

			if err := res.Write(); err != nil {
				t.Fatal(err)
			}
			m.checkWritten(t, before, want)
			m.goRun(t, "build", "./...")
			m.goRun(t, "vet", "./...")
			m.goRun(t, "test", "./...")
			for _, tags := range tc.tags {
				m.goRun(t, "vet", "-tags", tags, "./...")
			}

			again, err := rewrite.Plan(ctx, m.options(renamer(""), tc.tags...))
			if err != nil {
				t.Fatal(err)
			}
			if len(again.Files) != 0 {
				var d bytes.Buffer
				again.Diff(&d)
				t.Errorf("a second run changes %d files:\n%s", len(again.Files), d.String())
			}
		})
	}
}

func TestRewriteRefuses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		analyzer *analysis.Analyzer
		patterns []string
		breakIt  func(t *testing.T, m *module)
		check    func(t *testing.T, err error)
	}{
		{
			name:     "conflicting fixes",
			analyzer: renamer("conflict"),
			check: func(t *testing.T, err error) {
				var ce *rewrite.ConflictError
				if !errors.As(err, &ce) || !strings.HasSuffix(ce.File, "jobs/jobs.go") && !strings.HasSuffix(ce.File, "jobs/tagged.go") {
					t.Fatalf("err = %v, want a ConflictError naming a jobs file", err)
				}
			},
		},
		{
			name:     "fix outside the main module",
			analyzer: renamer("outside"),
			check: func(t *testing.T, err error) {
				var oe *rewrite.OutsideModuleError
				if !errors.As(err, &oe) || !strings.HasSuffix(oe.File, filepath.Join("dep", "dep.go")) {
					t.Fatalf("err = %v, want an OutsideModuleError naming dep/dep.go", err)
				}
			},
		},
		{
			name:     "fixes that break the build",
			analyzer: renamer("decls-only"),
			check: func(t *testing.T, err error) {
				var ve *rewrite.VerifyError
				if !errors.As(err, &ve) || !strings.Contains(err.Error(), "UniqueKey") {
					t.Fatalf("err = %v, want a VerifyError about UniqueKey", err)
				}
			},
		},
		{
			name:     "module that does not compile",
			analyzer: renamer(""),
			breakIt: func(t *testing.T, m *module) {
				p := filepath.Join(m.dir, "use", "use.go")
				b, _ := os.ReadFile(p)
				if err := os.WriteFile(p, append(b, []byte("\nfunc Broken() int { return \"no\" }\n")...), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, err error) {
				var le *rewrite.LoadError
				if !errors.As(err, &le) || !strings.Contains(err.Error(), "use.go") {
					t.Fatalf("err = %v, want a LoadError naming use.go", err)
				}
			},
		},
		{
			name:     "pattern matching nothing",
			analyzer: renamer(""),
			patterns: []string{"./nothing/..."},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, rewrite.ErrNoPackages) || !strings.Contains(err.Error(), "./nothing/...") {
					t.Fatalf("err = %v, want ErrNoPackages naming the pattern", err)
				}
			},
		},
		{
			name:     "pattern matching no package",
			analyzer: renamer(""),
			patterns: []string{"example.com/mod/nothing/..."},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, rewrite.ErrNoPackages) || !strings.Contains(err.Error(), "example.com/mod/nothing/...") {
					t.Fatalf("err = %v, want ErrNoPackages naming the pattern", err)
				}
			},
		},
		{
			name:     "package outside the main module",
			analyzer: renamer(""),
			patterns: []string{"example.com/dep"},
			check: func(t *testing.T, err error) {
				if err == nil || !strings.Contains(err.Error(), "example.com/dep is not in the main module") {
					t.Fatalf("err = %v, want a refusal naming example.com/dep", err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := extract(t, "rename.txtar")
			if tc.breakIt != nil {
				tc.breakIt(t, m)
			}
			before := m.snapshot(t)
			opts := m.options(tc.analyzer, "integration")
			opts.Patterns = tc.patterns
			res, err := rewrite.Plan(context.Background(), opts)
			if err == nil {
				t.Fatalf("Plan succeeded with %d files, want a refusal", len(res.Files))
			}
			t.Log(err)
			tc.check(t, err)
			m.checkUnchanged(t, before)
		})
	}
}

func TestWriteFailsWholly(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sabotage func(t *testing.T, path string)
		wantErr  string
	}{
		{
			// Root ignores permission bits, so the failure is a directory
			// where the last file to write should be.
			name: "directory in a file's place",
			sabotage: func(t *testing.T, path string) {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(path, 0o755); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "is not a regular file",
		},
		{
			name: "file edited since the plan",
			sabotage: func(t *testing.T, path string) {
				if err := os.WriteFile(path, []byte("package use\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "changed on disk since it was loaded",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := extract(t, "rename.txtar")
			res, err := rewrite.Plan(context.Background(), m.options(renamer("")))
			if err != nil {
				t.Fatal(err)
			}
			last := res.Files[len(res.Files)-1].Path
			tc.sabotage(t, last)
			before := m.snapshot(t)
			err = res.Write()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), filepath.Base(last)) {
				t.Fatalf("Write: %v, want an error containing %q and naming %s", err, tc.wantErr, last)
			}
			m.checkUnchanged(t, before)
		})
	}
}

// TestWriteDiskFull makes a write really fail, as root too: the file size
// limit (RLIMIT_FSIZE, the way a full disk fails a write) is set below the
// size of the last file to write, after the first ones' temporary files are
// already written. Every temporary file must be removed and no file
// replaced. The write runs in a child process (this test binary again), so
// the limit cannot hit the test framework's own files.
func TestWriteDiskFull(t *testing.T) {
	if dir := os.Getenv("REWRITE_TEST_DISK_FULL_DIR"); dir != "" {
		writeWithFileSizeLimit(dir)
		return
	}
	m := extract(t, "rename.txtar")
	before := m.snapshot(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriteDiskFull$")
	cmd.Env = append(goEnv(), "REWRITE_TEST_DISK_FULL_DIR="+m.dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, want := range []string{"write error: nothing was written", "use.go", "file too large", "EFBIG: true"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
	m.checkUnchanged(t, before) // no file replaced, no temporary file left
}

// writeWithFileSizeLimit plans the rename module in dir and writes it with
// a file size limit that only the last file exceeds, printing the outcome.
func writeWithFileSizeLimit(dir string) {
	res, err := rewrite.Plan(context.Background(), rewrite.Options{Analyzer: renamer(""), Dir: dir, Env: goEnv()})
	if err != nil || len(res.Files) < 2 {
		fmt.Printf("plan: %v (%d files)\n", err, len(res.Files))
		return
	}
	// The limit admits every file but the last, padded beyond it.
	limit := uint64(0)
	for _, f := range res.Files[:len(res.Files)-1] {
		limit = max(limit, uint64(len(f.New)))
	}
	last := &res.Files[len(res.Files)-1]
	last.New = append(last.New, []byte(strings.Repeat("// padding\n", int(limit)/10+1))...)
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &rl); err != nil {
		fmt.Println(err)
		return
	}
	rl.Cur = limit
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &rl); err != nil {
		fmt.Println(err)
		return
	}
	err = res.Write()
	fmt.Printf("write error: %v\nEFBIG: %v\n", err, errors.Is(err, syscall.EFBIG))
}

func TestWriteKeepsFileMode(t *testing.T) {
	m := extract(t, "rename.txtar")
	p := filepath.Join(m.dir, "use", "use.go")
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := rewrite.Plan(context.Background(), m.options(renamer("")))
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Write(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode after rewrite = %v, want -rw-------", st.Mode().Perm())
	}
}

// TestRewritePartOfTheModule: without patterns, Plan migrates the whole
// module even from one of its subdirectories; patterns that leave out a
// package calling a migrated method are refused (the whole module is
// type-checked), and nothing is written.
func TestRewritePartOfTheModule(t *testing.T) {
	ctx := context.Background()
	m := extract(t, "rename.txtar")
	before := m.snapshot(t)

	opts := m.options(renamer(""), "integration")
	opts.Dir = filepath.Join(m.dir, "jobs")
	res, err := rewrite.Plan(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.ModuleDir != m.dir || len(res.Files) != len(m.want) {
		t.Errorf("Plan from jobs/: module dir %s, %d files; want %s and %d files (the whole module)", res.ModuleDir, len(res.Files), m.dir, len(m.want))
	}
	useGo := filepath.Join(m.dir, "use", "use.go")
	if !slices.ContainsFunc(res.Files, func(f rewrite.FileChange) bool { return f.Path == useGo }) {
		t.Errorf("Plan from jobs/ does not rewrite %s", useGo)
	}

	for _, tc := range []struct {
		dir      string
		patterns []string
	}{
		{dir: "jobs", patterns: []string{"./..."}},
		{dir: "", patterns: []string{"./jobs/..."}},
		{dir: "", patterns: []string{"example.com/mod/jobs"}},
	} {
		opts := m.options(renamer(""), "integration")
		opts.Dir, opts.Patterns = filepath.Join(m.dir, tc.dir), tc.patterns
		res, err := rewrite.Plan(ctx, opts)
		var ve *rewrite.VerifyError
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), "use.go") {
			n := -1
			if res != nil {
				n = len(res.Files)
			}
			t.Errorf("Plan of %v in %q: err = %v (%d files), want a VerifyError naming use.go", tc.patterns, tc.dir, err, n)
		}
	}
	m.checkUnchanged(t, before)
}

// TestRewriteNotNamed: with patterns naming part of the module, a file that
// mentions the legacy API in a package the patterns leave out is reported
// as outside the packages named (not-named), never as excluded by build
// constraints; a file its constraints exclude from a named package is.
func TestRewriteNotNamed(t *testing.T) {
	m := extract(t, "rename.txtar")
	opts := m.options(renamer(""))
	opts.Patterns = []string{"./jobs/...", "./plain/..."}
	opts.AllowTypeErrors = true // use.go, left out, calls the renamed method
	res, err := rewrite.Plan(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range res.Findings {
		if f.Category == rewrite.CategoryNotLoaded || f.Category == rewrite.CategoryNotNamed {
			rel, _ := filepath.Rel(m.dir, f.Position.Filename)
			got[filepath.ToSlash(rel)] = f.Category
		}
	}
	want := map[string]string{
		"jobs/tagged.go": rewrite.CategoryNotLoaded, // a named package, its file behind a tag
		"use/use.go":     rewrite.CategoryNotNamed,
		"e2e/e2e.go":     rewrite.CategoryNotNamed, // the whole package behind a tag: either reason
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("findings of files no load included: %v, want %v", got, want)
	}
}
