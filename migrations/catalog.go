package migrations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/migrate-unique/migrate-unique/layout"
)

// querier is what the catalog reads need: *pgx.Conn and pgx.Tx satisfy it.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// SavedUnique is a unique constraint or unique index that covered the key
// and that the cutover dropped, saved exactly so that down can restore it.
type SavedUnique struct {
	// Table is the quoted, schema-qualified table.
	Table string `json:"table"`
	// Index is the index name (the constraint's name for a constraint).
	Index string `json:"index"`
	// Constraint is the constraint name, or "" for a bare unique index.
	Constraint string `json:"constraint"`
	// Definition is pg_get_indexdef before the rename.
	Definition string `json:"definition"`
	// ConstraintDefinition is pg_get_constraintdef before the rename.
	ConstraintDefinition string `json:"constraint_definition"`
	// Rebuild is pg_get_indexdef after the rename: what down builds.
	Rebuild string `json:"rebuild"`
	// Predicate is the partial index's WHERE clause after the rename, or "".
	Predicate string `json:"predicate"`
	// Columns are the index's key columns after the rename.
	Columns []string `json:"columns"`
	// Deferrable and Deferred carry the constraint's timing.
	Deferrable bool `json:"deferrable"`
	Deferred   bool `json:"deferred"`
	// Partitions lists, for a unique index on a partitioned table, each
	// partition's own index (attached to it), so that down rebuilds each
	// under its name and definition; empty otherwise.
	Partitions []SavedPartition `json:"partitions"`
}

// SavedPartition is one partition's index of a saved unique index on a
// partitioned table.
type SavedPartition struct {
	// Table is the partition, schema-qualified; Index its index's name.
	Table string `json:"table"`
	Index string `json:"index"`
	// Definition is pg_get_indexdef before the rename, Rebuild after it.
	Definition string `json:"definition"`
	Rebuild    string `json:"rebuild"`
}

// tableInfo is what the catalog says about one table of the layout.
type tableInfo struct {
	name    string
	exists  bool
	columns map[string]bool
	// order lists the columns by number (the version schema's views show
	// them in this order).
	order []string
	// rowSecurity says row-level security is enabled on the table.
	rowSecurity bool
	rows        int64 // estimate (reltuples)
	// rowsUnknown: never analysed (reltuples -1; before PostgreSQL 14,
	// which writes 0 there, reltuples and relpages 0 and no analyse or
	// vacuum recorded in pg_stat_all_tables), rows is 0.
	rowsUnknown bool
	bytes       int64 // pg_total_relation_size (of every partition on a partitioned table)
	// keyCollation is how the key column orders (layout.CollationSQL).
	keyCollation string
	// partitioned says the table is partitioned (relkind p), and
	// partitions lists its partitions (direct ones).
	partitioned bool
	partitions  []partitionRef
	// oid identifies the table (0 when it does not exist).
	oid uint32
}

// keyBytewise reports whether the key column sorts bytewise, so that a
// no-overlap prefix is a range of the counting index.
func (t tableInfo) keyBytewise() bool {
	bytewise, _ := layout.Ordering(t.keyCollation)
	return bytewise
}

func (t tableInfo) keyColumn() string {
	if t.columns[layout.LegacyKeyColumn] {
		return layout.LegacyKeyColumn
	}
	return layout.KeyColumn
}

// indexInfo is one index on a table of the layout.
type indexInfo struct {
	table, name             string
	unique, primary, valid  bool
	method                  string
	columns                 []string // rendered key columns, quoted as needed
	predicate               string
	constraint              string
	definition              string
	hasExpressionsOrInclude bool
	// unindexed lists, for an index on a partitioned table, the partitions
	// (quoted) that have no index attached to it: the index is INVALID
	// until none is left.
	unindexed []string
	// bytes is the index's size on disk, its partitions' together on a
	// partitioned table: what a DROP INDEX deletes at commit.
	bytes int64
}

// unindexedNote names, for an index on a partitioned table, the partitions
// that lack their index: "" otherwise.
func (ix indexInfo) unindexedNote() string {
	if len(ix.unindexed) == 0 {
		return ""
	}
	return " (partitions without it: " + strings.Join(ix.unindexed, ", ") + ")"
}

