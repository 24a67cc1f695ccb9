package migrations

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/version"
	"github.com/migrate-unique/migrate-unique/layout"
)

// Rolling deploys (SPEC section 7, docs/migration.md "Rolling deploys"):
// up --expand makes only the changes the old application version lives
// with, and a version schema of views that show the new column names over
// the unchanged tables, for new-version code that names concurrency_key in
// its own SQL (with search_path = <version schema>, <queue schema>). up on
// an expanded layout completes it (the cutover); up --contract drops the
// version schema once no instance of the new version reads it.

// DefaultVersionSchema is the version schema up --expand creates for a
// queue in schema when Options.VersionSchema is empty: "<schema>_concurrency".
func DefaultVersionSchema(schema string) string { return schema + "_concurrency" }

// completePhase names the steps of up on an expanded layout in the intent
// it records (and the steps of plan from the cutover on).
const completePhase = "complete"

// versionSchemaComment marks a schema as a version schema of this tool: a
// schema of that name without it is someone else's and is never touched.
const versionSchemaComment = "migrate-unique version schema"

// versionSchemaInfo is what the catalog says about the version schema.
type versionSchemaInfo struct {
	name string
	// exists and ours: the schema exists and carries our comment; owner
	// is its owner, quoted.
	exists, ours bool
	owner        string
	// views lists the queue tables whose view exists in the schema.
	views map[string]bool
	// grants are the GRANTs the schema and its views lack: the queue
	// tables' privileges, mirrored.
	grants []string
	// userCreates and ownerCreates: the connected role and the queue's
	// owner may create schemas in the database.
	userCreates, ownerCreates bool
	// others lists objects in the schema that are not views of the layout.
	others []string
	// enqueueLock says the enqueue lock trigger exists (enqueuelock.go).
	enqueueLock bool
}

// asCreator says the schema and its views are made as the queue's owner
// (SET LOCAL ROLE), as up makes its tables, so that every member of the
// owner can drop them: when the owner may create schemas, or owns the
// schema already. Otherwise they are made as the connected role.
func (vs *versionSchemaInfo) asCreator(in *inspection) bool {
	if in.access == nil || in.access.creator == "" {
		return false
	}
	if vs.exists {
		return vs.owner == in.access.creator
	}
	return vs.ownerCreates
}

// viewPrivileges are the privileges mirrored from a queue table onto its
// view (TRUNCATE, REFERENCES and TRIGGER do not apply to a view).
var viewPrivileges = []string{"SELECT", "INSERT", "UPDATE", "DELETE"}

// readVersionSchema reads the version schema called name.
func readVersionSchema(ctx context.Context, q querier, in *inspection, name string) (*versionSchemaInfo, error) {
	vs := &versionSchemaInfo{name: name, views: map[string]bool{}}
	l := in.l
	var comment string
	err := q.QueryRow(ctx, `SELECT coalesce(pg_catalog.obj_description(n.oid, 'pg_namespace'), ''), pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(n.nspowner))
FROM pg_catalog.pg_namespace n WHERE n.nspname = $1`, name).Scan(&comment, &vs.owner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("read the version schema %s: %w", layout.Ident(name), err)
	default:
		vs.exists, vs.ours = true, strings.HasPrefix(comment, versionSchemaComment)
	}
	// NULL when there is no table: to_regclass('') is an error ("invalid
	// name syntax").
	var owner any
	if len(in.tables) > 0 && in.tables[0].exists {
		owner = l.Table(in.tables[0].name)
	}
	if err := q.QueryRow(ctx, `SELECT pg_catalog.has_database_privilege(pg_catalog.current_database(), 'CREATE'),
       coalesce((SELECT pg_catalog.has_database_privilege(c.relowner, pg_catalog.current_database(), 'CREATE') FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass($1)), false)`, owner).
		Scan(&vs.userCreates, &vs.ownerCreates); err != nil {
		return nil, fmt.Errorf("read the right to create schemas: %w", err)
	}
	if vs.exists {
		rows, err := q.Query(ctx, `SELECT c.relname::text, c.relkind::text FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind NOT IN ('i', 'S', 'c', 't') ORDER BY 1`, name)
		if err != nil {
			return nil, fmt.Errorf("read the version schema %s: %w", layout.Ident(name), err)
		}
		for rows.Next() {
			var rel, kind string
			if err := rows.Scan(&rel, &kind); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read the version schema %s: %w", layout.Ident(name), err)
			}
			if kind == "v" && slices.Contains(l.Tables(), rel) {
				vs.views[rel] = true
			} else {
				vs.others = append(vs.others, layout.Qualified(name, rel))
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read the version schema %s: %w", layout.Ident(name), err)
		}
	}
	if vs.grants, err = missingViewGrants(ctx, q, in, vs); err != nil {
		return nil, err
	}
	if t := in.table(enqueueLockTable(l)); t != nil && t.exists {
		if vs.enqueueLock, err = readEnqueueLock(ctx, q, l); err != nil {
			return nil, err
		}
	}
	return vs, nil
}

