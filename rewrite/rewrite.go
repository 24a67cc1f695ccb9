package rewrite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/format"
	"go/token"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/packages"

	"github.com/migrate-unique/migrate-unique/analyzer/load"
)

// Options configures [Plan].
type Options struct {
	// Analyzer finds the code to migrate; each of its diagnostics carries at
	// most one suggested fix. Required unless Program is set.
	Analyzer *analysis.Analyzer
	// Program, when set, returns the analyzer for one load from every
	// package of it (the patterns' packages; their dependencies are
	// reachable through Imports), and Analyzer is not used: for an analyzer
	// whose decisions depend on the whole run, such as which types are
	// jobs (analyzer.Config.ForProgram). It is called once per tag set.
	Program func(pkgs []*packages.Package) (*analysis.Analyzer, error)
	// Dir is the directory the patterns are resolved in, inside the main
	// module or a go.work workspace; "" means the current directory.
	Dir string
	// Patterns are go package patterns, or paths of .go files (each names
	// the package that holds it), as [Resolve] reads them; none means the
	// whole main module (the module that holds Dir), wherever in it Dir
	// is, or in a go.work workspace every package of its modules. Packages
	// that the patterns leave out are not migrated, but the rewritten
	// module is type-checked whole, so a call site among them that the
	// rewrite would break is a refusal ([*VerifyError]).
	Patterns []string
	// Tags lists build-tag sets, each comma-separated as for `go build
	// -tags`. The module is loaded once without tags and once per set, so
	// files behind build constraints are migrated too.
	Tags []string
	// Env is the environment of the go command; nil means the process's.
	Env []string
	// AllowTypeErrors lets Plan succeed when the rewritten module does not
	// type-check, listing the errors in Result.TypeErrors instead of
	// refusing: for modules whose generated files (mocks) must be
	// regenerated from the rewritten interfaces before they build again.
	AllowTypeErrors bool
	// FullLoad loads and analyses every package of a load at once, with
	// go/packages and the analysis checker ([load.Config.Full]), instead of
	// one package at a time: the reference the tests hold the default to.
	// It gives the same result for more memory.
	FullLoad bool
	// Logger receives each phase's duration at debug level; nil discards.
	Logger *slog.Logger
}

// CategoryNotLoaded is the category of a finding rewrite adds itself: a
// file of the main module that no load included (its build constraints
// exclude it under every tag set) and that mentions UniqueKey or
// unique_key, so it may need migrating.
const CategoryNotLoaded = "not-loaded"

// CategoryNotNamed is the category of a finding rewrite adds itself when
// package patterns are given: a file of the main module, in a package no
// load included (the patterns leave it out, or its build constraints
// exclude the whole package), that mentions UniqueKey or unique_key.
const CategoryNotNamed = "not-named"

// Finding is one diagnostic of the analyzer, reported once however many
// packages, test variants and tag sets saw it.
type Finding struct {
	// Position is where the finding is; Filename is absolute.
	Position token.Position
	// Category is the analyzer's category for the finding.
	Category string
	// Message is the analyzer's message.
	Message string
	// Fixed reports whether the finding's fix is part of the result; a
	// finding without one is left for a human.
	Fixed bool
}

// String returns "file:line:col: message".
func (f Finding) String() string { return fmt.Sprintf("%s: %s", f.Position, f.Message) }

// FileChange is one file the fixes rewrite.
type FileChange struct {
	// Path is the file's absolute path.
	Path string
	// Old is the file as loaded; New is the rewritten, gofmt'ed file.
	Old, New []byte
	// Mode is the file's permission bits, kept when it is written.
	Mode fs.FileMode
}

// Result is what a rewrite would do. Nothing has been written yet.
type Result struct {
	// Module is the main module's path; ModuleDir its root directory.
	Module, ModuleDir string
	// Files are the changed files, sorted by path.
	Files []FileChange
	// Findings are every finding, sorted by position.
	Findings []Finding
	// TypeErrors are the type errors of the rewritten module, only ever
	// set with Options.AllowTypeErrors.
	TypeErrors []string
}