func (ix indexInfo) coversKey() bool {
	return slices.Contains(ix.columns, layout.LegacyKeyColumn) || slices.Contains(ix.columns, layout.KeyColumn)
}

// versionRow is the layout's row in the tool's version table.
type versionRow struct {
	state       string
	toolVersion string
	saved       []SavedUnique
	updatedAt   time.Time
	// step is the step a run recorded before taking it, and stepStartedAt
	// when; both are cleared when up finishes (down deletes the row).
	step          string
	stepStartedAt time.Time
	// savedTables are the tables of saved, by oid (0: gone).
	savedTables []uint32
	// versionSchema is the version schema up --expand created ("" when
	// none), kept after complete until up --contract (expand.go).
	versionSchema string
	// drained lists the overrides down --drain set, to restore (drain.go).
	drained []drainedGroup
}

// inspection is a read-only snapshot of everything the migration decides on.
type inspection struct {
	l             layout.Resolved
	schemaExists  bool
	tables        []tableInfo
	indexes       map[string][]indexInfo
	versionTable  bool
	version       *versionRow
	runtime       map[string]bool // runtime tables that exist
	skipColumn    bool
	sessions      []session
	serverVersion int
	// access is what the connected role may do and the grants up needs
	// (nil while a table of the layout is missing).
	access *access
	// vs is the version schema (expand.go): the one recorded, else the
	// one the run names, else the default.
	vs *versionSchemaInfo
}

// session is another backend holding a lock on a table of the layout.
type session struct {
	pid     int
	state   string
	xactAge time.Duration
	idleAge time.Duration
	table   string
	mode    string
	query   string
	// visible says pg_stat_activity shows the connected role this
	// session's transaction (its role's, or every one with
	// pg_read_all_stats); otherwise state, ages and query are unknown and
	// only pg_locks speaks of it (see checkHidden).
	visible bool
	// role is the session's role ("" for a background process such as an
	// autovacuum worker), vxid its transaction in pg_locks.
	role, vxid string
}

func (in *inspection) table(name string) *tableInfo {
	for i := range in.tables {
		if in.tables[i].name == name {
			return &in.tables[i]
		}
	}
	return nil
}

// tuplesSQL is the row estimate of the pg_class row alias: reltuples, or
// -1 when the table was never analysed. PostgreSQL 14 and later write -1
// there; older servers write 0, so with $5 (the server is older than 14)
// reltuples and relpages 0 with no analyse or vacuum recorded in
// pg_stat_all_tables read as -1 too.
func tuplesSQL(alias string) string {
	return `CASE WHEN $5 AND ` + alias + `.reltuples = 0 AND ` + alias + `.relpages = 0 AND NOT EXISTS (
           SELECT 1 FROM pg_catalog.pg_stat_all_tables s
           WHERE s.relid = ` + alias + `.oid AND coalesce(s.last_analyze, s.last_autoanalyze, s.last_vacuum, s.last_autovacuum) IS NOT NULL)
       THEN -1 ELSE ` + alias + `.reltuples END`
}

