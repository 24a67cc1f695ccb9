package migrations

import (
	"context"
	"embed"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/migrate-unique/migrate-unique/internal/qualify"
	"github.com/migrate-unique/migrate-unique/layout"
)

// PlainJobsFiles holds Files(layout.PlainJobs()) as committed in plainjobs/,
// for teams that apply migrations with golang-migrate (see PlainJobsSource).
//
//go:embed plainjobs/*.sql
var PlainJobsFiles embed.FS

// PlainJobsSource is a golang-migrate source driver over PlainJobsFiles.
// Give golang-migrate its own version table (x-migrations-table), so it
// never touches the application's schema_migrations.
func PlainJobsSource() (source.Driver, error) {
	return iofs.New(PlainJobsFiles, "plainjobs")
}

// plainJobsRebuild is plain-jobs' own unique rule as pg_get_indexdef renders
// it after the rename: Files can build it CONCURRENTLY without asking the
// database. A test pins it against what the cutover saves.
const plainJobsRebuild = `CREATE UNIQUE INDEX CONCURRENTLY plainjobs_jobrequest_unique_job_class_key ON public.plainjobs_jobrequest USING btree (job_class, concurrency_key) WHERE ((retry_attempt = 0) AND ((concurrency_key)::text > ''::text))`

const nothingToDo = "-- Nothing to do in this direction.\n"

// Files renders the migration of l as golang-migrate files: file name (for
// example 000003_create_plainjobs_j_uuid_cd8cd3_idx.up.sql) to
// SQL. Every statement that involves CONCURRENTLY is alone in its file;
// nothing uses x-multi-statement or x-statement-timeout. Every file that
// takes an ACCESS EXCLUSIVE lock bounds its wait with a lock_timeout of
// DefaultLockTimeout set inside its own transaction.
//
// For plain-jobs' layout the down files rebuild its unique rule
// CONCURRENTLY. For any other layout the rule is only known from the
// database, so its down file rebuilds the saved rule inside a transaction:
// use FilesFor, which reads the rules from the database and rebuilds them
// CONCURRENTLY, or roll back with Down.
func Files(l layout.Layout) (map[string]string, error) {
	return layoutFiles(l, false)
}

// ExpandFiles is Files for a rolling deploy (docs/migration.md, "`sql` and
// rolling deploys"): the expand phase's files first (the version table, the
// counting indexes, the runtime's tables and the skip-metadata column, the
// version schema and the enqueue lock, ANALYZE, then a file that records
// the expanded state, named expanded), then the complete phase's (the
// cutover, the unique rule, the finish). golang-migrate's goto to the
// expanded file's version stops at the expanded state, both ways.
func ExpandFiles(l layout.Layout) (map[string]string, error) {
	return layoutFiles(l, true)
}

// layoutFiles is Files (expand false) and ExpandFiles (expand true): the
// unique rule a down file rebuilds CONCURRENTLY is known without a
// database for plain-jobs' layout only.
func layoutFiles(l layout.Layout, expand bool) (map[string]string, error) {
	rl, err := l.Resolve()
	if err != nil {
		return nil, err
	}
	var rules []rebuildRule
	if isPlainJobs(rl) {
		rules = []rebuildRule{{comment: "plain-jobs' unique rule", definition: qualify.Must(plainJobsRebuild)}}
	}
	return files(rl, rules, nil, nil, expand)
}

// rebuildRule is a unique rule a down file rebuilds CONCURRENTLY.
type rebuildRule struct {
	index      string // the index's name, for the file's title ("" for the only one)
	comment    string // what the rule is, for the file's first line
	definition string // CREATE UNIQUE INDEX CONCURRENTLY ...
}

