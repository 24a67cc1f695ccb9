// Package layout describes where a job queue keeps its jobs: the tables,
// schema and columns that the migration, the compat runtime and the
// migrate-unique command all work on.
//
// Users fill in a [Layout] (or start from [PlainJobs]). [Layout.Resolve]
// fills every empty name with its default and validates the result once,
// returning a [Resolved]; the migration and the runtime take a Layout at
// their entry points, resolve it there, and everything below trusts the
// Resolved. Every SQL statement the project renders takes its identifiers
// from a Resolved, always quoted.
package layout

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Column and table names that the project itself owns.
const (
	// LegacyKeyColumn is the key column before the migration.
	LegacyKeyColumn = "unique_key"
	// KeyColumn is the key column after the migration.
	KeyColumn = "concurrency_key"
	// LimitsTable holds operator overrides of group limits.
	LimitsTable = "concurrency_limits"
	// SlotsTable holds execution-time slot leases, one row per slot.
	SlotsTable = "concurrency_slots"
	// ReschedulesTable counts, per waiting job, how often it was rescheduled
	// because its slot was busy.
	ReschedulesTable = "concurrency_reschedules"
	// SkipMetadataColumn is the jsonb column that carries skip metadata on
	// skip records (results table, or jobs table for single-table layouts).
	SkipMetadataColumn = "concurrency_skip"
	// VersionTable is the tool's own version table (never schema_migrations).
	VersionTable = "migrate_unique_version"
	// CompatMarker is the SQL comment that opens every statement the compat
	// runtime sends through its adapters (compat.Pgx, compat.SQL). It tells
	// the new application version's sessions apart from the old version's
	// in pg_stat_activity and pg_stat_statements: on an expanded layout
	// compat's statements name unique_key too, and completing the migration
	// refuses only while statements without the marker name it. It comes
	// first so that a truncated query text (track_activity_query_size)
	// still shows it, and holds neither % nor _, so LIKE and position()
	// match it literally.
	CompatMarker = "/* migrate-unique compat */"
)

// Plain-jobs' own table names, the default two-table layout.
const (
	// PlainJobsRequests is plain-jobs' table of pending jobs.
	PlainJobsRequests = "plainjobs_jobrequest"
	// PlainJobsProcesses is plain-jobs' table of running jobs.
	PlainJobsProcesses = "plainjobs_jobprocess"
	// PlainJobsResults is plain-jobs' table of finished jobs.
	PlainJobsResults = "plainjobs_jobresult"
)

// Layout is where a queue keeps its active jobs. It is either two-table
// (RequestsTable, ProcessesTable and optionally ResultsTable) or single-table
// (JobsTable with StateColumn and ActiveStates), never both. Empty names take
// their defaults when the layout is resolved (see [Layout.Resolve]). Table,
// schema, column and state names are used exactly as given: every identifier
// is quoted, so they are case-sensitive.
type Layout struct {
	// Schema holds every table of the layout. Default "public".
	Schema string
	// ClassColumn names the job class column. Default "job_class".
	ClassColumn string

	// RequestsTable holds pending jobs (two-table layouts).
	RequestsTable string
	// ProcessesTable holds running jobs (two-table layouts). Optional.
	ProcessesTable string
	// ResultsTable holds finished jobs (two-table layouts). Optional.
	ResultsTable string

	// JobsTable holds every job (single-table layouts).
	JobsTable string
	// StateColumn names the state column of JobsTable. Default "state".
	StateColumn string
	// ActiveStates lists the states that count as active; the first one is
	// the state of a newly enqueued or rescheduled job.
	ActiveStates []string
	// IDColumn, RunAtColumn, LeaseColumn and WorkerColumn name the
	// single-table columns the runtime's Rescheduler reads and writes.
	// Defaults: "id", "run_at", "lease_until", "worker_id".
	IDColumn, RunAtColumn, LeaseColumn, WorkerColumn string
}

// Resolved is a Layout with every empty name set to its default, that passed
// validation. Get one from [Layout.Resolve]; code that takes a Resolved
// trusts it and never defaults or validates again. Treat it as read-only:
// to change a name, change the Layout and resolve it again.
type Resolved struct {
	// Layout is the complete layout: no name that has a default is empty.
	Layout
}

// PlainJobs returns plain-jobs' own layout: three tables in schema public.
func PlainJobs() Layout {
	return Layout{
		Schema:         "public",
		ClassColumn:    "job_class",
		RequestsTable:  PlainJobsRequests,
		ProcessesTable: PlainJobsProcesses,
		ResultsTable:   PlainJobsResults,
	}
}

// Resolve returns the layout with every empty name set to its default,
// validated: the one place where defaults are applied. An unusable layout
// is an error wrapping [ErrInvalid] that names the field and how to fix it.
// Resolve checks shape only; whether the tables exist is the caller's job.
// Resolving a Resolved's Layout again gives the same Resolved.
func (l Layout) Resolve() (Resolved, error) {
	l = l.withDefaults()
	if err := l.validate(); err != nil {
		return Resolved{}, err
	}
	return Resolved{Layout: l}, nil
}

// withDefaults fills every empty name with its default.
func (l Layout) withDefaults() Layout {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&l.Schema, "public")
	def(&l.ClassColumn, "job_class")
	if l.SingleTable() {
		def(&l.StateColumn, "state")
		def(&l.IDColumn, "id")
		def(&l.RunAtColumn, "run_at")
		def(&l.LeaseColumn, "lease_until")
		def(&l.WorkerColumn, "worker_id")
	}
	return l
}

// SingleTable reports whether the layout is a single jobs table.
func (l Layout) SingleTable() bool { return l.JobsTable != "" }