// aclQuery lists the privileges (table and column level) that roles other
// than the owner hold on the relations of schema $1 named in $2 of kinds
// $3, without grant options: relation, column ("" for the table), grantee
// (quoted, or PUBLIC), privilege.
const aclQuery = `WITH r AS (
    SELECT c.oid, c.relname, c.relowner, c.relacl FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND c.relname = ANY ($2) AND c.relkind = ANY ($3::"char"[])
)
SELECT r.relname::text, ''::text, a.grantee, a.privilege_type FROM r, pg_catalog.aclexplode(r.relacl) a WHERE a.grantee <> r.relowner
UNION ALL
SELECT r.relname::text, att.attname::text, a.grantee, a.privilege_type FROM r
JOIN pg_catalog.pg_attribute att ON att.attrelid = r.oid AND att.attnum > 0 AND NOT att.attisdropped AND att.attacl IS NOT NULL,
pg_catalog.aclexplode(att.attacl) a WHERE a.grantee <> r.relowner`

type aclEntry struct{ rel, column, grantee, privilege string }

func readACL(ctx context.Context, q querier, schema string, rels []string, kinds []string) ([]aclEntry, error) {
	rows, err := q.Query(ctx, `SELECT e.rel, e.col, CASE WHEN e.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(e.grantee)) END, e.privilege_type
FROM (`+aclQuery+`) AS e(rel, col, grantee, privilege_type) ORDER BY 1, 2, 3, 4`, schema, rels, kinds)
	if err != nil {
		return nil, fmt.Errorf("read the privileges on %s: %w", layout.Ident(schema), err)
	}
	defer rows.Close()
	var out []aclEntry
	for rows.Next() {
		var e aclEntry
		if err := rows.Scan(&e.rel, &e.column, &e.grantee, &e.privilege); err != nil {
			return nil, fmt.Errorf("read the privileges on %s: %w", layout.Ident(schema), err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// missingViewGrants mirrors the queue tables' privileges onto their views
// (the key column's under its new name) and USAGE on the schema to every
// role that holds one, and returns the GRANTs not in place yet.
func missingViewGrants(ctx context.Context, q querier, in *inspection, vs *versionSchemaInfo) ([]string, error) {
	l := in.l
	if !in.schemaExists {
		return nil, nil
	}
	tableACL, err := readACL(ctx, q, l.Schema, l.Tables(), []string{"r", "p"})
	if err != nil {
		return nil, err
	}
	var viewACL []aclEntry
	usage := map[string]bool{}
	viewOwner := ""
	if in.access != nil {
		viewOwner = in.access.user
		if vs.asCreator(in) {
			viewOwner = in.access.creator
		}
	}
	if vs.exists {
		if viewACL, err = readACL(ctx, q, vs.name, l.Tables(), []string{"v"}); err != nil {
			return nil, err
		}
		rows, err := q.Query(ctx, `SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END
FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a WHERE n.nspname = $1 AND a.privilege_type = 'USAGE'
UNION ALL SELECT pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(n.nspowner)) FROM pg_catalog.pg_namespace n WHERE n.nspname = $1`, vs.name)
		if err != nil {
			return nil, fmt.Errorf("read the privileges on %s: %w", layout.Ident(vs.name), err)
		}
		for rows.Next() {
			var g string
			if err := rows.Scan(&g); err != nil {
				rows.Close()
				return nil, err
			}
			usage[g] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	have := map[aclEntry]bool{}
	for _, e := range viewACL {
		have[e] = true
	}
	var out []string
	var grantees []string
	for _, e := range tableACL {
		if !slices.Contains(viewPrivileges, e.privilege) || e.column != "" && e.privilege == "DELETE" || e.grantee == viewOwner {
			continue
		}
		if e.column == layout.LegacyKeyColumn {
			e.column = layout.KeyColumn
		}
		if !slices.Contains(grantees, e.grantee) {
			grantees = append(grantees, e.grantee)
		}
		if have[e] {
			continue
		}
		col := ""
		if e.column != "" {
			col = " (" + layout.Ident(e.column) + ")"
		}
		out = append(out, fmt.Sprintf("GRANT %s%s ON TABLE %s TO %s;", e.privilege, col, layout.Qualified(vs.name, e.rel), e.grantee))
	}
	var usages []string
	for _, g := range grantees {
		if !usage[g] {
			usages = append(usages, fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s;", layout.Ident(vs.name), g))
		}
	}
	return append(usages, out...), nil
}

// inspect is inspect under the run's options: the version schema it reads
// is the one the run names (Options.VersionSchema) when the layout has none
// recorded.
func (r *runner) inspect(ctx context.Context) (*inspection, error) {
	in, err := inspect(ctx, r.conn, r.l)
	if err != nil {
		return nil, err
	}
	if name := r.opts.VersionSchema; name != "" && name != in.vs.name && (in.version == nil || in.version.versionSchema == "") {
		if in.vs, err = readVersionSchema(ctx, r.conn, in, name); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// expanding reports whether up with opts runs the expand phase: --expand
// on a layout whose cutover is still to do.
func expanding(in *inspection, opts Options) bool {
	return opts.Expand && in.needsCutover()
}

// versionSchemaFindings are the preflight's findings about the version
// schema for up (expand, complete) and down.
func (r *runner) versionSchemaFindings(ctx context.Context, in *inspection, direction string) ([]Finding, error) {
	var fs []Finding
	vs := in.vs
	if vs == nil {
		return nil, nil
	}
	recorded := ""
	if in.version != nil {
		recorded = in.version.versionSchema
	}
	if direction == "up" && r.opts.VersionSchema != "" && recorded != "" && r.opts.VersionSchema != recorded {
		fs = append(fs, Finding{Fatal: true, Kind: "version_schema", Object: layout.Ident(recorded), Message: fmt.Sprintf("this layout's version schema is %s (made by an earlier up --expand), not %s: leave --version-schema out, or run down first", layout.Ident(recorded), layout.Ident(r.opts.VersionSchema))})
		return fs, nil
	}
	if direction == "up" && expanding(in, r.opts) || direction == "down" && r.opts.ToExpanded && in.state() != Expanded {
		switch {
		case len(vs.name) > 63:
			fs = append(fs, Finding{Fatal: true, Kind: "version_schema", Object: vs.name, Action: "give --version-schema", Message: fmt.Sprintf("the version schema's name %q is longer than PostgreSQL's 63 bytes: name it with --version-schema", vs.name)})
		case vs.exists && !vs.ours:
			fs = append(fs, Finding{Fatal: true, Kind: "version_schema", Object: layout.Ident(vs.name), Action: "give --version-schema", Message: fmt.Sprintf("schema %s exists and is not a version schema of migrate-unique (it lacks its comment); up --expand never touches another's schema: name another with --version-schema", layout.Ident(vs.name))})
		case !vs.exists && !vs.userCreates && !vs.ownerCreates:
			who := in.access.user
			fs = append(fs, Finding{Fatal: true, Kind: "schema_create", Object: layout.Ident(vs.name), Action: "GRANT CREATE ON DATABASE <db> TO " + who, Message: fmt.Sprintf("role %s cannot create schemas in this database, and up --expand creates the version schema %s. An administrator runs: GRANT CREATE ON DATABASE <this database> TO %s (or creates the schema with COMMENT ON SCHEMA %s IS '%s' and grants %s CREATE on it)", who, layout.Ident(vs.name), who, layout.Ident(vs.name), versionSchemaComment, who)})
		}
		if in.serverVersion < 150000 {
			for _, t := range in.tables {
				if t.rowSecurity {
					fs = append(fs, Finding{Fatal: true, Kind: "row_security", Object: in.l.Table(t.name), Message: fmt.Sprintf("table %s has row-level security, and before PostgreSQL 15 a view reads its table with its owner's rights (no security_invoker): the version schema's view would show every row to every role it is granted to. Use PostgreSQL 15 or later for a rolling deploy, or migrate in one run with up", in.l.Table(t.name))})
				}
			}
		}
	}
	if direction == "up" && !r.opts.Expand && !r.opts.Contract && in.needsCutover() && recorded != "" {
		writers, err := r.oldVersionWriters(ctx, in)
		if err != nil {
			return nil, err
		}
		for i := range writers {
			if r.opts.Force && writers[i].Kind == "old_version_writing" {
				// Named still, as a note: the run goes ahead.
				writers[i].Fatal = false
				writers[i].Message += " (--force: completing anyway)"
			}
		}
		fs = append(fs, writers...)
	}
	return fs, nil
}

// versionSchemaStep creates the version schema (when missing), the views
// that are missing and the GRANTs not in place, and records the schema's
// name in the version table, in one transaction that takes no lock on the
// queue's tables beyond reading their definitions.
func versionSchemaStep(in *inspection) step {
	l := in.l
	vs := in.vs
	var views []string
	for _, t := range l.Tables() {
		views = append(views, layout.Qualified(vs.name, t))
	}
	s := step{name: "version schema " + layout.Ident(vs.name) + ": one view per queue table showing " + layout.LegacyKeyColumn + " as " + layout.KeyColumn + ", with the tables' grants",
		table: strings.Join(views, ", "), lock: "none on the queue (reads the tables' definitions)", kind: stepTx}
	var b strings.Builder
	missing := !vs.exists
	for _, t := range l.Tables() {
		missing = missing || !vs.views[t]
	}
	if missing {
		if vs.asCreator(in) {
			b.WriteString(in.access.setRole())
		}
		if !vs.exists {
			fmt.Fprintf(&b, "CREATE SCHEMA IF NOT EXISTS %s;\n", layout.Ident(vs.name))
			fmt.Fprintf(&b, "COMMENT ON SCHEMA %s IS %s;\n", layout.Ident(vs.name), layout.Literal(versionSchemaComment+": views of the queue tables of schema "+l.Schema+" with the new column names (up --expand); the new application version reads them with search_path = "+vs.name+", "+l.Schema+"; up --contract or down drops it"))
		}
		with := ""
		if in.serverVersion >= 150000 {
			// Every privilege and row-level security check is the caller's,
			// as on the table itself.
			with = " WITH (security_invoker = true)"
		}
		for _, tn := range l.Tables() {
			if vs.views[tn] {
				continue
			}
			t := in.table(tn)
			cols := make([]string, 0, len(t.order))
			for _, c := range t.order {
				if c == layout.LegacyKeyColumn {
					cols = append(cols, layout.Ident(c)+" AS "+layout.Ident(layout.KeyColumn))
				} else {
					cols = append(cols, layout.Ident(c))
				}
			}
			fmt.Fprintf(&b, "CREATE OR REPLACE VIEW %s%s AS SELECT %s FROM %s;\n", layout.Qualified(vs.name, tn), with, strings.Join(cols, ", "), l.Table(tn))
		}
		if vs.asCreator(in) {
			b.WriteString(in.access.resetRole())
		}
	}
	if len(vs.grants) > 0 {
		b.WriteString("-- Every role that uses the queue's tables can use their views (mirrored from their privileges).\n")
		b.WriteString(strings.Join(vs.grants, "\n") + "\n")
	}
	if b.Len() == 0 {
		s.skip = "already created"
		return s
	}
	fmt.Fprintf(&b, "UPDATE %s SET version_schema = %s, updated_at = pg_catalog.now() WHERE layout = %s;\n", l.Table(layout.VersionTable), layout.Literal(vs.name), layout.Literal(layoutID(l)))
	s.sql = b.String()
	return s
}

// versionSchemaDropStep drops the layout's views from the version schema,
// the schema once nothing else is in it, and forgets it in the version
// table. DROP VIEW locks the views only, never their tables; it waits for
// statements that read a view (lock_timeout bounded, retried).
func versionSchemaDropStep(in *inspection, why string) step {
	l := in.l
	vs := in.vs
	s := step{name: "drop the version schema " + layout.Ident(vs.name) + why, lock: "ACCESS EXCLUSIVE on its views only (none on the queue)", kind: stepTx}
	var views []string
	for _, t := range l.Tables() {
		if vs.views[t] {
			views = append(views, layout.Qualified(vs.name, t))
		}
	}
	s.table = strings.Join(views, ", ")
	if !vs.exists || !vs.ours {
		s.skip = "no version schema"
		if in.version == nil || in.version.versionSchema == "" {
			return s
		}
		// Recorded, but gone: only forget it.
		s.skip = ""
	}
	var b strings.Builder
	if len(views) > 0 {
		s.dropViews = views
		fmt.Fprintf(&b, "DROP VIEW IF EXISTS %s;\n", strings.Join(views, ", "))
	}
	if vs.exists && vs.ours {
		// The enqueue lock's function (its trigger is gone: dropped by
		// the cutover, or by the step before this one).
		fmt.Fprintf(&b, "DROP FUNCTION IF EXISTS %s();\n", enqueueLockFunction(vs.name))
		fmt.Fprintf(&b, `DO $migrate_unique$
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    -- Another layout's views may share the schema: drop it once empty.
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_namespace n ON n.oid = d.refobjid
                   WHERE d.refclassid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND n.nspname = %s) THEN
        DROP SCHEMA IF EXISTS %s;
    END IF;
END
$migrate_unique$;
`, layout.Literal(vs.name), layout.Ident(vs.name))
	}
	if in.versionTable {
		fmt.Fprintf(&b, "UPDATE %s SET version_schema = NULL, updated_at = pg_catalog.now() WHERE layout = %s;\n", l.Table(layout.VersionTable), layout.Literal(layoutID(l)))
	}
	s.sql = b.String()
	return s
}

// expandSteps are the steps of up --expand: up's own steps up to the
// cutover (the version table, the index builds), the runtime's tables and
// the skip-metadata column, then the version schema, ANALYZE, and the
// record of the expanded state.
func expandSteps(in *inspection, all []step) []step {
	var out []step
	for _, s := range all {
		switch s.phase {
		case phaseComplete:
			continue
		case phaseAnalyze:
			out = append(out, versionSchemaStep(in), enqueueLockStep(in), s)
		case phaseFinish:
			out = append(out, recordExpandedStep(in))
		default:
			out = append(out, s)
		}
	}
	return out
}

// versionSchemaDrift lists what an expanded layout's version schema lacks:
// the schema, a view, a grant (up --expand repairs each).
func (in *inspection) versionSchemaDrift() []string {
	vs := in.vs
	if vs == nil {
		return nil
	}
	if !vs.exists {
		return []string{fmt.Sprintf("version schema %s is missing", layout.Ident(vs.name))}
	}
	var out []string
	for _, t := range in.l.Tables() {
		if !vs.views[t] {
			out = append(out, fmt.Sprintf("view %s of %s is missing", layout.Qualified(vs.name, t), in.l.Table(t)))
		}
	}
	for _, g := range vs.grants {
		out = append(out, "the version schema lacks "+strings.TrimSuffix(g, ";"))
	}
	if !vs.enqueueLock {
		out = append(out, fmt.Sprintf("the enqueue lock trigger %s on %s is missing", layout.Ident(enqueueLockName), in.l.Table(enqueueLockTable(in.l))))
	}
	return out
}

// recordExpandedStep records the expanded state, the last step of up
// --expand and of down --to-expanded.
func recordExpandedStep(in *inspection) step {
	return step{name: "record expanded", table: in.l.Table(layout.VersionTable), lock: "none on the queue", kind: stepTx, phase: phaseFinish,
		sql: fmt.Sprintf("UPDATE %s SET state = 'expanded', tool_version = %s, updated_at = pg_catalog.now(), step = NULL, step_started_at = NULL WHERE layout = %s;\n",
			in.l.Table(layout.VersionTable), layout.Literal(version.Version), layout.Literal(layoutID(in.l)))}
}

// expandedNothingToDo reports an expanded layout that up --expand has
// nothing to add to: every step but the bookkeeping is skipped.
func expandedNothingToDo(in *inspection, steps []step) bool {
	if in.state() != Expanded {
		return false
	}
	for _, s := range steps {
		if s.skip == "" && !s.createsVersionTable && s.phase != phaseAnalyze && s.phase != phaseFinish {
			return false
		}
	}
	return true
}

// oldVersionWriters lists, for complete, the sessions of the old
// application version: sessions of this database whose last statement
// names unique_key and one of the queue's tables, without compat's marker
// (layout.CompatMarker) and not of this tool, and every session whose
// application_name is Options.OldAppName. Completing renames the column:
// their next such statement would fail (42703).
func (r *runner) oldVersionWriters(ctx context.Context, in *inspection) ([]Finding, error) {
	rows, err := r.conn.Query(ctx, `SELECT a.pid, coalesce(a.application_name, ''), coalesce(a.usename::text, ''),
       coalesce(pg_catalog.host(a.client_addr), 'local socket'), coalesce(a.state, ''),
       coalesce(EXTRACT(epoch FROM pg_catalog.now() OPERATOR(pg_catalog.-) a.query_start), 0)::float8, pg_catalog.left(coalesce(a.query, ''), 200)
FROM pg_catalog.pg_stat_activity a
WHERE a.datname OPERATOR(pg_catalog.=) pg_catalog.current_database() AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
  AND a.backend_type OPERATOR(pg_catalog.=) 'client backend'
  AND coalesce(a.application_name, '') NOT LIKE 'migrate-unique %'
  AND (($1::text OPERATOR(pg_catalog.<>) '' AND a.application_name OPERATOR(pg_catalog.=) $1::text)
       OR (a.query OPERATOR(pg_catalog.~*) '\munique_key\M'
           AND pg_catalog.strpos(a.query, $2::text) OPERATOR(pg_catalog.=) 0
           AND EXISTS (SELECT 1 FROM pg_catalog.unnest($3::text[]) t(name)
                       WHERE pg_catalog.strpos(pg_catalog.lower(a.query), pg_catalog.lower(t.name)) OPERATOR(pg_catalog.>) 0)))
ORDER BY a.pid`, r.opts.OldAppName, layout.CompatMarker, in.l.Tables())
	if err != nil {
		return nil, fmt.Errorf("look for sessions of the old application version in pg_stat_activity: %w", err)
	}
	defer rows.Close()
	var fs []Finding
	for rows.Next() {
		var pid int
		var app, user, client, state, query string
		var age float64
		if err := rows.Scan(&pid, &app, &user, &client, &state, &age, &query); err != nil {
			return nil, fmt.Errorf("look for sessions of the old application version: %w", err)
		}
		why := fmt.Sprintf("its last statement (%s %s ago) names %s: %q", state, (time.Duration(age * float64(time.Second))).Round(time.Second), layout.LegacyKeyColumn, query)
		if r.opts.OldAppName != "" && app == r.opts.OldAppName {
			why = fmt.Sprintf("its application_name is --old-app-name %q", app)
		}
		pooled := ""
		if state == "idle" {
			// Behind a transaction pooler the sessions are the pooler's
			// server connections: one that last ran the old version's
			// statement stays idle, and looks the same, after every
			// instance of the old version has gone.
			pooled = fmt.Sprintf(" If every instance of the old version is stopped already, this is a connection pooler's idle server connection that last ran its statement (PgBouncer keeps them after its clients leave): end it with SELECT pg_terminate_backend(%d) (or RECONNECT in PgBouncer's console; the pooler opens new ones), then run up again.", pid)
		}
		fs = append(fs, Finding{Fatal: true, Kind: "old_version_writing", Object: fmt.Sprintf("pid %d", pid), Action: "stop every instance of the old version, or complete anyway with --force",
			Message: fmt.Sprintf("session pid %d (application_name %q, user %q, client %s) is of the old application version: %s. Completing renames %s to %s, and its next such statement would fail (42703). Stop every instance of the old version first (the new version reads through compat or the version schema %s), then run up again; --force completes anyway.%s",
				pid, app, user, client, why, layout.LegacyKeyColumn, layout.KeyColumn, layout.Ident(in.vs.name), pooled)})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if in.access != nil && !in.access.seesSessions {
		fs = append(fs, Finding{Kind: "visibility", Object: in.access.user, Action: "GRANT pg_read_all_stats TO " + in.access.user, Message: fmt.Sprintf("role %s cannot see other roles' statements in pg_stat_activity: the check for sessions of the old application version sees only its own role's (an administrator runs: GRANT pg_read_all_stats TO %s)", in.access.user, in.access.user)})
	}
	return fs, nil
}

// contractSteps are the steps of up --contract: drop the version schema of
// a migrated layout, then record migrated again. nil, nil: nothing to do.
func (r *runner) contractSteps(in *inspection) ([]step, error) {
	if in.needsCutover() {
		return nil, fmt.Errorf("up --contract drops the version schema once the migration is complete, and this layout is %s: run up first (it completes the migration), then up --contract once every instance of the new version runs", in.state())
	}
	vs := in.vs
	if (vs == nil || !vs.exists || !vs.ours) && (in.version == nil || in.version.versionSchema == "") {
		r.printf("no version schema: nothing to contract\n")
		return nil, nil
	}
	r.phase = "contract"
	sql, err := render("finish.up.sql.tmpl", newTmplData(in.l, r.opts.LockTimeout))
	if err != nil {
		return nil, err
	}
	return []step{
		versionSchemaDropStep(in, ": the new version reads the queue's tables directly (unqualified names fall through to "+layout.Ident(in.l.Schema)+" on its search_path)"),
		{name: "record migrated", table: in.l.Table(layout.VersionTable), lock: "none on the queue", kind: stepTx, sql: sql, phase: phaseFinish},
	}, nil
}
