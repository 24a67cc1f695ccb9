package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/migrate-unique/migrate-unique/analyzer"
	"github.com/migrate-unique/migrate-unique/rewrite"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, " ") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

const rewriteUsage = `rewrite [-diff | -w] [-interface importpath.Name]... [-rename importpath.Old=New]... [-tags list]... [-table name]... [-all-sql] [-allow-type-errors] [packages]

Migrates the job code of the module in the current directory in one step:
UniqueKey becomes ConcurrencyKey plus ConcurrencyLimit on every job type,
interface, call site and method value, in every package and test (default
packages: the whole module, from any directory of it, or every module of the
go.work workspace from its directory; packages are patterns, or paths of
.go files naming their packages). Which types are jobs is decided over
everything the run loads. Nothing is written unless every fix applies and
the whole rewritten module type-checks.

-diff (the default) prints a unified diff on stdout (apply it with git apply)
and the summary on stderr; it exits 1 when there is a diff, 0 when there is
none. -w writes the files (each replaced atomically, its mode kept) and
prints the summary on stdout. A refusal or error exits 2 and changes nothing.`

// wholeModuleGC lowers the garbage collector's target for the commands
// that hold a whole module's syntax and types at once (rewrite, lint):
// with Go's default (GOGC=100) the heap grows to twice what is live before
// a collection, and the peak memory with it; 50 keeps it near what is live
// for a little more CPU (docs/performance.md). GOGC, when set, wins.
func wholeModuleGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
}

func runRewrite(ctx context.Context, e *env, args []string) error {
	wholeModuleGC()
	fs := newFlagSet(e, "rewrite", rewriteUsage)
	diff := fs.Bool("diff", false, "print a unified diff and change nothing (the default); exit 1 when there is a diff")
	write := fs.Bool("w", false, "write the rewritten files")
	cfg := analyzerFlags(fs)
	var tags listFlag
	fs.Var(&tags, "tags", "comma-separated build tags: one more `list` to load the module with (repeatable, one load each, besides the load without tags)")
	allowTypeErrors := fs.Bool("allow-type-errors", false, "write (or diff) even when the rewritten module does not type-check, listing the errors: for generated mocks you regenerate right after")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *diff && *write {
		return &exitError{code: 2, err: errors.New("-diff and -w exclude each other: -diff shows the change, -w makes it")}
	}
	if _, err := analyzer.New(*cfg); err != nil {
		return &exitError{code: 2, err: err}
	}
	res, err := rewrite.Plan(ctx, rewrite.Options{Program: cfg.ForProgram, Patterns: fs.Args(), Tags: tags, AllowTypeErrors: *allowTypeErrors})
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if *write {
		if err := res.Write(); err != nil {
			return &exitError{code: 2, err: err}
		}
		if err := res.Summary(e.stdout, rewriteTitle); err != nil {
			return &exitError{code: 2, err: err}
		}
		fmt.Fprintf(e.stdout, "wrote %d file(s)\n", len(res.Files))
		return nil
	}
	if err := res.Diff(e.stdout); err != nil {
		return &exitError{code: 2, err: err}
	}
	if err := res.Summary(e.stderr, rewriteTitle); err != nil {
		return &exitError{code: 2, err: err}
	}
	if len(res.Files) > 0 {
		return &exitError{code: 1}
	}
	return nil
}

// rewriteTitle heads each group of the summary.
func rewriteTitle(category string) string {
	switch analyzer.Code(category) {
	case analyzer.CodeJobType:
		return "job types migrated"
	case analyzer.CodeInterface:
		return "interfaces migrated"
	case analyzer.CodeCallSite:
		return "call sites renamed"
	case analyzer.CodeRename:
		return "options and errors renamed"
	case analyzer.CodeSpanError:
		return "span error strings renamed"
	case analyzer.CodeSQL:
		return "SQL text to check"
	case analyzer.CodeUniqueViolation:
		return "unique-violation handling to delete"
	case analyzer.CodeGenerated:
		return "generated file to regenerate"
	case analyzer.CodeClash:
		return "clash to resolve"
	case analyzer.CodeExternal:
		return "external interface"
	case analyzer.CodeDirective:
		return "directive without a reason"
	case rewrite.CategoryNotLoaded:
		return "file excluded by build constraints"
	case rewrite.CategoryNotNamed:
		return "file outside the packages named"
	}
	return category
}