func inspect(ctx context.Context, q querier, l layout.Resolved) (*inspection, error) {
	in := &inspection{l: l, indexes: map[string][]indexInfo{}}
	if err := q.QueryRow(ctx, "SELECT current_setting('server_version_num')::int, EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", l.Schema).
		Scan(&in.serverVersion, &in.schemaExists); err != nil {
		return nil, fmt.Errorf("read the catalog: %w", err)
	}
	for _, t := range l.Tables() {
		ti := tableInfo{name: t, columns: map[string]bool{}}
		var cols []string
		var oid int64
		err := q.QueryRow(ctx, `
SELECT CASE WHEN c.relkind = 'p' THEN (SELECT CASE WHEN pg_catalog.bool_or(`+tuplesSQL("pc")+` < 0) THEN -1 ELSE coalesce(pg_catalog.sum(`+tuplesSQL("pc")+`), 0) END
                                       FROM pg_catalog.pg_partition_tree(c.oid) AS pt JOIN pg_catalog.pg_class pc ON pc.oid = pt.relid WHERE pt.isleaf)::bigint
            ELSE (`+tuplesSQL("c")+`)::bigint END,
       CASE WHEN c.relkind = 'p' THEN (SELECT coalesce(pg_catalog.sum(pg_catalog.pg_total_relation_size(pt.relid)), 0)
                                       FROM pg_catalog.pg_partition_tree(c.oid) AS pt WHERE pt.isleaf)::bigint
            ELSE pg_total_relation_size(c.oid) END,
       ARRAY(SELECT a.attname::text FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum),
       coalesce((SELECT `+layout.CollationSQL("a.attcollation")+` FROM pg_attribute a
                 WHERE a.attrelid = c.oid AND a.attname IN ($3, $4) AND NOT a.attisdropped LIMIT 1), ''),
       c.relkind = 'p', c.relrowsecurity, c.oid::int8
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`, l.Schema, t, layout.KeyColumn, layout.LegacyKeyColumn, in.serverVersion < 140000).Scan(&ti.rows, &ti.bytes, &cols, &ti.keyCollation, &ti.partitioned, &ti.rowSecurity, &oid)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return nil, fmt.Errorf("read table %s: %w", l.Table(t), err)
		default:
			ti.exists, ti.oid = true, uint32(oid)
			if ti.rows < 0 {
				ti.rows, ti.rowsUnknown = 0, true
			}
			for _, c := range cols {
				ti.columns[c] = true
			}
			ti.order = cols
			if ti.partitioned {
				if ti.partitions, err = unindexedPartitions(ctx, q, l.Table(t), ""); err != nil {
					return nil, err
				}
			}
			ixs, err := readIndexes(ctx, q, l, t)
			if err != nil {
				return nil, err
			}
			in.indexes[t] = ixs
		}
		in.tables = append(in.tables, ti)
	}
	exists := func(name string) (bool, error) {
		var ok bool
		err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p'))`, l.Schema, name).Scan(&ok)
		return ok, err
	}
	var err error
	if in.versionTable, err = exists(layout.VersionTable); err != nil {
		return nil, fmt.Errorf("read the catalog: %w", err)
	}
	in.runtime = map[string]bool{}
	for _, rt := range runtimeTables {
		if in.runtime[rt.name], err = exists(rt.name); err != nil {
			return nil, fmt.Errorf("read the catalog: %w", err)
		}
	}
	if st := l.SkipTable(); st != "" {
		if t := in.table(st); t != nil {
			in.skipColumn = t.columns[layout.SkipMetadataColumn]
		}
	}
	if in.versionTable {
		v, err := readVersion(ctx, q, l)
		if err != nil {
			return nil, err
		}
		in.version = v
	}
	if in.sessions, err = readSessions(ctx, q, l); err != nil {
		return nil, err
	}
	if in.schemaExists && !slices.ContainsFunc(in.tables, func(t tableInfo) bool { return !t.exists }) {
		if in.access, err = readAccess(ctx, q, in); err != nil {
			return nil, err
		}
	}
	name := DefaultVersionSchema(l.Schema)
	if in.version != nil && in.version.versionSchema != "" {
		name = in.version.versionSchema
	}
	if in.vs, err = readVersionSchema(ctx, q, in, name); err != nil {
		return nil, err
	}
	return in, nil
}

