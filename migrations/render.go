package migrations

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/migrate-unique/migrate-unique/internal/version"
	"github.com/migrate-unique/migrate-unique/layout"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"lit":   layout.Literal,
	"ident": layout.Ident,
	"join":  strings.Join,
}).ParseFS(templateFS, "templates/*.tmpl"))

// tmplData is what every template sees. Identifiers arrive quoted; values
// that are part of the layout are quoted by the lit function.
type tmplData struct {
	VersionTable string
	LayoutID     string
	ToolVersion  string
	LockTimeout  string
	Tables       []string
	LegacyKey    string
	Key          string

	// Index templates. OnOnly creates a partitioned table's own index (ON
	// ONLY, not CONCURRENTLY).
	Index, IndexName, Table, ClassColumn, KeyColumn, Predicate string
	OnOnly                                                     bool

	// Runtime templates.
	RuntimeDDL, SkipDDL []string
	RuntimeTables       []runtimeTableData
	SkipTable           string
	SkipColumn          string
	// DropOperatorData drops the skip-metadata column even while it holds
	// skip metadata.
	DropOperatorData bool

	// Rebuild template.
	Definition string

	// Probe is the question the skip-metadata column's down step asks
	// through the probe index named Index (partitions.go).
	Probe string

	// DeferIndexDrop leaves a bare unique index on a table that is not
	// partitioned to a step after the cutover (DROP INDEX CONCURRENTLY);
	// the golang-migrate files drop it in the cutover.
	DeferIndexDrop bool

	// Renames are the index renames of the cutover (plain-jobs' 0007
	// names; see plainjobs0007.go), undone by the cutover back.
	Renames []indexRename
}

func newTmplData(l layout.Resolved, lockTimeout time.Duration) tmplData {
	d := tmplData{
		VersionTable: l.Table(layout.VersionTable),
		LayoutID:     layoutID(l),
		ToolVersion:  version.Version,
		LockTimeout:  fmt.Sprintf("%dms", lockTimeout.Milliseconds()),
		LegacyKey:    layout.LegacyKeyColumn,
		Key:          layout.KeyColumn,
		SkipColumn:   layout.SkipMetadataColumn,
	}
	for _, rt := range runtimeTables {
		d.RuntimeTables = append(d.RuntimeTables, runtimeTableData{Table: l.Table(rt.name), KeepWhen: rt.keepWhen})
	}
	for _, stmt := range l.RuntimeDDL() {
		// The skip-metadata column locks a queue table; the new tables do not.
		if strings.HasPrefix(stmt, "ALTER TABLE") {
			d.SkipDDL = append(d.SkipDDL, stmt)
		} else {
			d.RuntimeDDL = append(d.RuntimeDDL, stmt)
		}
	}
	for _, t := range l.Tables() {
		d.Tables = append(d.Tables, l.Table(t))
	}
	if t := l.SkipTable(); t != "" {
		d.SkipTable = l.Table(t)
	}
	d.Renames = plainJobsRenames(l)
	return d
}

func render(name string, d tmplData) (string, error) {
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, d); err != nil {
		return "", fmt.Errorf("render %s: %w", name, err)
	}
	return b.String(), nil
}

// layoutID names a layout in the version table: its kind and tables, which
// is unique within the schema that holds the version table.
func layoutID(l layout.Resolved) string {
	if l.SingleTable() {
		return "single-table:" + l.JobsTable
	}
	return "two-table:" + strings.Join(l.Tables(), ",")
}

// countingIndexName is the name of the counting index the migration builds
// on table: deterministic, so a re-run finds its own leftovers, and at most
// 63 bytes.
func countingIndexName(table string) string { return indexName(table, "_concurrency_key_idx") }

// prefixIndexName is the name of the prefix index on table.
func prefixIndexName(table string) string { return indexName(table, "_concurrency_key_c_idx") }

func indexName(table, suffix string) string {
	name := table + suffix
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(table))
	cut := 63 - len(suffix) - 9
	// Never cut a multi-byte character in half: PostgreSQL rejects a name
	// that is not valid UTF-8.
	for cut > 0 && !utf8.RuneStart(table[cut]) {
		cut--
	}
	return table[:cut] + "_" + hex.EncodeToString(sum[:4]) + suffix
}

// countingIndex is the index the runtime counts active jobs with: (class,
// key) on an active table, partial on the active states of a single table.
type countingIndex struct {
	table     string // unquoted table name
	name      string // unquoted index name
	predicate string // "" or the WHERE clause, rendered
	// prefix marks the prefix index (class, key COLLATE "C"): a no-overlap
	// count compares the key's prefix bytewise, which is a range of this
	// index when the key column's own collation does not sort bytewise (ICU,
	// a non-C libc locale). Up builds it only then.
	prefix bool
}

func countingIndexes(l layout.Resolved) []countingIndex {
	var out []countingIndex
	for _, t := range l.ActiveTables() {
		ci := countingIndex{table: t, name: countingIndexName(t)}
		if pi, ok := plainJobsCounting(t); ok && isPlainJobs(l) {
			// plain-jobs' own (job_class, concurrency_key) index, under the
			// name its 0007 gives it.
			ci.name = pi.name
		}
		if l.SingleTable() {
			ci.predicate = l.StatesCondition()
		}
		out = append(out, ci)
	}
	return out
}

// prefixIndexes are the prefix indexes of l's active tables, one per
// counting index.
func prefixIndexes(l layout.Resolved) []countingIndex {
	out := countingIndexes(l)
	for i := range out {
		out[i].name, out[i].prefix = prefixIndexName(out[i].table), true
	}
	return out
}

// ourIndexes are every index the migration may build on l's tables.
func ourIndexes(l layout.Resolved) []countingIndex {
	return append(append(countingIndexes(l), prefixIndexes(l)...), plainJobsOurs(l)...)
}

func (ci countingIndex) createSQL(l layout.Resolved, keyColumn string) (string, error) {
	return ci.render(l, keyColumn, l.Table(ci.table), layout.Ident(ci.name), false)
}

// render renders ci's statement on the quoted table under the quoted index
// name: CREATE INDEX CONCURRENTLY, or with onOnly the partitioned parent's
// CREATE INDEX IF NOT EXISTS ... ON ONLY (see partitions.go).
func (ci countingIndex) render(l layout.Resolved, keyColumn, table, index string, onOnly bool) (string, error) {
	d := newTmplData(l, 0)
	d.IndexName = index
	d.Table = table
	d.OnOnly = onOnly
	d.ClassColumn = layout.Ident(l.ClassColumn)
	d.KeyColumn = layout.Ident(keyColumn)
	if ci.prefix {
		d.KeyColumn += ` COLLATE "C"`
	}
	d.Predicate = ci.predicate
	return render("create_index.sql.tmpl", d)
}

func dropIndexSQL(l layout.Resolved, index string) (string, error) {
	d := newTmplData(l, 0)
	d.Index = l.Table(index)
	return render("drop_index.sql.tmpl", d)
}

type runtimeTableData struct{ Table, KeepWhen string }

// runtimeTables lists the tables layout.RuntimeDDL creates, with the rows
// that make one hold operator data: down keeps a table while it has any.
var runtimeTables = []struct{ name, keepWhen string }{
	{layout.LimitsTable, "TRUE"}, // every override is an operator's decision
	{layout.SlotsTable, "expires_at > now()"},
	{layout.ReschedulesTable, ""}, // counters, rebuilt by the runtime
}