// files renders l's migration; rules are the unique rules down rebuilds,
// one file each, or nil when they are only known at run time (one file
// rebuilds what the cutover saved, inside a transaction). prefix are the
// prefix indexes the key column's collation needs (FilesFor knows it;
// Files assumes a bytewise key column). in is the database FilesFor read,
// nil for Files: with it, the files create as the queue's owner and grant
// what up grants.
//
// rolling writes the expand phase's files before the complete phase's
// (ExpandFiles).
func files(l layout.Resolved, rules []rebuildRule, prefix []countingIndex, in *inspection, rolling bool) (map[string]string, error) {
	var acc *access
	if in != nil {
		acc = in.access
	}
	d := newTmplData(l, DefaultLockTimeout)
	files := map[string]string{}
	n := 0
	add := func(title, up, down string) {
		n++
		base := fmt.Sprintf("%06d_%s", n, fileTitle(title))
		files[base+".up.sql"] = up
		files[base+".down.sql"] = down
	}
	var err error
	r := func(name string, d tmplData) string {
		s, rerr := render(name, d)
		if err == nil {
			err = rerr
		}
		return s
	}
	add("version_table", acc.setRoleForVersionTable()+r("version_table.up.sql.tmpl", d), r("version_table.down.sql.tmpl", d))
	counting := countingIndexes(l)
	if isPlainJobs(l) {
		// plain-jobs' 0007 indexes: the uuid ones are built here; the key
		// ones are plain-jobs' 0.37 indexes, renamed by the cutover file
		// (Files assumes plain-jobs 0.37's schema; FilesFor builds one
		// whose 0.37 index it does not find).
		counting = nil
		for _, pi := range plainJobsFileIndexes(in) {
			dd := d
			dd.Index = l.Table(pi.name)
			drop := "-- An invalid leftover of an interrupted build would make the next file fail: drop it first.\n" + r("drop_index.sql.tmpl", dd)
			add("drop_invalid_"+pi.name, drop, nothingToDo)
			create := "-- plain-jobs 0.38's migration 0007 creates this index; built online here.\n" +
				fmt.Sprintf("CREATE INDEX CONCURRENTLY %s ON %s (%s);\n", layout.Ident(pi.name), l.Table(pi.table), pi.columnsWith(layout.LegacyKeyColumn))
			add("create_"+pi.name, create, r("drop_index.sql.tmpl", dd))
		}
	}
	for _, ci := range append(counting, prefix...) {
		dd := d
		dd.Index = l.Table(ci.name)
		drop := "-- An invalid leftover of an interrupted build would make the next file fail: drop it first.\n" + r("drop_index.sql.tmpl", dd)
		add("drop_invalid_"+ci.name, drop, nothingToDo)
		create, cerr := ci.createSQL(l, layout.LegacyKeyColumn)
		if cerr != nil {
			return nil, cerr
		}
		if ci.prefix {
			create = "-- The key column does not sort bytewise: a no-overlap count compares the key's prefix with COLLATE \"C\", a range of this index.\n" + create
		}
		add("create_"+ci.name, create, r("drop_index.sql.tmpl", dd))
	}
	runtimeFiles := func() {
		add("runtime_tables", acc.setRole()+r("runtime.up.sql.tmpl", d)+acc.resetRole()+acc.grantSQL(false), r("runtime.down.sql.tmpl", d))
		if d.SkipTable != "" {
			add("skip_column", r("skip_column.up.sql.tmpl", d)+acc.grantSQL(true), "-- The skip-metadata column is dropped with the runtime tables, unless it holds skip records.\n")
		}
	}
	cutUp, cutDown := r("cutover.up.sql.tmpl", d), r("cutover.down.sql.tmpl", d)
	if rolling {
		vs := DefaultVersionSchema(l.Schema)
		runtimeFiles()
		add("version_schema", versionSchemaFileSQL(l, vs), versionSchemaDropFileSQL(l, vs))
		add("enqueue_lock", fileLockTimeout(enqueueLockCreateSQL(l, vs)), fileLockTimeout(enqueueLockDropTriggerSQL(l)+fmt.Sprintf("DROP FUNCTION IF EXISTS %s();\n", enqueueLockFunction(vs))))
		add("analyze", r("analyze.up.sql.tmpl", d), nothingToDo)
		add("expanded", fmt.Sprintf("-- The expanded state: deploy the new version, then apply the next files once no old version runs.\nUPDATE %s SET state = 'expanded', updated_at = pg_catalog.now() WHERE layout = %s;\n", l.Table(layout.VersionTable), layout.Literal(layoutID(l))),
			fmt.Sprintf("UPDATE %s SET state = 'rolling back', updated_at = pg_catalog.now() WHERE layout = %s;\n", l.Table(layout.VersionTable), layout.Literal(layoutID(l))))
		// The cutover drops the enqueue lock's trigger (it reads the
		// renamed column); the cutover back makes it again, and records
		// the expanded state.
		cutUp += enqueueLockDropTriggerSQL(l)
		cutDown += enqueueLockCreateSQL(l, vs) + fmt.Sprintf("UPDATE %s SET state = 'expanded', updated_at = pg_catalog.now() WHERE layout = %s;\n", l.Table(layout.VersionTable), layout.Literal(layoutID(l)))
	}
	add("cutover", cutUp, cutDown)
	switch {
	case rules == nil:
		add("unique_rule", nothingToDo, r("rebuild_saved.down.sql.tmpl", d))
	case len(rules) == 0:
		add("unique_rule", nothingToDo, "-- No unique rule covered the key when these files were written: nothing to rebuild.\n")
	}
	for _, rule := range rules {
		dd := d
		dd.Definition = rule.definition
		title := "unique_rule"
		if len(rules) > 1 {
			title += "_" + rule.index
		}
		add(title, nothingToDo, "-- "+rule.comment+", rebuilt online before the cutover back attaches it.\n"+r("rebuild.down.sql.tmpl", dd))
	}
	if !rolling {
		runtimeFiles()
		add("analyze", r("analyze.up.sql.tmpl", d), nothingToDo)
	}
	add("duplicate_check", nothingToDo, r("duplicates.down.sql.tmpl", d))
	add("finish", r("finish.up.sql.tmpl", d), nothingToDo)
	if err != nil {
		return nil, err
	}
	return files, nil
}