func readIndexes(ctx context.Context, q querier, l layout.Resolved, table string) ([]indexInfo, error) {
	rows, err := q.Query(ctx, `
SELECT i.relname::text, x.indisunique, x.indisprimary, x.indisvalid, am.amname::text,
       ARRAY(SELECT pg_get_indexdef(x.indexrelid, k, true) FROM generate_series(1, x.indnkeyatts) AS k),
       coalesce(pg_get_expr(x.indpred, x.indrelid, true), ''), coalesce(con.conname::text, ''), pg_get_indexdef(x.indexrelid),
       x.indexprs IS NOT NULL OR x.indnatts <> x.indnkeyatts,
       ARRAY(SELECT pg_catalog.format('%I.%I', pn.nspname, p.relname) FROM pg_catalog.pg_inherits pi
             JOIN pg_catalog.pg_class p ON p.oid OPERATOR(pg_catalog.=) pi.inhrelid JOIN pg_catalog.pg_namespace pn ON pn.oid OPERATOR(pg_catalog.=) p.relnamespace
             WHERE t.relkind OPERATOR(pg_catalog.=) 'p' AND pi.inhparent OPERATOR(pg_catalog.=) t.oid
               AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits ii JOIN pg_catalog.pg_index cx ON cx.indexrelid OPERATOR(pg_catalog.=) ii.inhrelid
                               WHERE ii.inhparent OPERATOR(pg_catalog.=) x.indexrelid AND cx.indrelid OPERATOR(pg_catalog.=) p.oid)
               AND NOT coalesce((pg_catalog.to_jsonb(pi) OPERATOR(pg_catalog.->>) 'inhdetachpending')::pg_catalog.bool, false)
             ORDER BY 1),
       CASE WHEN i.relkind OPERATOR(pg_catalog.=) 'I'
            THEN (SELECT coalesce(pg_catalog.sum(pg_catalog.pg_relation_size(pt.relid)), 0)::pg_catalog.int8 FROM pg_catalog.pg_partition_tree(x.indexrelid) AS pt)
            ELSE pg_catalog.pg_relation_size(x.indexrelid) END
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
JOIN pg_am am ON am.oid = i.relam
LEFT JOIN pg_constraint con ON con.conindid = x.indexrelid AND con.conrelid = x.indrelid AND con.contype IN ('u', 'p', 'x')
WHERE n.nspname = $1 AND t.relname = $2
ORDER BY i.relname`, l.Schema, table)
	if err != nil {
		return nil, fmt.Errorf("read the indexes of %s: %w", l.Table(table), err)
	}
	defer rows.Close() // a scan error must not leave the connection busy
	var out []indexInfo
	for rows.Next() {
		ix := indexInfo{table: table}
		if err := rows.Scan(&ix.name, &ix.unique, &ix.primary, &ix.valid, &ix.method, &ix.columns, &ix.predicate, &ix.constraint, &ix.definition, &ix.hasExpressionsOrInclude, &ix.unindexed, &ix.bytes); err != nil {
			return nil, fmt.Errorf("read the indexes of %s: %w", l.Table(table), err)
		}
		out = append(out, ix)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the indexes of %s: %w", l.Table(table), err)
	}
	return out, nil
}

func readVersion(ctx context.Context, q querier, l layout.Resolved) (*versionRow, error) {
	var v versionRow
	var saved []byte
	var step, versionSchema *string
	var stepAt *time.Time
	var drained []byte
	// The step columns are read by name from the row's JSON: a version table
	// written by an older version of the tool has none yet.
	err := q.QueryRow(ctx, "SELECT v.state, v.tool_version, v.saved, v.updated_at, to_jsonb(v)->>'step', (to_jsonb(v)->>'step_started_at')::timestamptz, "+
		"to_jsonb(v)->>'version_schema', to_jsonb(v)->'drained' FROM "+
		l.Table(layout.VersionTable)+" v WHERE v.layout = $1", layoutID(l)).
		Scan(&v.state, &v.toolVersion, &saved, &v.updatedAt, &step, &stepAt, &versionSchema, &drained)
	if step != nil {
		v.step = *step
	}
	if versionSchema != nil {
		v.versionSchema = *versionSchema
	}
	if len(drained) > 0 && string(drained) != "null" {
		if err := json.Unmarshal(drained, &v.drained); err != nil {
			return nil, fmt.Errorf("read the overrides down --drain set in %s: %w", l.Table(layout.VersionTable), err)
		}
	}
	if stepAt != nil {
		v.stepStartedAt = *stepAt
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the version table %s (it should have columns layout, state, tool_version, saved, updated_at; if another tool owns a table of that name, move it): %w", l.Table(layout.VersionTable), err)
	}
	if err := json.Unmarshal(saved, &v.saved); err != nil {
		return nil, fmt.Errorf("read the saved definitions in %s: %w", l.Table(layout.VersionTable), err)
	}
	for i := range v.saved {
		if v.saved[i].Partitions == nil {
			v.saved[i].Partitions = []SavedPartition{} // saved by an older version
		}
		var oid int64
		if err := q.QueryRow(ctx, "SELECT coalesce(pg_catalog.to_regclass($1::pg_catalog.text)::pg_catalog.oid::pg_catalog.int8, 0)", v.saved[i].Table).Scan(&oid); err != nil {
			return nil, fmt.Errorf("read the table of the saved rule %s: %w", v.saved[i].Index, err)
		}
		v.savedTables = append(v.savedTables, uint32(oid))
	}
	return &v, nil
}

