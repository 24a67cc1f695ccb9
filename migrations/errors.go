package migrations

import (
	"errors"
	"fmt"
	"strings"
)

// ErrStopped is returned when Options.StopAfterStep stopped a run on
// purpose (a test hook that simulates a kill between two steps).
var ErrStopped = errors.New("stopped by the StopAfterStep hook")

// ErrSavedRule is wrapped by the error of Down and FilesFor when a unique
// rule the cutover saved cannot be rebuilt exactly as it was on any
// search_path (docs/migration.md, "A shared database").
var ErrSavedRule = errors.New("a saved unique rule cannot be replayed exactly")

// ErrBusy is returned when another run of the tool holds the layout.
var ErrBusy = errors.New("another migrate-unique run is working on this layout; wait for it to finish")

// Finding is one preflight observation. Fatal findings stop the run before
// any change. The CLI's --json prints it as is (docs/migration.md): a new
// kind of finding is a new Kind value, never a new shape.
type Finding struct {
	// Fatal findings abort the run.
	Fatal bool `json:"fatal"`
	// Kind names the check that found it, in a word or two
	// ("long_transaction", "run_lock", ...); "" when the check has none.
	Kind string `json:"kind"`
	// Object names what it is about (a table, an index, a session), or "".
	Object string `json:"object"`
	// Message says what was found and what to do about it.
	Message string `json:"message"`
	// Action is the fix in a few words, or "" when Message says it.
	Action string `json:"action"`
}

// String renders the finding as "refused: ..." or "note: ...".
func (f Finding) String() string {
	if f.Fatal {
		return "refused: " + f.Message
	}
	return "note: " + f.Message
}

// PreflightError lists the fatal preflight findings. Nothing was changed.
type PreflightError struct {
	// Findings are every finding of the preflight, fatal or not.
	Findings []Finding
}

// Error lists the fatal findings.
func (e *PreflightError) Error() string {
	var b strings.Builder
	b.WriteString("preflight refused the migration; nothing was changed:")
	for _, f := range e.Findings {
		if f.Fatal {
			b.WriteString("\n  - " + f.Message)
		}
	}
	return b.String()
}

// Candidate is a set of tables of the database that look like a legacy
// queue, with the flags that select it.
type Candidate struct {
	// Tables lists the schema-qualified tables.
	Tables []string
	// Args are the layout flags that select the candidate.
	Args string
}

// NotFoundError says that the layout's schema, tables or columns do not
// exist, and lists the tables of the database that have a key column.
type NotFoundError struct {
	// Missing lists what was not found.
	Missing []string
	// Candidates lists tables with a unique_key (or concurrency_key) column.
	Candidates []Candidate

	// listErr says why the candidates could not be listed.
	listErr error
}

// Error names what is missing and lists the candidates with their flags.
func (e *NotFoundError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "layout not found: %s", strings.Join(e.Missing, "; "))
	if e.listErr != nil {
		fmt.Fprintf(&b, "\ncould not list the tables that have a unique_key (or concurrency_key) column: %v", e.listErr)
		return b.String()
	}
	if len(e.Candidates) == 0 {
		b.WriteString("\nno table of this database has a unique_key (or concurrency_key) column")
		return b.String()
	}
	b.WriteString("\ntables with a unique_key (or concurrency_key) column, and the flags that select them:")
	for _, c := range e.Candidates {
		fmt.Fprintf(&b, "\n  %s\n      %s", strings.Join(c.Tables, ", "), c.Args)
	}
	return b.String()
}

// DuplicateGroup is a group that breaks the unique rule down would restore.
type DuplicateGroup struct {
	// Table and Index name the rule.
	Table string `json:"table"`
	Index string `json:"index"`
	// Class and Key are the group's class and key (Key is every key column
	// joined with ", " when the rule has more than class and key).
	Class string `json:"class"`
	Key   string `json:"key"`
	// Count is the number of rows the group has under the rule.
	Count int64 `json:"count"`
}

// DuplicatesError is returned by Down when groups break the old unique
// rule. Nothing was changed and no row was deleted.
type DuplicatesError struct {
	// Groups lists every offending group, largest first.
	Groups []DuplicateGroup
}

// Error lists every offending group.
func (e *DuplicatesError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "down refused: %d group(s) have more rows than the old unique rule allows; nothing was changed and no job was deleted. Let them finish or delete them yourself, then run down again; down --drain sets them to limit 1 and waits for the extra jobs to finish:", len(e.Groups))
	for _, g := range e.Groups {
		fmt.Fprintf(&b, "\n  %s (rule %s): class %q, key %q: %d rows", g.Table, g.Index, g.Class, g.Key, g.Count)
	}
	return b.String()
}

// LockError is returned when a step could not take its locks within
// MaxAttempts attempts of LockTimeout each.
type LockError struct {
	// Step names the step that gave up.
	Step string
	// Attempts is how many times it tried.
	Attempts int
	// Err is the last attempt's error (55P03, 40P01, 57014 or a
	// *HolderError).
	Err error
	// Blockers are the sessions that held the table the last attempt
	// waited for when its wait ended (empty when not known).
	Blockers []LockHolder
}

// Error says which step gave up, and how to get past it.
func (e *LockError) Error() string {
	held := ""
	if len(e.Blockers) > 0 {
		held = "; the table it waited for last was held by " + blockersString(e.Blockers)
	}
	return fmt.Sprintf("step %q: could not take its locks in %d attempts (%v%s); nothing of this step was applied, run again when the queue is quieter or raise --lock-timeout / --max-attempts", e.Step, e.Attempts, e.Err, held)
}

// Unwrap returns the last attempt's error.
func (e *LockError) Unwrap() error { return e.Err }
