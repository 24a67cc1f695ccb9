package analyzer

import (
	"errors"
	"flag"
	"fmt"
	"go/token"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// Name is the analyzer's name: the prefix of its flags under go vet
// (-migrateunique.interface) and the name golangci-lint shows.
const Name = "migrateunique"

// Analyzer reports legacy unique-key job code and suggests the fixes that
// move it to ConcurrencyKey and ConcurrencyLimit. Its flags -interface and
// -rename configure it; New builds one from a Config instead.
var Analyzer = newAnalyzer(flagSettings)

// flagSettings holds the values of Analyzer's flags.
var flagSettings = &settings{}

func init() {
	s := flagSettings
	Analyzer.Flags.Var(&interfaceFlag{s}, "interface", "legacy job interface as importpath.Name (repeatable or comma-separated); replaces the default detection")
	Analyzer.Flags.Var(&renameFlag{s}, "rename", "rename importpath.Old=New for option functions and sentinel errors (repeatable or comma-separated)")
	Analyzer.Flags.Var(&tableFlag{s}, "table", "a table of the queue's layout (repeatable or comma-separated; default plain-jobs' tables): SQL naming it and unique_key is reported in any package")
	Analyzer.Flags.BoolVar(&s.allSQL, "all-sql", false, "report SQL naming unique_key in every package, whatever its table (default: only the queue's tables, or SQL in packages with legacy jobs)")
}

// Config configures an analyzer built by New. The zero Config gives the
// default detection and no renames.
type Config struct {
	// Interfaces names the legacy job interfaces exactly, each as
	// "importpath.Name". When empty, a job interface is any interface whose
	// method set has UniqueKey() string and a run method (Run, Perform,
	// Execute, Handle, Process, Work or Do).
	Interfaces []string
	// Renames maps a package-level function, variable or constant
	// ("importpath.Old") to its new name ("New" or "importpath.New", same
	// package). Every use is renamed, and the declaration too when it is in
	// the analysed module.
	Renames map[string]string
	// Tables are the layout's tables, whose SQL the sql finding reports in
	// any package when it names unique_key (a name, optionally
	// schema-qualified). Empty means plain-jobs' (DefaultTables).
	Tables []string
	// AllSQL reports SQL text naming unique_key in every package, whatever
	// table it names, instead of only the queue's (see docs/code-migration.md).
	AllSQL bool
}

// New returns an analyzer configured by cfg, for drivers that run it from Go
// (the rewrite command, tests). It has no flags.
func New(cfg Config) (*analysis.Analyzer, error) {
	s, err := cfg.settings()
	if err != nil {
		return nil, err
	}
	return newAnalyzer(s), nil
}

// settings validates the configuration.
func (cfg Config) settings() (*settings, error) {
	s := &settings{}
	for _, name := range cfg.Interfaces {
		if err := s.addInterface(name); err != nil {
			return nil, err
		}
	}
	olds := make([]string, 0, len(cfg.Renames))
	for old := range cfg.Renames {
		olds = append(olds, old)
	}
	sort.Strings(olds)
	for _, old := range olds {
		if err := s.addRename(old, cfg.Renames[old]); err != nil {
			return nil, err
		}
	}
	for _, t := range cfg.Tables {
		if err := s.addTable(t); err != nil {
			return nil, err
		}
	}
	s.allSQL = cfg.AllSQL
	return s, nil
}

func newAnalyzer(s *settings) *analysis.Analyzer {
	a := &analysis.Analyzer{
		Name:      Name,
		Doc:       doc,
		URL:       "https://github.com/migrate-unique/migrate-unique/blob/main/docs/code-migration.md",
		Run:       s.run,
		FactTypes: []analysis.Fact{new(JobInterfaceFact), new(MigratedFact), new(OwnPackageFact)},
	}
	return a
}

// Code classifies a finding. Every diagnostic's Category is one of these, so
// drivers (lint, rewrite) can count findings without parsing messages.
type Code string

// The finding codes. The first five carry a suggested fix; the others are
// reports to be resolved by hand.
const (
	// CodeJobType: a job type's UniqueKey method; the fix renames it to
	// ConcurrencyKey and adds ConcurrencyLimit (or, when the method is
	// promoted from a type this package cannot edit, adds both methods
	// delegating to it).
	CodeJobType Code = "job-type"
	// CodeInterface: an interface declaring the legacy method; the fix
	// declares ConcurrencyKey and ConcurrencyLimit instead.
	CodeInterface Code = "interface"
	// CodeCallSite: a call, method value or method expression of a migrated
	// UniqueKey; the fix renames the selector.
	CodeCallSite Code = "call-site"
	// CodeRename: a configured rename (-rename) of an option function or
	// sentinel error.
	CodeRename Code = "rename"
	// CodeSpanError: the span error string "DuplicateJob"; the fix writes
	// "ConcurrencyLimitReached".
	CodeSpanError Code = "span-error"

	// CodeSQL: SQL text naming the unique_key column of the queue's tables
	// (see Config.Tables and Config.AllSQL for the scope; never struct
	// tags); the database migration renames the column.
	CodeSQL Code = "sql"
	// CodeUniqueViolation: code that handles a unique violation (SQLSTATE
	// 23505, pgerrcode.UniqueViolation, "duplicate key") around an enqueue;
	// a blocked enqueue is no longer an error.
	CodeUniqueViolation Code = "unique-violation"
	// CodeGenerated: a finding in a generated file; regenerate the file
	// instead of editing it.
	CodeGenerated Code = "generated"
	// CodeClash: a job type or interface that already has ConcurrencyKey or
	// ConcurrencyLimit; resolve by hand.
	CodeClash Code = "clash"
	// CodeExternal: a job whose legacy method is required by an interface
	// declared outside the analysed module (or in another package), which
	// this tool never edits.
	CodeExternal Code = "external"
	// CodeDirective: a //migrate-unique:ignore directive without a reason.
	CodeDirective Code = "directive"
)

// Codes lists every finding code, fixable ones first.
var Codes = []Code{CodeJobType, CodeInterface, CodeCallSite, CodeRename, CodeSpanError,
	CodeSQL, CodeUniqueViolation, CodeGenerated, CodeClash, CodeExternal, CodeDirective}

// Fixable reports whether findings with this code carry a suggested fix.
func (c Code) Fixable() bool {
	switch c {
	case CodeJobType, CodeInterface, CodeCallSite, CodeRename, CodeSpanError:
		return true
	}
	return false
}

// Describe says in one line what a code means, for help texts and docs.
func (c Code) Describe() string {
	switch c {
	case CodeJobType:
		return "job type's UniqueKey: renamed to ConcurrencyKey, ConcurrencyLimit added"
	case CodeInterface:
		return "interface declaring UniqueKey: now declares ConcurrencyKey and ConcurrencyLimit"
	case CodeCallSite:
		return "call, method value or method expression of a migrated UniqueKey: renamed"
	case CodeRename:
		return "configured rename of an option function or sentinel error"
	case CodeSpanError:
		return `span error string "DuplicateJob": now "ConcurrencyLimitReached"`
	case CodeSQL:
		return "string naming the unique_key column: update by hand (no fix)"
	case CodeUniqueViolation:
		return "unique-violation (23505) handling around an enqueue: check the limit result instead (no fix)"
	case CodeGenerated:
		return "finding in a generated file: regenerate it (no fix)"
	case CodeClash:
		return "type already has ConcurrencyKey or ConcurrencyLimit: resolve by hand (no fix)"
	case CodeExternal:
		return "legacy method required by an interface this tool cannot edit: migrate by hand (no fix)"
	case CodeDirective:
		return "//migrate-unique:ignore without a reason (no fix)"
	}
	return "unknown code"
}

// JobInterfaceFact marks a legacy job interface (a *types.TypeName), so that
// importing packages recognise the types that implement it as jobs.
type JobInterfaceFact struct {
	// Migrated reports whether the analyzer rewrites the interface (it is
	// declared in the analysed module).
	Migrated bool
}

// AFact marks JobInterfaceFact as an analysis fact.
func (*JobInterfaceFact) AFact() {}

// String describes the fact, as analysistest fact expectations match it.
func (f *JobInterfaceFact) String() string {
	if f.Migrated {
		return "legacy job interface (migrated)"
	}
	return "legacy job interface"
}

// MigratedFact marks a UniqueKey method (concrete or interface, a
// *types.Func) that the analyzer renames to ConcurrencyKey, so that call
// sites in importing packages are renamed with it.
type MigratedFact struct{}

// AFact marks MigratedFact as an analysis fact.
func (*MigratedFact) AFact() {}

// String describes the fact, as analysistest fact expectations match it.
func (*MigratedFact) String() string { return "migrates to ConcurrencyKey" }

// settings is an analyzer's parsed configuration.
type settings struct {
	interfaces map[string]bool   // "importpath.Name"
	renames    map[string]string // "importpath.Old" -> "New"
	renamed    map[string]bool   // the Old names, unqualified
	tables     []string          // the layout's tables (-table); none: DefaultTables
	tableRE    *regexp.Regexp    // matches a name of tables, once there are some
	allSQL     bool              // -all-sql: SQL naming unique_key in any package
	prog       *Program          // the run's job model (ForProgram), or nil
}

// splitQualified splits "importpath.Name" at its last dot. An import path
// with a character no import path has (the Go spec's list: a space, a comma,
// quotes, ...) is refused, so "a.Job,b.Job" given to a driver that does not
// split lists is an error, not an interface that never matches.
func splitQualified(s string) (pkg, name string, ok bool) {
	i := strings.LastIndexByte(s, '.')
	if i <= 0 || i == len(s)-1 || strings.HasSuffix(s[:i], "/") || strings.ContainsAny(s[:i], badImportPathChars) {
		return "", "", false
	}
	pkg, name = s[:i], s[i+1:]
	if !token.IsIdentifier(name) {
		return "", "", false
	}
	return pkg, name, true
}

func (s *settings) addInterface(name string) error {
	if _, _, ok := splitQualified(name); !ok {
		return fmt.Errorf("interface %q: want importpath.Name, e.g. example.com/app/jobs.Job", name)
	}
	if s.interfaces == nil {
		s.interfaces = map[string]bool{}
	}
	s.interfaces[name] = true
	return nil
}

func (s *settings) addRename(old, new string) error {
	pkg, _, ok := splitQualified(old)
	if !ok {
		return fmt.Errorf("rename %q: want importpath.Old=New, e.g. example.com/app/jobs.WithUniqueKey=WithConcurrencyKey", old+"="+new)
	}
	if npkg, nname, ok := splitQualified(new); ok {
		if npkg != pkg {
			return fmt.Errorf("rename %s=%s: the new name must be in the same package %s", old, new, pkg)
		}
		new = nname
	}
	if !token.IsIdentifier(new) {
		return fmt.Errorf("rename %s=%s: %q is not a Go identifier", old, new, new)
	}
	if s.renames == nil {
		s.renames, s.renamed = map[string]string{}, map[string]bool{}
	}
	s.renames[old] = new
	_, oldName, _ := splitQualified(old)
	s.renamed[oldName] = true
	return nil
}

// badImportPathChars are the characters the Go spec lets implementations
// exclude from import paths, and the go command does, plus white space.
const badImportPathChars = "!\"#$%&'()*,:;<=>?[\\]^`{|} \t\n"

// interfaceFlag is the repeatable -interface flag.
type interfaceFlag struct{ s *settings }

func (f *interfaceFlag) String() string {
	if f == nil || f.s == nil {
		return ""
	}
	names := make([]string, 0, len(f.s.interfaces))
	for n := range f.s.interfaces {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

func (f *interfaceFlag) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			if err := f.s.addInterface(name); err != nil {
				return err
			}
		}
	}
	return nil
}

// renameFlag is the repeatable -rename flag.
type renameFlag struct{ s *settings }

func (f *renameFlag) String() string {
	if f == nil || f.s == nil {
		return ""
	}
	pairs := make([]string, 0, len(f.s.renames))
	for old, new := range f.s.renames {
		pairs = append(pairs, old+"="+new)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

func (f *renameFlag) Set(v string) error {
	for _, pair := range strings.Split(v, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		old, new, ok := strings.Cut(pair, "=")
		if !ok {
			return errors.New("rename " + pair + ": want importpath.Old=New")
		}
		if err := f.s.addRename(strings.TrimSpace(old), strings.TrimSpace(new)); err != nil {
			return err
		}
	}
	return nil
}

// tableFlag is the repeatable -table flag.
type tableFlag struct{ s *settings }

func (f *tableFlag) String() string {
	if f == nil || f.s == nil {
		return ""
	}
	return strings.Join(f.s.tables, ",")
}

func (f *tableFlag) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			if err := f.s.addTable(name); err != nil {
				return err
			}
		}
	}
	return nil
}

var _ flag.Value = (*tableFlag)(nil)
var _ flag.Value = (*interfaceFlag)(nil)
var _ flag.Value = (*renameFlag)(nil)