// yieldingAutovacuum matches (pg_stat_activity a) an autovacuum worker that
// gives way to a conflicting lock request (after deadlock_timeout): it is
// neither a long-running session to refuse over nor a holder to avoid
// queueing behind. An anti-wraparound autovacuum does not give way, so it
// still counts.
const yieldingAutovacuum = `(a.backend_type = 'autovacuum worker' AND coalesce(a.query, '') NOT LIKE '%to prevent wraparound%')`

// thisDatabase matches (pg_locks lk) a lock in the connected database:
// pg_locks shows every database's, and a relation's OID means nothing in
// another one (databases copied from one template share them).
const thisDatabase = `lk.database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// readSessions lists other sessions that hold or wait for a lock on a table
// of the layout, with the age of their transaction.
func readSessions(ctx context.Context, q querier, l layout.Resolved) ([]session, error) {
	rows, err := q.Query(ctx, `
SELECT DISTINCT ON (a.pid, c.relname) a.pid, coalesce(a.state, ''), 
       coalesce(extract(epoch FROM now() - a.xact_start), 0)::float8,
       coalesce(extract(epoch FROM now() - a.state_change), 0)::float8,
       c.relname::text, lk.mode, left(coalesce(a.query, ''), 120),
       `+sessionVisible+`, coalesce(quote_ident(a.usename::text), ''), lk.virtualtransaction
FROM pg_locks lk
JOIN pg_class c ON c.oid = lk.relation AND lk.database = (SELECT oid FROM pg_database WHERE datname = current_database())
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_stat_activity a ON a.pid = lk.pid
WHERE n.nspname = $1 AND c.relname = ANY ($2) AND lk.pid <> pg_backend_pid() AND `+thisDatabase+`
  AND NOT coalesce(`+yieldingAutovacuum+`, false)