// FilesFor is Files for the layout as it stands in the database at
// databaseURL, which it only reads: the down files rebuild every unique
// rule that covers the key CONCURRENTLY, one file each, for any layout.
// After the cutover the rules are the ones it saved; before it, the ones the
// catalog shows, rendered as the cutover will save them (with the key column
// renamed). The files hold that snapshot: if a unique rule on the key is
// added or dropped before up runs, write them again (the cutover back
// refuses to finish while a saved rule is not rebuilt). Like Up (Down, once
// migrated) it refuses, with a *PreflightError, while an object around the
// queue would break (see docs/migration.md, "What up checks around the
// queue").
func FilesFor(ctx context.Context, databaseURL string, l layout.Layout) (map[string]string, error) {
	return filesFor(ctx, databaseURL, l, false)
}

// ExpandFilesFor is FilesFor for a rolling deploy, in ExpandFiles' order.
func ExpandFilesFor(ctx context.Context, databaseURL string, l layout.Layout) (map[string]string, error) {
	return filesFor(ctx, databaseURL, l, true)
}

func filesFor(ctx context.Context, databaseURL string, l layout.Layout, rolling bool) (map[string]string, error) {
	r, err := newRunner(ctx, databaseURL, l, Options{}, "sql")
	if err != nil {
		return nil, err
	}
	defer r.close()
	in, _, err := r.preflight(ctx, "sql")
	if err != nil {
		return nil, err
	}
	// The files will run what up (or, once migrated, down) runs: refuse
	// what those would refuse over, around the queue.
	direction := "up"
	if in.state() == Migrated {
		direction = "down"
	}
	if deps, err := r.dependentFindings(ctx, in, direction); err != nil {
		return nil, err
	} else if hasFatal(deps) {
		return nil, &PreflightError{Findings: deps}
	}
	if fs := in.partitionedForFiles(); len(fs) > 0 {
		return nil, &PreflightError{Findings: fs}
	}
	rules := []rebuildRule{}
	if in.version != nil && len(in.version.saved) > 0 {
		for _, s := range in.version.saved {
			def, err := s.concurrentRebuild(newTmplData(r.l, 0).VersionTable)
			if err != nil {
				return nil, err
			}
			rules = append(rules, rebuildRule{index: s.Index, comment: "The unique rule " + s.Index + " the cutover saved", definition: def})
		}
	} else {
		for _, t := range in.tables {
			for _, ix := range in.indexes[t.name] {
				if !ix.unique || ix.primary || !ix.coversKey() {
					continue
				}
				def, err := renameKeyInIndexDef(ix.definition)
				if err != nil {
					return nil, fmt.Errorf("unique rule %s on %s: %w", layout.Ident(ix.name), r.l.Table(t.name), err)
				}
				create, err := concurrentUnique(def)
				if err != nil {
					return nil, fmt.Errorf("%w: unique rule %s on %s (%q) %v", ErrSavedRule, layout.Ident(ix.name), r.l.Table(t.name), ix.definition, err)
				}
				rules = append(rules, rebuildRule{index: ix.name, comment: "The unique rule " + ix.name + " as the cutover will save it", definition: create})
			}
		}
	}
	// One order before and after the cutover, whatever the catalog's.
	slices.SortFunc(rules, func(a, b rebuildRule) int { return strings.Compare(a.index, b.index) })
	var prefix []countingIndex
	for _, ci := range prefixIndexes(r.l) {
		if t := in.table(ci.table); t != nil && !t.keyBytewise() {
			prefix = append(prefix, ci)
		}
	}
	return files(r.l, rules, prefix, in, rolling)
}

