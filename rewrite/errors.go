package rewrite

import (
	"fmt"
	"strings"

	"github.com/migrate-unique/migrate-unique/analyzer/load"
)

// ErrNoPackages is returned when the patterns match no package of the main
// module: the loader's [load.ErrNoPackages].
var ErrNoPackages = load.ErrNoPackages

// NoModuleError means the directory is in no Go module and no go.work
// workspace: there is nothing to migrate there.
type NoModuleError struct {
	// Dir is the directory the run started in.
	Dir string
}

func (e *NoModuleError) Error() string {
	return fmt.Sprintf("no go.mod in %s or any directory above it (and no go.work): the code migration works on a Go module; cd into the module's directory (where its go.mod is), or into a go.work workspace's directory to migrate its modules together, and run it again", e.Dir)
}

// maxListed bounds how many individual problems an error message lists.
const maxListed = 10

// LoadError means the module could not be loaded or does not type-check, so
// no fix can be trusted. Nothing was changed. The loader
// ([load.LoadError]) returns it, its problems reduced to their root causes.
type LoadError = load.LoadError

// VerifyError means the rewritten module would not type-check: the fixes
// are wrong for this code, so nothing was changed.
type VerifyError struct {
	// Tags is the build-tag set of the failing check ("" for none).
	Tags string
	// Problems are the type checker's messages on the rewritten code.
	Problems []string
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("the rewritten module would not type-check%s, so nothing was written; the fixes need a human here (or a //migrate-unique:ignore directive), or, when the packages named leave part of the module out, a run over the whole module:\n%s",
		tagsSuffix(e.Tags), listProblems(e.Problems))
}

// ConflictError means two fixes edit the same bytes of a file differently,
// so neither can be applied safely. Nothing was changed.
type ConflictError struct {
	// File is the file both fixes edit.
	File string
	// First and Second describe the two findings whose fixes conflict.
	First, Second string
	// Why says how the edits overlap.
	Why string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("conflicting fixes in %s: %s; the fix for %s and the fix for %s cannot both apply; resolve one by hand or suppress it with //migrate-unique:ignore <reason>",
		e.File, e.Why, e.First, e.Second)
}

// OutsideModuleError means a fix would edit a file that does not belong to a
// package of the main module (a dependency, the module cache, a generated
// cgo file). Nothing was changed.
type OutsideModuleError struct {
	// File is the file the fix would edit.
	File string
	// Finding describes the finding whose fix it is.
	Finding string
	// Module is the main module's path.
	Module string
}

func (e *OutsideModuleError) Error() string {
	return fmt.Sprintf("the fix for %s would edit %s, which is not part of the main module %s; rewrite only edits the main module's own files (migrate a dependency in its own module)",
		e.Finding, e.File, e.Module)
}

// FileChangedError means a file changed on disk after it was loaded, so the
// planned edit no longer fits it. Nothing was written.
type FileChangedError struct {
	// File is the changed file.
	File string
}

func (e *FileChangedError) Error() string {
	return fmt.Sprintf("%s changed on disk since it was loaded; nothing was written; rerun rewrite", e.File)
}

func tagsSuffix(tags string) string {
	if tags == "" {
		return ""
	}
	return fmt.Sprintf(" with -tags %s", tags)
}

func listProblems(ps []string) string {
	var b strings.Builder
	for i, p := range ps {
		if i == maxListed {
			fmt.Fprintf(&b, "\t... and %d more\n", len(ps)-maxListed)
			break
		}
		fmt.Fprintf(&b, "\t%s\n", p)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
