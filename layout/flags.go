package layout

import (
	"flag"
	"fmt"
	"slices"
	"strings"
)

// Flags binds the layout flags shared by every command that works on a
// queue: --schema, --class-column, the two-table and the single-table flags.
type Flags struct {
	fs     *flag.FlagSet
	l      Layout
	states string
}

// RegisterFlags adds the layout flags to fs. Call Layout after fs.Parse.
func RegisterFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{fs: fs}
	fs.StringVar(&f.l.Schema, "schema", "public", "schema that holds the queue's tables")
	fs.StringVar(&f.l.ClassColumn, "class-column", "job_class", "column that holds the job class")
	fs.StringVar(&f.l.RequestsTable, "requests-table", "", "two-table layout: table of pending jobs (default plain-jobs' "+PlainJobsRequests+" when no table flag is given)")
	fs.StringVar(&f.l.ProcessesTable, "processes-table", "", "two-table layout: table of running jobs (default plain-jobs' "+PlainJobsProcesses+")")
	fs.StringVar(&f.l.ResultsTable, "results-table", "", "two-table layout: table of finished jobs (default plain-jobs' "+PlainJobsResults+")")
	fs.StringVar(&f.l.JobsTable, "jobs-table", "", "single-table layout: the one jobs table")
	fs.StringVar(&f.l.StateColumn, "state-column", "", "single-table layout: column that holds the job's state (default state)")
	fs.StringVar(&f.states, "active-states", "", "single-table layout: comma-separated states that count as active; the first is the state of a new job")
	return f
}

// flagNames are the flags RegisterFlags adds.
var flagNames = []string{"schema", "class-column", "requests-table", "processes-table", "results-table", "jobs-table", "state-column", "active-states"}

// Layout returns the layout the flags describe, resolved. With no table flag
// at all it is plain-jobs' three tables in --schema. A flag given empty is
// an error, never its default: a script that passes an unset variable
// (--schema "$SCHEMA") would otherwise migrate other tables than it meant.
func (f *Flags) Layout() (Resolved, error) {
	var empty []string
	f.fs.Visit(func(fl *flag.Flag) {
		if slices.Contains(flagNames, fl.Name) && strings.TrimSpace(fl.Value.String()) == "" {
			empty = append(empty, "--"+fl.Name)
		}
	})
	if len(empty) > 0 {
		return Resolved{}, fmt.Errorf("%w: %s given empty: give a name, or leave the flag out for its default", ErrInvalid, strings.Join(empty, ", "))
	}
	l := f.l
	if f.states != "" {
		for _, s := range strings.Split(f.states, ",") {
			l.ActiveStates = append(l.ActiveStates, strings.TrimSpace(s))
		}
	}
	if l.RequestsTable == "" && l.ProcessesTable == "" && l.ResultsTable == "" && l.JobsTable == "" {
		if l.StateColumn != "" || len(l.ActiveStates) > 0 {
			return Resolved{}, fmt.Errorf("%w: --state-column and --active-states need --jobs-table", ErrInvalid)
		}
		pj := PlainJobs()
		l.RequestsTable, l.ProcessesTable, l.ResultsTable = pj.RequestsTable, pj.ProcessesTable, pj.ResultsTable
	}
	return l.Resolve()
}

// Args renders the flags that select l, for messages that tell the user how
// to point the tool at a table it found.
func (l Layout) Args() string {
	var b strings.Builder
	add := func(flag, v, def string) {
		if v != "" && v != def {
			fmt.Fprintf(&b, " --%s %s", flag, shellQuote(v))
		}
	}
	add("schema", l.Schema, "public")
	add("class-column", l.ClassColumn, "job_class")
	if l.SingleTable() {
		add("jobs-table", l.JobsTable, "")
		add("state-column", l.StateColumn, "state")
		add("active-states", strings.Join(l.ActiveStates, ","), "")
	} else if !(l.RequestsTable == PlainJobsRequests && l.ProcessesTable == PlainJobsProcesses && l.ResultsTable == PlainJobsResults) {
		add("requests-table", l.RequestsTable, "")
		add("processes-table", l.ProcessesTable, "")
		add("results-table", l.ResultsTable, "")
	}
	return strings.TrimSpace(b.String())
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.,:/", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