// ErrInvalid is wrapped by every error Resolve returns.
var ErrInvalid = errors.New("invalid layout")

// validate reports a defaulted layout that cannot be used, naming the field
// and how to fix it.
func (l Layout) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	twoTable := l.RequestsTable != "" || l.ProcessesTable != "" || l.ResultsTable != ""
	switch {
	case twoTable && l.SingleTable():
		return bad("both two-table tables (--requests-table, --processes-table, --results-table) and a single jobs table (--jobs-table) are set; choose one layout")
	case !twoTable && !l.SingleTable():
		return bad("no table is set; give --requests-table (two-table) or --jobs-table (single-table)")
	case twoTable && l.RequestsTable == "":
		return bad("a two-table layout needs --requests-table")
	case !l.SingleTable() && (len(l.ActiveStates) > 0 || l.StateColumn != ""):
		return bad("--state-column and --active-states only apply with --jobs-table")
	case l.SingleTable() && len(l.ActiveStates) == 0:
		return bad("a single-table layout needs --active-states, for example pending,running")
	}
	names := map[string]string{
		"schema": l.Schema, "class column": l.ClassColumn,
		"requests table": l.RequestsTable, "processes table": l.ProcessesTable,
		"results table": l.ResultsTable, "jobs table": l.JobsTable,
		"state column": l.StateColumn, "id column": l.IDColumn,
		"run_at column": l.RunAtColumn, "lease column": l.LeaseColumn,
		"worker column": l.WorkerColumn,
	}
	for what, name := range names {
		if err := checkIdentifier(name); err != nil {
			return bad("%s %q: %v", what, name, err)
		}
	}
	seen := map[string]bool{}
	for _, s := range l.ActiveStates {
		if s == "" {
			return bad("--active-states has an empty state")
		}
		if strings.ContainsRune(s, 0) {
			return bad("active state %q contains a NUL byte", s)
		}
		if seen[s] {
			return bad("active state %q is listed twice", s)
		}
		seen[s] = true
	}
	tables := l.Tables()
	for i := range tables {
		for j := i + 1; j < len(tables); j++ {
			if tables[i] == tables[j] {
				return bad("table %q is named twice", tables[i])
			}
		}
	}
	return nil
}

// checkIdentifier rejects names PostgreSQL cannot hold. Anything else is
// allowed, because every identifier is quoted wherever it is used.
func checkIdentifier(name string) error {
	switch {
	case strings.ContainsRune(name, 0):
		return errors.New("contains a NUL byte")
	case len(name) > 63:
		return fmt.Errorf("is %d bytes long; PostgreSQL identifiers hold at most 63", len(name))
	}
	return nil
}

// Tables returns the layout's tables in a fixed order: requests, processes,
// results; or the jobs table.
func (l Layout) Tables() []string {
	if l.SingleTable() {
		return []string{l.JobsTable}
	}
	var ts []string
	for _, t := range []string{l.RequestsTable, l.ProcessesTable, l.ResultsTable} {
		if t != "" {
			ts = append(ts, t)
		}
	}
	return ts
}

// ActiveTables returns the tables whose rows count as active: requests and
// processes, or the jobs table (filtered by state).
func (l Layout) ActiveTables() []string {
	if l.SingleTable() {
		return []string{l.JobsTable}
	}
	var ts []string
	for _, t := range []string{l.RequestsTable, l.ProcessesTable} {
		if t != "" {
			ts = append(ts, t)
		}
	}
	return ts
}

// PendingState is the state of a newly enqueued or rescheduled job in a
// single-table layout: the first active state.
func (l Layout) PendingState() string {
	if len(l.ActiveStates) == 0 {
		return ""
	}
	return l.ActiveStates[0]
}

// Table returns the quoted, schema-qualified name of a table of the layout's
// schema, for example "public"."plainjobs_jobrequest".
func (r Resolved) Table(name string) string { return Qualified(r.Schema, name) }

// Qualified returns the quoted, schema-qualified name of a table, for
// example "public"."plainjobs_jobrequest".
func Qualified(schema, table string) string { return pgx.Identifier{schema, table}.Sanitize() }

// Ident quotes one identifier.
func Ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// Literal quotes a string as an SQL literal. Use it only for values that are
// part of the layout itself (state names in DDL); data goes in parameters.
func Literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// StatesCondition renders "the state column holds an active state" for
// statements and index predicates: state OPERATOR(pg_catalog.=) ANY
// ('{pending,running}'), which resolves = in pg_catalog on any search_path
// (IN (...) would look it up by name) and whose untyped array takes the
// column's type (text, varchar or an enum).
func (l Layout) StatesCondition() string {
	return Ident(l.StateColumn) + " OPERATOR(pg_catalog.=) ANY (" + ArrayLiteral(l.ActiveStates) + ")"
}

// ArrayLiteral renders strings as an untyped SQL array literal,
// '{"a","b"}', whose element type the context decides.
func ArrayLiteral(vals []string) string {
	qs := make([]string, len(vals))
	for i, v := range vals {
		qs[i] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
	}
	return Literal("{" + strings.Join(qs, ",") + "}")
}

// GroupName is the name of a group wherever one is shown or typed: the class
// alone when the key is empty, else class::key.
func GroupName(class, key string) string {
	if key == "" {
		return class
	}
	return class + "::" + key
}

// SplitGroupName is the inverse of GroupName: it splits at the first "::".
func SplitGroupName(group string) (class, key string) {
	if i := strings.Index(group, "::"); i >= 0 {
		return group[:i], group[i+2:]
	}
	return group, ""
}