// renameKeyInIndexDef turns a unique index's pg_get_indexdef, read before
// the cutover, into the part after "CREATE UNIQUE INDEX " of what the
// cutover saves after renaming the key column: every reference to
// unique_key in the key columns, INCLUDE list and predicate becomes
// concurrency_key. The name, table and tablespace are left alone, and so
// are string literals and quoted names of anything else.
func renameKeyInIndexDef(def string) (string, error) {
	rest, ok := strings.CutPrefix(def, "CREATE UNIQUE INDEX ")
	if !ok {
		return "", fmt.Errorf("not a unique index: %q", def)
	}
	// The header (name ON [ONLY] table) ends at the first USING outside
	// double quotes; only the part after it names columns.
	using := -1
	for i, quoted := 0, false; i < len(rest); i++ {
		if rest[i] == '"' {
			quoted = !quoted
		} else if !quoted && strings.HasPrefix(rest[i:], " USING ") {
			using = i
			break
		}
	}
	if using < 0 {
		return "", fmt.Errorf("no USING clause in %q", def)
	}
	var b strings.Builder
	b.WriteString(rest[:using])
	tail := rest[using:]
	prevWord := ""
	for i := 0; i < len(tail); {
		c := tail[i]
		switch {
		case c == '\'':
			j := i + 1
			for j < len(tail) && (tail[j] != '\'' || (j+1 < len(tail) && tail[j+1] == '\'')) {
				if tail[j] == '\'' {
					j++
				}
				j++
			}
			b.WriteString(tail[i:min(j+1, len(tail))])
			i = j + 1
			continue
		case c == '"' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j, name := i, ""
			if c == '"' {
				j++
				for j < len(tail) && (tail[j] != '"' || (j+1 < len(tail) && tail[j+1] == '"')) {
					if tail[j] == '"' {
						j++
					}
					j++
				}
				j++
				name = strings.ReplaceAll(tail[i+1:min(j-1, len(tail))], `""`, `"`)
			} else {
				for j < len(tail) && (tail[j] == '_' || tail[j] == '$' || tail[j] >= 'a' && tail[j] <= 'z' || tail[j] >= 'A' && tail[j] <= 'Z' || tail[j] >= '0' && tail[j] <= '9') {
					j++
				}
				name = tail[i:j]
			}
			j = min(j, len(tail))
			qualified := i > 0 && tail[i-1] == '.' || j < len(tail) && tail[j] == '.'
			isType := i >= 2 && tail[i-2:i] == "::"
			if name == layout.LegacyKeyColumn && !qualified && !isType && prevWord != "TABLESPACE" {
				b.WriteString(layout.KeyColumn)
			} else {
				b.WriteString(tail[i:j])
			}
			prevWord = tail[i:j]
			i = j
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String(), nil
}

var unsafeTitle = regexp.MustCompile(`[^a-z0-9_]+`)

func fileTitle(s string) string {
	return strings.Trim(unsafeTitle.ReplaceAllString(strings.ToLower(s), "_"), "_")
}

// isPlainJobs reports plain-jobs' own layout, whose unique rule is known.
func isPlainJobs(l layout.Resolved) bool {
	pj := layout.PlainJobs()
	return l.Schema == pj.Schema && l.ClassColumn == pj.ClassColumn && l.RequestsTable == pj.RequestsTable &&
		l.ProcessesTable == pj.ProcessesTable && l.ResultsTable == pj.ResultsTable && !l.SingleTable()
}

// fileLockTimeout opens a file that locks a queue table: the pinned
// search_path and DefaultLockTimeout, for its own transaction.
func fileLockTimeout(sql string) string {
	return fmt.Sprintf("SET LOCAL search_path = pg_catalog, pg_temp;\nSELECT pg_catalog.set_config('lock_timeout', '%dms', true);\n", DefaultLockTimeout.Milliseconds()) + sql
}

// versionSchemaFileSQL makes the version schema vs of l in a file that
// knows nothing of the database it will run in: the views' columns (every
// column of the table, in order, unique_key shown as concurrency_key) and
// the grants mirrored from the tables (table and column level SELECT,
// INSERT, UPDATE, DELETE, and USAGE on the schema) are read from the catalog
// when the file runs. The check up --expand makes before it (row-level
// security before PostgreSQL 15) is not made.
func versionSchemaFileSQL(l layout.Resolved, vs string) string {
	tables := make([]string, 0, 3)
	for _, t := range l.Tables() {
		tables = append(tables, layout.Literal(t))
	}
	return fmt.Sprintf(`-- The version schema: one view per queue table with the new column names, for the new version's own SQL
-- (search_path = %[1]s, %[2]s). Columns and grants are read from the catalog when this file runs.
SET LOCAL search_path = pg_catalog, pg_temp;
CREATE SCHEMA IF NOT EXISTS %[1]s;
COMMENT ON SCHEMA %[1]s IS %[3]s;
DO $migrate_unique$
DECLARE
    t pg_catalog.text;
    rel pg_catalog.regclass;
    cols pg_catalog.text;
    g record;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    FOREACH t IN ARRAY ARRAY[%[4]s]::pg_catalog.text[] LOOP
        rel := pg_catalog.format('%%I.%%I', %[5]s, t)::pg_catalog.regclass;
        SELECT pg_catalog.string_agg(CASE WHEN a.attname OPERATOR(pg_catalog.=) %[6]s THEN pg_catalog.quote_ident(a.attname) OPERATOR(pg_catalog.||) ' AS ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(%[7]s) ELSE pg_catalog.quote_ident(a.attname) END, ', ' ORDER BY a.attnum)
          INTO cols FROM pg_catalog.pg_attribute a WHERE a.attrelid OPERATOR(pg_catalog.=) rel AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped;
        EXECUTE pg_catalog.format('CREATE OR REPLACE VIEW %%I.%%I%%s AS SELECT %%s FROM %%s', %[8]s, t,
            CASE WHEN pg_catalog.current_setting('server_version_num')::pg_catalog.int4 OPERATOR(pg_catalog.>=) 150000 THEN ' WITH (security_invoker = true)' ELSE '' END, cols, rel);
        FOR g IN SELECT ''::pg_catalog.text AS col, a.privilege_type, a.grantee FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
                 WHERE c.oid OPERATOR(pg_catalog.=) rel AND a.grantee OPERATOR(pg_catalog.<>) c.relowner AND a.privilege_type OPERATOR(pg_catalog.=) ANY (ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE'])
                 UNION ALL
                 SELECT CASE WHEN att.attname OPERATOR(pg_catalog.=) %[6]s THEN %[7]s ELSE att.attname::pg_catalog.text END, a.privilege_type, a.grantee
                 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_attribute att ON att.attrelid OPERATOR(pg_catalog.=) c.oid, pg_catalog.aclexplode(att.attacl) a
                 WHERE c.oid OPERATOR(pg_catalog.=) rel AND att.attnum OPERATOR(pg_catalog.>) 0 AND NOT att.attisdropped AND att.attacl IS NOT NULL
                   AND a.grantee OPERATOR(pg_catalog.<>) c.relowner AND a.privilege_type OPERATOR(pg_catalog.=) ANY (ARRAY['SELECT', 'INSERT', 'UPDATE'])
        LOOP
            EXECUTE pg_catalog.format('GRANT %%s%%s ON TABLE %%I.%%I TO %%s', g.privilege_type,
                CASE WHEN g.col OPERATOR(pg_catalog.=) '' THEN '' ELSE pg_catalog.format(' (%%I)', g.col) END, %[8]s, t,
                CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END);
            EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA %%I TO %%s', %[8]s,
                CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END);
        END LOOP;
    END LOOP;
END
$migrate_unique$;
UPDATE %[9]s SET version_schema = %[10]s, updated_at = pg_catalog.now() WHERE layout = %[11]s;
`, layout.Ident(vs), layout.Ident(l.Schema),
		layout.Literal(versionSchemaComment+": views of the queue tables of schema "+l.Schema+" with the new column names (sql --expand files); the new application version reads them with search_path = "+vs+", "+l.Schema+"; the down file drops it"),
		strings.Join(tables, ", "), layout.Literal(l.Schema), layout.Literal(layout.LegacyKeyColumn), layout.Literal(layout.KeyColumn), layout.Literal(vs),
		l.Table(layout.VersionTable), layout.Literal(vs), layout.Literal(layoutID(l)))
}

// versionSchemaDropFileSQL is the version schema file's down: the views,
// the schema once nothing else is in it, and its record.
func versionSchemaDropFileSQL(l layout.Resolved, vs string) string {
	views := make([]string, 0, 3)
	for _, t := range l.Tables() {
		views = append(views, layout.Qualified(vs, t))
	}
	return fmt.Sprintf(`SET LOCAL search_path = pg_catalog, pg_temp;
DROP VIEW IF EXISTS %s;
DO $migrate_unique$
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) d.refobjid
                   WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass AND n.nspname OPERATOR(pg_catalog.=) %s) THEN
        DROP SCHEMA IF EXISTS %s;
    END IF;
END
$migrate_unique$;
UPDATE %s SET version_schema = NULL, updated_at = pg_catalog.now() WHERE layout = %s;
`, strings.Join(views, ", "), layout.Literal(vs), layout.Ident(vs), l.Table(layout.VersionTable), layout.Literal(layoutID(l)))
}