// Plan loads the module, runs the analyzer over it, merges and formats the
// fixes and type-checks the rewritten module in memory. It changes nothing
// on disk. Its errors are [ErrNoPackages], [*LoadError], [*ConflictError],
// [*OutsideModuleError], [*FileChangedError] or [*VerifyError] (wrapped), or
// a go command failure.
func Plan(ctx context.Context, opts Options) (*Result, error) {
	if opts.Analyzer == nil && opts.Program == nil {
		return nil, errors.New("rewrite: Options.Analyzer and Options.Program are nil")
	}
	// The whole module (or workspace) by default, even from one of its
	// subdirectories: a rename is only safe when every call site changes
	// with it.
	target, err := Resolve(ctx, opts.Dir, opts.Env, opts.Patterns)
	if err != nil {
		return nil, err
	}
	patterns := target.Patterns
	if len(opts.Patterns) == 0 {
		opts.Dir = target.Root
	}
	tagSets := append([]string{""}, opts.Tags...)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}

	p := &planner{files: map[string]*fileEdits{}, findings: map[findingKey]*Finding{},
		loaded: map[string]bool{}, moduleDir: target.Root, moduleDirs: map[string]bool{}}
	for _, tags := range tagSets {
		if err := p.analyze(ctx, opts, patterns, tags); err != nil {
			return nil, err
		}
	}
	if err := p.reportNotLoaded(opts.Tags, len(opts.Patterns) > 0); err != nil {
		return nil, err
	}
	res := &Result{Module: p.module, ModuleDir: p.moduleDir}
	for _, f := range p.findings {
		res.Findings = append(res.Findings, *f)
	}
	sort.Slice(res.Findings, func(i, j int) bool { return positionLess(res.Findings[i].Position, res.Findings[j].Position) })

	paths := make([]string, 0, len(p.files))
	for path := range p.files {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	for _, path := range paths {
		fc, err := p.files[path].apply(path, p.moduleDir)
		if err != nil {
			return nil, err
		}
		if fc != nil {
			res.Files = append(res.Files, *fc)
		}
	}
	if len(res.Files) > 0 {
		changed := make(map[string][]byte, len(res.Files))
		for _, f := range res.Files {
			changed[f.Path] = f.New
		}
		// The quick check covers the loaded packages; when the patterns
		// may leave some of the module out, a full load of the whole
		// module checks the packages they leave out too.
		whole := len(opts.Patterns) == 0 || slices.Equal(patterns, target.Whole) && sameDir(opts.Dir, p.moduleDir)
		verifyOpts, verifyPatterns := opts, patterns
		if !whole {
			verifyOpts.Dir, verifyPatterns = p.moduleDir, target.Whole
		}
		for i, tags := range tagSets {
			start := time.Now()
			problems, ok := p.loads[i].Check(changed)
			opts.Logger.DebugContext(ctx, "rewrite: rechecked the module", "tags", tags, "usable", ok, "problems", len(problems), "duration", time.Since(start))
			if whole && ok && len(problems) == 0 {
				continue
			}
			// A full load decides: it confirms the problems (or finds
			// none), so the quick check can never refuse a good rewrite.
			err := verify(ctx, verifyOpts, verifyPatterns, tags, res.Files)
			var ve *VerifyError
			if opts.AllowTypeErrors && errors.As(err, &ve) {
				res.TypeErrors = append(res.TypeErrors, ve.Problems...)
				continue
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// planner accumulates findings and edits across the loads of one Plan.
type planner struct {
	// module names the run's module(s); moduleDir is the run's root (the
	// main module's directory, or the workspace's).
	module, moduleDir string
	// moduleDirs are the directories of the run's modules.
	moduleDirs map[string]bool
	files      map[string]*fileEdits
	findings   map[findingKey]*Finding
	// loaded are the main module's files some load included.
	loaded map[string]bool
	// loads are the loads, one per tag set, in tagSets order.
	loads []*load.Program
}

type findingKey struct {
	file     string
	offset   int
	category string
	message  string
}

// analyze runs one load (one tag set) and records its findings and edits.
func (p *planner) analyze(ctx context.Context, opts Options, patterns []string, tags string) error {
	start := time.Now()
	prog, err := load.Load(ctx, load.Config{Dir: opts.Dir, Env: opts.Env, Tags: tags, Tests: true, Root: p.moduleDir, Full: opts.FullLoad}, patterns)
	if err != nil {
		return err
	}
	opts.Logger.DebugContext(ctx, "rewrite: listed", "tags", tags, "duration", time.Since(start))
	if err := p.mainModule(prog.Named(), patterns); err != nil {
		return err
	}
	p.loads = append(p.loads, prog)
	// Files of the main module: the only files a fix may edit. GoFiles, not
	// CompiledGoFiles, and only under the module's directory: cgo's
	// generated files and the test main live in the build cache.
	own := map[string]bool{}
	prog.Visit(func(pkg *packages.Package) {
		if pkg.Module != nil && pkg.Module.Main {
			for _, f := range pkg.GoFiles {
				if relPath(pkg.Module.Dir, f) == f {
					continue // not under the module's directory
				}
				own[f] = true
				p.loaded[f] = true
			}
		}
	})

	start = time.Now()
	program := opts.Program
	if program == nil {
		program = func([]*packages.Package) (*analysis.Analyzer, error) { return opts.Analyzer, nil }
	}
	results, err := prog.Analyze(program)
	if err != nil {
		return err
	}
	opts.Logger.DebugContext(ctx, "rewrite: analyzed", "tags", tags, "duration", time.Since(start))
	for _, r := range results {
		for _, d := range r.Diagnostics {
			if err := p.record(r.Package.Fset, d, own); err != nil {
				return err
			}
		}
	}
	return nil
}

// reportNotLoaded adds a finding for each Go file of the main module that
// no load included (its build constraints exclude it under every tag set,
// possibly with its whole package, or the patterns left it out) and that
// mentions the legacy API: no fix can reach it. It walks the module's
// directory as the go command would: no testdata, vendor, "." or "_"
// directories, no nested modules.
func (p *planner) reportNotLoaded(tags []string, patterns bool) error {
	if p.moduleDir == "" {
		return nil
	}
	loads := "without tags"
	if len(tags) > 0 {
		loads += " and with -tags " + strings.Join(tags, ", -tags ")
	}
	msg := "no load included this file (" + loads + "; its build constraints exclude it) and it mentions the legacy API: add a -tags list that includes it, or migrate it by hand"
	notNamedMsg := "no load included this file (" + loads + "; the package patterns leave its package out, or its build constraints exclude the whole package) and it mentions the legacy API: name its package too, add a -tags list that includes it, or migrate it by hand"
	// A file beside files some load included is in a package the patterns
	// named: its own build constraints left it out. A file of a directory
	// no load included is in a package the patterns left out (or one its
	// constraints exclude whole).
	loadedDirs := map[string]bool{}
	for f := range p.loaded {
		loadedDirs[filepath.Dir(f)] = true
	}
	return filepath.WalkDir(p.moduleDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != p.moduleDir {
				if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && !p.moduleDirs[path] {
					return filepath.SkipDir // a nested module not in the run
				}
			}
			return nil
		}
		if filepath.Ext(path) != ".go" || p.loaded[path] || !d.Type().IsRegular() {
			return nil
		}
		content, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		i := bytes.Index(content, []byte("UniqueKey"))
		if i < 0 {
			i = bytes.Index(content, []byte("unique_key"))
		}
		if i < 0 {
			return nil
		}
		pos := token.Position{Filename: path, Offset: i, Line: bytes.Count(content[:i], []byte("\n")) + 1}
		pos.Column = i - (bytes.LastIndexByte(content[:i], '\n') + 1) + 1
		category, why := CategoryNotLoaded, msg
		if patterns && !loadedDirs[filepath.Dir(path)] {
			category, why = CategoryNotNamed, notNamedMsg
		}
		p.findings[findingKey{file: path, category: category}] = &Finding{Position: pos, Category: category, Message: why}
		return nil
	})
}

// Target is what a run works on: the root of its module or workspace and
// the package queries to load.
type Target struct {
	// Root is the directory of the main module (its go.mod), or of the
	// go.work file in workspace mode.
	Root string
	// Workspace reports whether the go command is in workspace mode.
	Workspace bool
	// Patterns are the queries for go/packages: the package patterns as
	// given, each .go file as "file=" + its absolute path, or Whole when
	// none were given.
	Patterns []string
	// Whole are the patterns of every package of the run, from Root:
	// "./..." for a module; in a workspace, each module's directory
	// followed by "/..." (the go command's "./..." does not cross into the
	// modules of a workspace from its directory).
	Whole []string
}

// Resolve finds the module or go.work workspace that holds dir ("" is the
// current directory) and turns a command line's arguments into package
// queries, as go vet reads them: package patterns stay as they are, and the
// path of a .go file names the package that holds it. Outside any module
// and workspace it returns a [*NoModuleError].
func Resolve(ctx context.Context, dir string, env []string, args []string) (Target, error) {
	cmd := exec.CommandContext(ctx, "go", "env", "GOMOD", "GOWORK")
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Target{}, fmt.Errorf("find the main module (go env GOMOD GOWORK): %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(string(out))+"\n", "\n")
	gomod, gowork := strings.TrimSpace(lines[0]), strings.TrimSpace(lines[1])
	var t Target
	switch {
	case gowork != "" && gowork != "off":
		t.Root, t.Workspace = filepath.Dir(gowork), true
	case gomod != "" && gomod != os.DevNull:
		t.Root = filepath.Dir(gomod)
	default:
		abs, err := filepath.Abs(dir)
		if err != nil {
			abs = dir
		}
		return Target{}, &NoModuleError{Dir: abs}
	}
	for _, a := range args {
		if strings.HasSuffix(a, ".go") {
			path := a
			if !filepath.IsAbs(path) {
				path = filepath.Join(dir, path)
			}
			abs, err := filepath.Abs(path)
			if err != nil {
				return Target{}, err
			}
			if st, err := os.Stat(abs); err != nil || !st.Mode().IsRegular() {
				return Target{}, fmt.Errorf("%s: not a Go file (give package patterns such as ./... or paths of .go files)", a)
			}
			t.Patterns = append(t.Patterns, "file="+abs)
			continue
		}
		t.Patterns = append(t.Patterns, a)
	}
	t.Whole = []string{"./..."}
	if t.Workspace {
		if t.Whole, err = workspacePatterns(ctx, t.Root, env); err != nil {
			return Target{}, err
		}
	}
	if len(t.Patterns) == 0 {
		t.Patterns = t.Whole
	}
	return t, nil
}

// workspacePatterns lists a pattern for every package of the modules of the
// workspace rooted at root.
func workspacePatterns(ctx context.Context, root string, env []string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}")
	cmd.Dir, cmd.Env = root, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("list the workspace's modules (go list -m): %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var patterns []string
	for _, dir := range strings.Fields(string(out)) {
		if rel := relPath(root, dir); rel != dir {
			patterns = append(patterns, "./"+rel+"/...")
			if rel == "." {
				patterns[len(patterns)-1] = "./..."
			}
			continue
		}
		patterns = append(patterns, filepath.ToSlash(dir)+"/...")
	}
	if len(patterns) == 0 {
		return nil, fmt.Errorf("the workspace %s uses no module", root)
	}
	return patterns, nil
}

// sameDir reports whether dir ("" is the current directory) is root.
func sameDir(dir, root string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	if a, err := filepath.EvalSymlinks(abs); err == nil {
		abs = a
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	return abs == root
}

// mainModule checks that the packages named all belong to the main module
// (or the workspace's modules), and records the modules.
func (p *planner) mainModule(named []*packages.Package, patterns []string) error {
	for _, pkg := range named {
		if pkg.Module == nil || !pkg.Module.Main {
			return fmt.Errorf("package %s is not in the main module (nor a module of the go.work workspace); rewrite migrates the main module, or the modules of a workspace together: run it from that module's directory, or add the module to go.work", pkg.PkgPath)
		}
		if !p.moduleDirs[pkg.Module.Dir] {
			p.moduleDirs[pkg.Module.Dir] = true
			mods := strings.Split(p.module, ", ")
			if p.module == "" {
				mods = nil
			}
			mods = append(mods, pkg.Module.Path)
			sort.Strings(mods)
			p.module = strings.Join(mods, ", ")
		}
	}
	if len(named) == 0 {
		return fmt.Errorf("%w: %s", ErrNoPackages, strings.Join(patterns, " "))
	}
	return nil
}

// record adds one diagnostic: its finding, and its fix's edits when it has
// exactly one fix.
func (p *planner) record(fset *token.FileSet, d analysis.Diagnostic, own map[string]bool) error {
	pos := fset.Position(d.Pos)
	key := findingKey{pos.Filename, pos.Offset, d.Category, d.Message}
	f := p.findings[key]
	if f == nil {
		f = &Finding{Position: pos, Category: d.Category, Message: d.Message}
		p.findings[key] = f
	}
	if len(d.SuggestedFixes) != 1 {
		return nil // none, or alternatives only a human can choose between
	}
	f.Fixed = true
	// The same finding seen from another package variant or tag set records
	// its edits again: identical ones merge, and a fix that differs between
	// tag sets is a conflict rather than a silent choice.
	for _, te := range d.SuggestedFixes[0].TextEdits {
		end := te.End
		if !end.IsValid() {
			end = te.Pos
		}
		tf := fset.File(te.Pos)
		if tf == nil || fset.File(end) != tf || end < te.Pos {
			return fmt.Errorf("analyzer bug: the fix for %s has an edit with an invalid position", describe(p.moduleDir, f))
		}
		name := tf.Name()
		if !own[name] {
			return &OutsideModuleError{File: name, Finding: describe(p.moduleDir, f), Module: p.module}
		}
		fe := p.files[name]
		if fe == nil {
			fe = &fileEdits{size: tf.Size()}
			p.files[name] = fe
		}
		if fe.size != tf.Size() {
			return &FileChangedError{File: name}
		}
		fe.edits = append(fe.edits, edit{
			start: tf.Offset(te.Pos), end: tf.Offset(end), text: string(te.NewText), owner: describe(p.moduleDir, f),
		})
	}
	return nil
}

// fileEdits are the edits of every fix to one file.
type fileEdits struct {
	size  int // the file's size when it was parsed
	edits []edit
}

// edit replaces bytes [start, end) with text.
type edit struct {
	start, end int
	text       string
	owner      string // the finding whose fix it is
}

// apply merges the edits, refusing conflicts, and returns the formatted
// file, or nil when the edits change nothing.
func (fe *fileEdits) apply(path, moduleDir string) (*FileChange, error) {
	old, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(old) != fe.size {
		return nil, &FileChangedError{File: path}
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	merged, err := mergeEdits(relPath(moduleDir, path), old, fe.edits)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	last := 0
	for _, e := range merged {
		b.Write(old[last:e.start])
		b.WriteString(e.text)
		last = e.end
	}
	b.Write(old[last:])
	formatted, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("the fixes leave %s unparsable (%v); nothing was changed: this is a bug in the analyzer's fixes, please report it", path, err)
	}
	if bytes.Equal(formatted, old) {
		return nil, nil
	}
	return &FileChange{Path: path, Old: old, New: formatted, Mode: st.Mode().Perm()}, nil
}

// mergeEdits sorts the edits, keeps identical ones once and refuses
// overlapping different ones.
func mergeEdits(file string, content []byte, edits []edit) ([]edit, error) {
	sort.SliceStable(edits, func(i, j int) bool {
		if edits[i].start != edits[j].start {
			return edits[i].start < edits[j].start
		}
		return edits[i].end < edits[j].end
	})
	var out []edit
	for _, e := range edits {
		if n := len(out); n > 0 {
			prev := out[n-1]
			if prev.start == e.start && prev.end == e.end && prev.text == e.text {
				continue
			}
			switch {
			case e.start < prev.end:
				return nil, &ConflictError{File: file, First: prev.owner, Second: e.owner,
					Why: fmt.Sprintf("%s and %s overlap with different replacements", span(content, prev), span(content, e))}
			case e.start == prev.start && e.end == prev.end:
				return nil, &ConflictError{File: file, First: prev.owner, Second: e.owner,
					Why: fmt.Sprintf("both insert different text at %s, in no defined order", lineCol(content, e.start))}
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// verify type-checks the rewritten module in memory (an overlay), every
// package from source, so a fix that would break the build is refused
// before anything is written.
func verify(ctx context.Context, opts Options, patterns []string, tags string, files []FileChange) error {
	overlay := make(map[string][]byte, len(files))
	for _, f := range files {
		overlay[f.Path] = f.New
	}
	start := time.Now()
	problems, err := load.Verify(ctx, load.Config{Dir: opts.Dir, Env: opts.Env, Tags: tags, Tests: true}, patterns, overlay)
	if err != nil {
		return fmt.Errorf("type-check the rewritten module: %w", err)
	}
	opts.Logger.DebugContext(ctx, "rewrite: verified", "tags", tags, "duration", time.Since(start))
	if len(problems) > 0 {
		return &VerifyError{Tags: tags, Problems: problems}
	}
	return nil
}

func positionLess(a, b token.Position) bool {
	if a.Filename != b.Filename {
		return a.Filename < b.Filename
	}
	return a.Offset < b.Offset
}

// relPath returns path relative to dir when it is inside it, else path.
func relPath(dir, path string) string {
	if dir == "" {
		return path
	}
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return path
	}
	return filepath.ToSlash(rel)
}

// describe names a finding for an error message: "file:line:col (message)"
// with the file relative to the module root.
func describe(moduleDir string, f *Finding) string {
	return fmt.Sprintf("%s:%d:%d (%s)", relPath(moduleDir, f.Position.Filename), f.Position.Line, f.Position.Column, f.Message)
}

// span formats an edit's range as "line:col-line:col".
func span(content []byte, e edit) string {
	return lineCol(content, e.start) + "-" + lineCol(content, e.end)
}

// lineCol formats a byte offset of content as "line:col" (both from 1,
// columns in bytes, as go/token counts them).
func lineCol(content []byte, offset int) string {
	offset = min(offset, len(content))
	before := content[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := offset - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return fmt.Sprintf("%d:%d", line, col)
}