ORDER BY a.pid, c.relname`, l.Schema, l.Tables())
	if err != nil {
		return nil, fmt.Errorf("read the sessions on the layout's tables: %w", err)
	}
	defer rows.Close()
	var out []session
	for rows.Next() {
		var s session
		var xact, idle float64
		if err := rows.Scan(&s.pid, &s.state, &xact, &idle, &s.table, &s.mode, &s.query, &s.visible, &s.role, &s.vxid); err != nil {
			return nil, fmt.Errorf("read the sessions on the layout's tables: %w", err)
		}
		s.xactAge = time.Duration(xact * float64(time.Second))
		s.idleAge = time.Duration(idle * float64(time.Second))
		out = append(out, s)
	}
	return out, rows.Err()
}

// State is where a database stands in the migration.
type State string

// The states of a layout.
const (
	// Legacy: every table has unique_key; nothing of the migration exists.
	Legacy State = "legacy"
	// PartlyMigrated: a run stopped half-way (up or down); re-run it.
	PartlyMigrated State = "partly migrated"
	// Migrated: every table has concurrency_key and the run finished.
	Migrated State = "migrated"
	// Expanded: up --expand finished: every table still has unique_key and
	// its unique rule, the counting indexes, the runtime's tables and the
	// version schema exist (expand.go); up completes it. A complete that
	// stopped before its cutover committed (it gave up waiting for its
	// locks, or was interrupted) leaves the layout expanded too.
	Expanded State = "expanded"
)

func (in *inspection) state() State {
	if in.version != nil && in.version.state == "expanded" || in.completeStoppedBeforeCutover() {
		return Expanded
	}
	if in.version != nil && in.version.state != "migrated" {
		return PartlyMigrated // a run recorded its intent and did not finish
	}
	legacy, migrated := true, true
	for _, t := range in.tables {
		if !t.columns[layout.LegacyKeyColumn] {
			legacy = false
		}
		if !t.columns[layout.KeyColumn] || t.columns[layout.LegacyKeyColumn] {
			migrated = false
		}
	}
	switch {
	case migrated && in.version != nil && in.version.state == "migrated":
		return Migrated
	case legacy && in.version == nil && len(in.ours()) == 0:
		return Legacy
	default:
		return PartlyMigrated
	}
}

// ours lists the counting indexes of ours that exist, valid or not.
func (in *inspection) ours() []indexInfo {
	var out []indexInfo
	for _, ci := range ourIndexes(in.l) {
		for _, ix := range in.indexes[ci.table] {
			if ix.name == ci.name {
				out = append(out, ix)
			}
		}
	}
	return out
}

// invalidOurs lists the names of our indexes left invalid by a failed build:
// counting indexes, and the unique rules down rebuilds (an INVALID unique
// index still rejects duplicates of new rows).
func (in *inspection) invalidOurs() []string {
	var out []string
	for _, ix := range in.ours() {
		if !ix.valid {
			out = append(out, ix.table+"."+ix.name)
		}
	}
	for _, ix := range in.savedRebuilds() {
		if !ix.valid {
			out = append(out, ix.table+"."+ix.name)
		}
	}
	return out
}

// savedRebuilds lists the indexes that exist under the name of a saved
// unique rule while the key column is concurrency_key: rebuilt (or being
// rebuilt) by a down that has not reached its cutover back.
func (in *inspection) savedRebuilds() []indexInfo {
	if in.version == nil {
		return nil
	}
	var out []indexInfo
	for _, t := range in.tables {
		if !t.columns[layout.KeyColumn] {
			continue
		}
		for _, ix := range in.indexes[t.name] {
			for _, s := range in.version.saved {
				if s.Index == ix.name && s.Table == in.l.Table(t.name) {
					out = append(out, ix)
				}
			}
		}
	}
	return out
}

// Direction says which run a partly migrated layout is in the middle of:
// "up", "down", or "" when no run recorded its intent.
func (in *inspection) direction() string {
	switch {
	case in.version == nil:
		return ""
	case in.version.state == "migrating":
		return "up"
	case in.version.state == "rolling back":
		return "down"
	}
	return ""
}

// stoppedRun describes the run a partly migrated layout is in the middle
// of, from the intent it recorded: "a down run stopped at step down 1/6:
// rebuild unique rule ... (started ...)".
func (in *inspection) stoppedRun() string {
	run := map[string]string{"up": "an up run", "down": "a down run"}[in.direction()]
	if run == "" {
		return ""
	}
	if in.version.step == "" {
		return run + " stopped half-way"
	}
	at := in.version.stepStartedAt.UTC().Format(time.RFC3339)
	if in.completeStoppedBeforeCutover() {
		return fmt.Sprintf("a complete (up on the expanded layout) stopped before its cutover committed, at step %s (started %s): it gave up waiting for its locks or was interrupted; nothing of the cutover was applied (every table still has unique_key and its unique rule, as up --expand left them)", in.version.step, at)
	}
	return fmt.Sprintf("%s stopped at step %s (started %s)", run, in.version.step, at)
}

// completeStoppedBeforeCutover says that a complete (up on an expanded
// layout: its steps are recorded in the phase "complete") recorded its
// intent and stopped before its cutover committed: the cutover renames
// the key column of every table in one transaction, so while every table
// still has unique_key nothing of it was applied, and the layout is what
// up --expand left (a re-run of up completes it, down rolls it back). A
// cutover that gives up after its attempts (*LockError) leaves exactly
// this.
func (in *inspection) completeStoppedBeforeCutover() bool {
	if in.version == nil || in.version.state != "migrating" || !strings.HasPrefix(in.version.step, completePhase+" ") || len(in.tables) == 0 {
		return false
	}
	for _, t := range in.tables {
		if !t.columns[layout.LegacyKeyColumn] || t.columns[layout.KeyColumn] {
			return false
		}
	}
	return true
}

// drift lists what no longer matches a migrated layout: a counting index
// missing or invalid (admission counts then scan the table), a unique rule
// back on the key (enqueues fail with 23505 again), a runtime table or the
// skip-metadata column missing. Up repairs each of them.
func (in *inspection) drift() []string {
	state := in.state()
	if state != Migrated && state != Expanded {
		return nil
	}
	var out []string
	if state == Migrated {
		out = in.plainJobsDrift()
	}
	for _, ci := range countingIndexes(in.l) {
		if isPlainJobs(in.l) {
			break // plainJobsDrift
		}
		if _, ok := in.equivalent(ci); ok {
			continue
		}
		found := false
		for _, ix := range in.indexes[ci.table] {
			if ix.name == ci.name {
				found = true
				if !ix.valid {
					out = append(out, fmt.Sprintf("counting index %s on %s is INVALID%s", layout.Ident(ci.name), in.l.Table(ci.table), ix.unindexedNote()))
				}
			}
		}
		if !found {
			out = append(out, fmt.Sprintf("counting index %s on %s is missing", layout.Ident(ci.name), in.l.Table(ci.table)))
		}
	}
	for _, ci := range prefixIndexes(in.l) {
		if t := in.table(ci.table); t == nil || t.keyBytewise() {
			continue
		}
		valid, note := false, ""
		for _, ix := range in.indexes[ci.table] {
			valid = valid || ix.name == ci.name && ix.valid
			if ix.name == ci.name {
				note = ix.unindexedNote()
			}
		}
		if !valid {
			out = append(out, fmt.Sprintf("prefix index %s on %s is missing or INVALID%s (the key column sorts by %s, not bytewise: no-overlap counts read the class)",
				layout.Ident(ci.name), in.l.Table(ci.table), note, in.table(ci.table).keyCollation))
		}
	}
	for _, t := range in.tables {
		if state == Expanded {
			break // the unique rule stands until complete
		}
		for _, ix := range in.indexes[t.name] {
			if ix.unique && !ix.primary && ix.coversKey() {
				what := "unique index"
				if ix.constraint != "" {
					what = "unique constraint"
				}
				out = append(out, fmt.Sprintf("%s %s on %s covers the key again (%s): enqueues over the limit of 1 fail with 23505", what, layout.Ident(ix.name), in.l.Table(t.name), ix.definition))
			}
		}
	}
	for _, rt := range runtimeTables {
		if !in.runtime[rt.name] {
			out = append(out, fmt.Sprintf("runtime table %s is missing", in.l.Table(rt.name)))
		}
	}
	if st := in.l.SkipTable(); st != "" && !in.skipColumn {
		out = append(out, fmt.Sprintf("skip-metadata column %s.%s is missing", in.l.Table(st), layout.Ident(layout.SkipMetadataColumn)))
	}
	if state == Expanded {
		out = append(out, in.versionSchemaDrift()...)
	}
	return append(out, in.access.drift()...)
}

// equivalent returns a valid index on ci's table that counts as well as ours
// would: a btree whose first key columns are (class, key), not a unique
// index covering the key (the cutover drops those), with no
// predicate (a full index counts a partial one's rows as well).
func (in *inspection) equivalent(ci countingIndex) (indexInfo, bool) {
	class := layout.Ident(in.l.ClassColumn)
	keys := []string{layout.Ident(layout.LegacyKeyColumn), layout.Ident(layout.KeyColumn)}
	for _, ix := range in.indexes[ci.table] {
		if ix.name == ci.name || !ix.valid || ix.method != "btree" || ix.unique || len(ix.columns) < 2 {
			continue
		}
		if quoteIfNeeded(ix.columns[0]) != class || !slices.Contains(keys, quoteIfNeeded(ix.columns[1])) {
			continue
		}
		if ix.predicate == "" && !ix.hasExpressionsOrInclude {
			return ix, true
		}
	}
	return indexInfo{}, false
}

// quoteIfNeeded maps pg_get_indexdef's column rendering (quoted only when
// needed) to always-quoted form, for comparison with layout.Ident.
func quoteIfNeeded(col string) string {
	if strings.HasPrefix(col, `"`) {
		return col
	}
	return layout.Ident(col)
}
