package migrations

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/migrate-unique/migrate-unique/layout"
)

// runtimePrivileges are the privileges the runtime uses on its tables
// (overrides read in every admission and written by operators, slot leases
// taken, extended, released and swept, reschedule counters): the ones
// mirrored from the queue's tables. TRUNCATE, REFERENCES and TRIGGER are
// never mirrored.
var runtimePrivileges = []string{"SELECT", "INSERT", "UPDATE", "DELETE"}

// columnPrivileges are the column-level privileges mirrored onto the
// skip-metadata column.
var columnPrivileges = []string{"SELECT", "INSERT", "UPDATE"}

// access is what the connected role may do around the layout, and the
// privileges up grants so that every role that uses the queue's tables can
// use what up creates.
type access struct {
	// user is the connected role (current_user), quoted.
	user string
	// seesSessions (superuser or pg_read_all_stats): whether
	// pg_stat_activity shows it every session's transaction.
	seesSessions bool
	// createInSchema: the connected role may create tables in the schema.
	createInSchema bool
	// owners maps each queue table to its owner (quoted), and owns says
	// whether the connected role has the owner's privileges (it is the
	// owner, a member of it with INHERIT, or a superuser).
	owners map[string]string
	owns   map[string]bool
	// queueOwner is the owner of the layout's first table, quoted, and
	// canBecomeOwner says the connected role may SET ROLE to it.
	queueOwner     string
	canBecomeOwner bool
	// member and canSet say, per owner (quoted), whether the connected role
	// is a member of it at all and may SET ROLE to it; inherits is the
	// connected role's INHERIT attribute (before PostgreSQL 16 whether it
	// uses the privileges of the roles it is a member of; from 16 on the
	// default INHERIT option of a new membership). serverVersion is
	// server_version_num: from 16 on a membership's INHERIT and SET options
	// are separate (GRANT ... WITH INHERIT TRUE, SET TRUE).
	member, canSet map[string]bool
	inherits       bool
	serverVersion  int
	// ownerCreates says the queue's owner may create in the schema.
	ownerCreates bool
	// creator is the role up creates its tables as (SET LOCAL ROLE), quoted:
	// the queue's owner when the connected role may become it and the owner
	// may create in the schema, so that every member of the owner can run
	// down and the owner's default privileges apply; "" creates them as the
	// connected role.
	creator string
	// grants are the GRANTs up must run (those already in place left out).
	grants []grant
	// foreignVersion and foreignRuntime name the version table and the
	// runtime's tables that exist and whose owner's privileges the
	// connected role does not have: it cannot alter or drop them.
	foreignVersion string
	foreignRuntime []string
	// versionExists says the version table exists: it is then used as it
	// is, whoever made it (see setRoleForVersionTable).
	versionExists bool
	// foreignPartitions are the partitions (at any level) of the layout's
	// partitioned tables whose owner's privileges the connected role does
	// not have: the rename, the skip-metadata column and the index builds
	// reach every partition, and PostgreSQL checks each one's owner.
	foreignPartitions []foreignPartition
}

// foreignPartition is a partition the connected role cannot act on as its
// owner: quoted names of it, its layout table and its owner.
type foreignPartition struct{ partition, table, tableName, owner string }

// grant is one GRANT statement of up.
type grant struct {
	object     string // quoted, schema-qualified table
	column     string // quoted column for a column privilege, or ""
	privileges []string
	grantee    string // quoted role, or PUBLIC
	// owner is the object's owner when it exists already, and canGrant
	// whether the connected role may grant on it (a new object is ours).
	owner    string
	canGrant bool
	why      string
}

func (g grant) sql() string {
	col := ""
	if g.column != "" {
		col = " (" + g.column + ")"
	}
	privs := make([]string, len(g.privileges))
	for i, p := range g.privileges {
		privs[i] = p + col
	}
	return "GRANT " + strings.Join(privs, ", ") + " ON TABLE " + g.object + " TO " + g.grantee + ";"
}

// readAccess reads the connected role's standing and the privileges the
// queue's tables give, and works out the grants up needs.
func readAccess(ctx context.Context, q querier, in *inspection) (*access, error) {
	l := in.l
	a := &access{owners: map[string]string{}, owns: map[string]bool{}, member: map[string]bool{}, canSet: map[string]bool{}, serverVersion: in.serverVersion}
	if err := q.QueryRow(ctx, `SELECT quote_ident(current_user), r.rolsuper OR pg_has_role('pg_read_all_stats', 'USAGE'), has_schema_privilege(n.oid, 'CREATE'), r.rolinherit
FROM pg_roles r, pg_namespace n WHERE r.rolname = current_user AND n.nspname = $1`, l.Schema).
		Scan(&a.user, &a.seesSessions, &a.createInSchema, &a.inherits); err != nil {
		return nil, fmt.Errorf("read the connected role: %w", err)
	}
	// SET ROLE needs membership; from PostgreSQL 16 on, a membership with
	// its SET option.
	setRole := "MEMBER"
	if in.serverVersion >= 160000 {
		setRole = "SET"
	}
	rows, err := q.Query(ctx, `SELECT c.relname::text, quote_ident(pg_get_userbyid(c.relowner)), pg_has_role(c.relowner, 'USAGE'),
       pg_has_role(c.relowner, $3), has_schema_privilege(c.relowner, n.oid, 'CREATE'), pg_has_role(c.relowner, 'MEMBER')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = ANY ($2) AND c.relkind IN ('r', 'p')`, l.Schema, l.Tables(), setRole)
	if err != nil {
		return nil, fmt.Errorf("read the owners of the layout's tables: %w", err)
	}
	ownerCreates := map[string]bool{}
	for rows.Next() {
		var name, owner string
		var owns, canSet, creates, member bool
		if err := rows.Scan(&name, &owner, &owns, &canSet, &creates, &member); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the owners of the layout's tables: %w", err)
		}
		a.owners[name], a.owns[name] = owner, owns
		a.canSet[owner], ownerCreates[owner], a.member[owner] = canSet, creates, member
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the owners of the layout's tables: %w", err)
	}
	// A partition owned by another role (pg_partman's maintenance run by
	// another role makes them): PostgreSQL refuses the rename and the
	// builds on it ("must be owner of table"), half-way through.
	rows, err = q.Query(ctx, `SELECT format('%I.%I', pn.nspname, p.relname), format('%I.%I', n.nspname, c.relname), c.relname::text, quote_ident(pg_get_userbyid(p.relowner)),
       pg_has_role(p.relowner, $3), pg_has_role(p.relowner, 'MEMBER')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, pg_partition_tree(c.oid) AS pt
JOIN pg_class p ON p.oid = pt.relid JOIN pg_namespace pn ON pn.oid = p.relnamespace
WHERE n.nspname = $1 AND c.relname = ANY ($2) AND c.relkind = 'p' AND pt.relid <> c.oid AND NOT pg_has_role(p.relowner, 'USAGE')
ORDER BY 2, 1`, l.Schema, l.Tables(), setRole)
	if err != nil {
		return nil, fmt.Errorf("read the owners of the partitions of the layout's tables: %w", err)
	}
	for rows.Next() {
		var fp foreignPartition
		var canSet, member bool
		if err := rows.Scan(&fp.partition, &fp.table, &fp.tableName, &fp.owner, &canSet, &member); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the owners of the partitions of the layout's tables: %w", err)
		}
		a.foreignPartitions = append(a.foreignPartitions, fp)
		a.canSet[fp.owner], a.member[fp.owner] = canSet, member
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the owners of the partitions of the layout's tables: %w", err)
	}
	a.queueOwner = a.owners[l.Tables()[0]]
	a.canBecomeOwner = a.canSet[a.queueOwner]
	a.ownerCreates = ownerCreates[a.queueOwner]
	if a.queueOwner != "" && a.queueOwner != a.user && a.canBecomeOwner && a.ownerCreates {
		a.creator = a.queueOwner
	}

	// Who holds what on the queue's tables: table and column privileges,
	// and the default privileges the owners give the tables they create.
	held := map[string]map[string]bool{}      // grantee -> privilege
	skipTable := map[string]map[string]bool{} // grantee -> table-level privilege on the skip table
	skipCols := map[string]map[string]bool{}  // grantee -> column-level privilege on the skip table
	add := func(m map[string]map[string]bool, g, p string) {
		if m[g] == nil {
			m[g] = map[string]bool{}
		}
		m[g][p] = true
	}
	rows, err = q.Query(ctx, `WITH q AS (
    SELECT c.oid, c.relname, c.relowner, c.relacl, c.relnamespace FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND c.relname = ANY ($2) AND c.relkind IN ('r', 'p')
), held AS (
    SELECT a.grantee, a.privilege_type, q.relname, 'table' AS source FROM q, aclexplode(q.relacl) a WHERE a.grantee <> q.relowner
    UNION ALL
    SELECT a.grantee, a.privilege_type, q.relname, 'column' FROM q
    JOIN pg_attribute att ON att.attrelid = q.oid AND att.attnum > 0 AND NOT att.attisdropped AND att.attacl IS NOT NULL,
    aclexplode(att.attacl) a WHERE a.grantee <> q.relowner
    UNION ALL
    SELECT a.grantee, a.privilege_type, '', 'default' FROM pg_default_acl d, aclexplode(d.defaclacl) a
    WHERE d.defaclobjtype = 'r' AND d.defaclrole IN (SELECT relowner FROM q)
      AND d.defaclnamespace IN (0, (SELECT relnamespace FROM q LIMIT 1)) AND a.grantee <> d.defaclrole
)
SELECT DISTINCT CASE WHEN h.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(h.grantee)) END, h.privilege_type, h.relname::text, h.source
FROM held h ORDER BY 1, 2, 3, 4`, l.Schema, l.Tables())
	if err != nil {
		return nil, fmt.Errorf("read the privileges on the layout's tables: %w", err)
	}
	skip := l.SkipTable()
	for rows.Next() {
		var g, p, rel, source string
		if err := rows.Scan(&g, &p, &rel, &source); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the privileges on the layout's tables: %w", err)
		}
		if slices.Contains(runtimePrivileges, p) {
			add(held, g, p)
		}
		if rel == skip && skip != "" {
			if source == "table" {
				add(skipTable, g, p)
			} else if source == "column" {
				add(skipCols, g, p)
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the privileges on the layout's tables: %w", err)
	}

	// What the runtime's tables and the skip column already give.
	type object struct {
		exists   bool
		owner    string
		canGrant bool
		acl      map[string]map[string]bool
	}
	// One round trip for the version table, the runtime's tables and the
	// skip-metadata column (its column ACL).
	names, columns := []string{layout.VersionTable}, []string{""}
	for _, rt := range runtimeTables {
		names, columns = append(names, rt.name), append(columns, "")
	}
	if skip != "" {
		names, columns = append(names, skip), append(columns, layout.SkipMetadataColumn)
	}
	objects := map[[2]string]object{}
	rows, err = q.Query(ctx, `SELECT o.name, o.col, c.oid IS NOT NULL, coalesce(quote_ident(pg_get_userbyid(c.relowner)), ''), coalesce(pg_has_role(c.relowner, 'USAGE'), false),
       ARRAY(SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END || ' ' || a.privilege_type
             FROM aclexplode(CASE WHEN o.col = '' THEN c.relacl
                                  ELSE (SELECT att.attacl FROM pg_attribute att WHERE att.attrelid = c.oid AND att.attname = o.col AND NOT att.attisdropped) END) a)
FROM unnest($2::text[], $3::text[]) AS o(name, col)
LEFT JOIN pg_class c ON c.relname = o.name AND c.relkind IN ('r', 'p') AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1)`, l.Schema, names, columns)
	if err != nil {
		return nil, fmt.Errorf("read the privileges on the runtime's tables: %w", err)
	}
	for rows.Next() {
		var name, col string
		var acl []string
		o := object{acl: map[string]map[string]bool{}}
		if err := rows.Scan(&name, &col, &o.exists, &o.owner, &o.canGrant, &acl); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the privileges on the runtime's tables: %w", err)
		}
		for _, e := range acl {
			g, p, _ := strings.Cut(e, " ")
			add(o.acl, g, p)
		}
		objects[[2]string{name, col}] = o
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the privileges on the runtime's tables: %w", err)
	}
	grantees := make([]string, 0, len(held))
	for g := range held {
		grantees = append(grantees, g)
	}
	slices.Sort(grantees)
	a.versionExists = objects[[2]string{layout.VersionTable, ""}].exists
	if o := objects[[2]string{layout.VersionTable, ""}]; o.exists && !o.canGrant {
		a.foreignVersion = fmt.Sprintf("%s (owner %s)", l.Table(layout.VersionTable), o.owner)
	}
	for _, rt := range runtimeTables {
		o := objects[[2]string{rt.name, ""}]
		if o.exists && !o.canGrant {
			a.foreignRuntime = append(a.foreignRuntime, fmt.Sprintf("%s (owner %s)", l.Table(rt.name), o.owner))
		}
		owner := o.owner
		if !o.exists {
			owner = a.creator
			if owner == "" {
				owner = a.user
			}
		}
		want := map[string][]string{}
		for _, g := range grantees {
			if g == owner {
				continue
			}
			for _, p := range runtimePrivileges {
				// Every role that uses the queue reads the overrides in its
				// admission transactions: SELECT for all of them.
				if p == "SELECT" || held[g][p] {
					want[g] = append(want[g], p)
				}
			}
		}
		if owner != a.queueOwner && a.queueOwner != "" {
			// Tables that are not the queue owner's would shut out the
			// owner's other members (the next person to run down).
			want[a.queueOwner] = runtimePrivileges
		}
		for _, g := range sortedKeys(want) {
			var missing []string
			for _, p := range want[g] {
				if !o.acl[g][p] {
					missing = append(missing, p)
				}
			}
			if len(missing) == 0 {
				continue
			}
			why := "the queue's tables give it " + strings.Join(sortedPrivileges(held[g]), ", ")
			if g == a.queueOwner {
				why = "it owns the queue's tables"
			}
			a.grants = append(a.grants, grant{object: l.Table(rt.name), privileges: missing, grantee: g,
				owner: map[bool]string{true: o.owner}[o.exists], canGrant: !o.exists || o.canGrant, why: why})
		}
	}
	if skip != "" {
		o := objects[[2]string{skip, layout.SkipMetadataColumn}]
		for _, g := range sortedKeys(skipCols) {
			var missing []string
			for _, p := range columnPrivileges {
				if skipCols[g][p] && !skipTable[g][p] && !o.acl[g][p] {
					missing = append(missing, p)
				}
			}
			if len(missing) > 0 {
				a.grants = append(a.grants, grant{object: l.Table(skip), column: layout.Ident(layout.SkipMetadataColumn), privileges: missing, grantee: g,
					owner: o.owner, canGrant: a.owns[skip], why: "it holds these privileges on other columns of " + l.Table(skip) + " only"})
			}
		}
	}
	return a, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// sortedPrivileges lists a set of privileges in runtimePrivileges' order.
func sortedPrivileges(set map[string]bool) []string {
	var out []string
	for _, p := range runtimePrivileges {
		if set[p] {
			out = append(out, p)
		}
	}
	return out
}

// grantSQL renders the GRANTs on the runtime's tables (column false) or
// on the skip-metadata column (column true), one per line, or "" when none
// is missing. They run in the transaction that creates the tables (adds
// the column), so no enqueue ever finds the table without its grants.
func (a *access) grantSQL(column bool) string {
	if a == nil {
		return ""
	}
	var b strings.Builder
	for _, g := range a.grants {
		if (g.column != "") != column {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("-- Every role that uses the queue's tables can use what up created (mirrored from their privileges).\n")
		}
		if !g.canGrant {
			fmt.Fprintf(&b, "-- %s cannot grant on %s (owner %s): an administrator runs this one.\n", a.user, g.object, g.owner)
		}
		b.WriteString(g.sql() + "\n")
	}
	return b.String()
}

// setRole is the statement that makes a transaction create as the queue's
// owner, or "".
func (a *access) setRole() string {
	if a == nil || a.creator == "" {
		return ""
	}
	return "-- Created as the queue's owner, so that every member of it can run down.\nSET LOCAL ROLE " + a.creator + ";\n"
}

// setRoleForVersionTable is setRole for the step that creates the version
// table, or "" when the table exists: an older run may have made it as the
// connected role, and the queue's owner could not alter or write it.
func (a *access) setRoleForVersionTable() string {
	if a == nil || a.versionExists {
		return ""
	}
	return a.setRole()
}

// resetRole ends what setRole started, before the GRANTs: they run as the
// connected role, which may grant on tables an older run created as
// itself.
func (a *access) resetRole() string {
	if a == nil || a.creator == "" {
		return ""
	}
	return "RESET ROLE;\n"
}

// findings are the preflight's findings about the connected role: what
// it cannot do that up (or down) needs, with the statement an
// administrator runs to allow it (fatal), and as whom up creates its
// tables (a note).
func (a *access) findings(in *inspection, direction string) []Finding {
	if a == nil || (direction != "up" && direction != "down") {
		return nil
	}
	var fs []Finding
	l := in.l
	if in.nothingToDo(direction) {
		return nil
	}
	ownershipRefused := false
	for _, t := range l.Tables() {
		if owner, ok := a.owners[t]; ok && !a.owns[t] {
			ownershipRefused = true
			action, advice := a.ownershipFix(owner)
			fs = append(fs, Finding{Fatal: true, Kind: "ownership", Object: l.Table(t), Action: action, Message: fmt.Sprintf("role %s does not own table %s (its owner is %s) and does not have its owner's privileges: %s renames its key column and builds and drops indexes on it, which only the owner can do. %s",
				a.user, l.Table(t), owner, direction, advice)})
		}
	}
	for _, fp := range a.foreignPartitions {
		ownershipRefused = true
		action, advice := a.ownershipFix(fp.owner)
		tableOwner := cmp.Or(a.owners[fp.tableName], a.queueOwner)
		fs = append(fs, Finding{Fatal: true, Kind: "ownership", Object: fp.partition, Action: action, Message: fmt.Sprintf("role %s does not own %s, a partition of %s (its owner is %s), and does not have its owner's privileges: %s renames the key column and builds and drops indexes on every partition, and PostgreSQL checks each partition's owner (\"must be owner of table\"), half-way through. %s; or give the partition the table's owner: ALTER TABLE %s OWNER TO %s",
			a.user, fp.partition, fp.table, fp.owner, direction, advice, fp.partition, tableOwner)})
	}
	foreign := a.foreignRuntime
	what := "down drops the runtime's tables (unless they hold operator data) and records its progress in the version table"
	if direction == "up" {
		foreign, what = nil, "up records its progress in the version table"
	}
	if a.foreignVersion != "" {
		foreign = append(foreign, a.foreignVersion)
	}
	if len(foreign) > 0 {
		fs = append(fs, Finding{Fatal: true, Kind: "ownership", Object: strings.Join(foreign, ", "), Action: "run as the owner or a member of it", Message: fmt.Sprintf("role %s does not own %s and does not have the owner's privileges; %s. Run as the owner or a member of it (an administrator runs GRANT <owner> TO %s, or ALTER TABLE ... OWNER TO %s)",
			a.user, strings.Join(foreign, ", "), what, a.user, cmp.Or(a.queueOwner, a.user))})
	}
	if direction != "up" {
		return fs
	}
	missingTables := !in.versionTable
	for _, rt := range runtimeTables {
		missingTables = missingTables || !in.runtime[rt.name]
	}
	switch {
	case !missingTables:
	case ownershipRefused:
		// Up does not run: as whom it would create is no news.
	case a.creator != "":
		fs = append(fs, Finding{Kind: "creator", Object: a.creator, Message: fmt.Sprintf("up creates its tables as %s, the owner of the queue's tables (SET LOCAL ROLE; role %s is a member of it), so that every member of it can run down", a.creator, a.user)})
	case a.createInSchema && a.queueOwner != a.user && a.canBecomeOwner:
		fs = append(fs, Finding{Kind: "creator", Object: a.user, Action: "GRANT CREATE ON SCHEMA " + layout.Ident(l.Schema) + " TO " + a.queueOwner, Message: fmt.Sprintf("up creates its tables as %s, not as the queue's owner %s, which may not create in schema %s; it grants %s their privileges. To have them belong to %s, an administrator runs first: GRANT CREATE ON SCHEMA %s TO %s",
			a.user, a.queueOwner, layout.Ident(l.Schema), a.queueOwner, a.queueOwner, layout.Ident(l.Schema), a.queueOwner)})
	case a.createInSchema && a.queueOwner != "" && a.queueOwner != a.user && a.member[a.queueOwner] && a.serverVersion >= 160000:
		// A member that has the owner's privileges (INHERIT) but may not
		// become it (SET FALSE, PostgreSQL 16 and later).
		action := "GRANT " + a.queueOwner + " TO " + a.user + " WITH SET TRUE"
		if !a.ownerCreates {
			action += "; GRANT CREATE ON SCHEMA " + layout.Ident(l.Schema) + " TO " + a.queueOwner
		}
		fs = append(fs, Finding{Kind: "creator", Object: a.user, Action: action, Message: fmt.Sprintf("up creates its tables as %s, not as the queue's owner %s: the membership of %s in %s has INHERIT but not SET (PostgreSQL 16 membership options), so up cannot SET ROLE %s. It grants %s their privileges, but only %s (or a superuser) can drop them: down run by another member of %s is refused. To have them belong to %s, an administrator runs first: %s",
			a.user, a.queueOwner, a.user, a.queueOwner, a.queueOwner, a.queueOwner, a.user, a.queueOwner, a.queueOwner, action)})
	}
	// A member without INHERIT gets the owner's CREATE with the fix its
	// ownership refusal names: no second refusal for the same cause.
	ownerFixCreates := ownershipRefused && a.member[a.queueOwner] && a.ownerCreates
	if missingTables && a.creator == "" && !a.createInSchema && !ownerFixCreates {
		to := a.user
		if a.canBecomeOwner && a.queueOwner != "" {
			to = a.queueOwner // so that what up creates belongs to the queue's owner
		}
		fs = append(fs, Finding{Fatal: true, Kind: "schema_create", Object: layout.Ident(l.Schema), Action: "GRANT CREATE ON SCHEMA " + layout.Ident(l.Schema) + " TO " + to, Message: fmt.Sprintf("role %s cannot create tables in schema %s, where up creates its version table and the runtime's tables (%s, %s, %s). An administrator runs: GRANT CREATE ON SCHEMA %s TO %s",
			a.user, layout.Ident(l.Schema), layout.LimitsTable, layout.SlotsTable, layout.ReschedulesTable, layout.Ident(l.Schema), to)})
	}
	var blocked []string
	var owners []string
	for _, g := range a.grants {
		if !g.canGrant {
			blocked = append(blocked, g.sql())
			if !slices.Contains(owners, g.object+" (owner "+g.owner+")") {
				owners = append(owners, g.object+" (owner "+g.owner+")")
			}
		}
	}
	if len(blocked) > 0 {
		fs = append(fs, Finding{Fatal: true, Kind: "grants", Object: strings.Join(owners, ", "), Action: strings.Join(blocked, " "), Message: fmt.Sprintf("role %s cannot grant on %s, and the roles that use the queue's tables need these privileges there (without them their enqueues fail with 42501, permission denied). An administrator (the owner or a superuser) runs:\n      %s\n    then run up again",
			a.user, strings.Join(owners, ", "), strings.Join(blocked, "\n      "))})
	}
	return fs
}

// ownershipFix is the statement an administrator runs so that the
// connected role has owner's privileges, and the advice that explains it:
// a plain GRANT owner TO role does nothing for a membership that exists
// already without INHERIT, or for a NOINHERIT role.
func (a *access) ownershipFix(owner string) (action, advice string) {
	u := a.user
	plain := "GRANT " + owner + " TO " + u
	if a.serverVersion >= 160000 {
		action = plain + " WITH INHERIT TRUE"
		switch {
		case a.member[owner] && a.canSet[owner]:
			return action, fmt.Sprintf("Role %s is a member of %s with SET but not INHERIT (PostgreSQL 16 membership options): it may become %s, but does not use its privileges as itself. An administrator runs: %s (a plain %s leaves the existing membership as it is); or connect as %s for the whole session: %s may become it (add options=-c%%20role%%3D%s to the database URL)",
				u, owner, owner, action, plain, owner, u, owner)
		case a.member[owner]:
			return action, fmt.Sprintf("Role %s is a member of %s with neither INHERIT nor SET (PostgreSQL 16 membership options). An administrator runs: %s (a plain %s leaves the existing membership as it is)",
				u, owner, action, plain)
		case !a.inherits:
			return action, fmt.Sprintf("Run as %s or a member of it with INHERIT; role %s is NOINHERIT, so a plain %s would make a membership without it. An administrator runs: %s",
				owner, u, plain, action)
		}
		return plain, fmt.Sprintf("Run as %s or a member of it (an administrator runs: %s)", owner, plain)
	}
	switch {
	case a.member[owner]:
		action = "ALTER ROLE " + u + " INHERIT"
		return action, fmt.Sprintf("Role %s is a member of %s but NOINHERIT: it uses %s's privileges only after SET ROLE. An administrator runs: %s; or connect as %s for the whole session (add options=-c%%20role%%3D%s to the database URL)",
			u, owner, owner, action, owner, owner)
	case !a.inherits:
		action = plain + "; ALTER ROLE " + u + " INHERIT"
		return action, fmt.Sprintf("Run as %s or a member of it; role %s is NOINHERIT, so membership alone would not give it %s's privileges. An administrator runs: %s",
			owner, u, owner, action)
	}
	return plain, fmt.Sprintf("Run as %s or a member of it (an administrator runs: %s)", owner, plain)
}

// drift lists the grants a migrated layout lacks.
func (a *access) drift() []string {
	if a == nil {
		return nil
	}
	var out []string
	for _, g := range a.grants {
		what := g.object
		if g.column != "" {
			what += "." + g.column
		}
		out = append(out, fmt.Sprintf("role %s lacks %s on %s (%s)", g.grantee, strings.Join(g.privileges, ", "), what, g.why))
	}
	return out
}

// nothingToDo reports a run of direction that would change nothing: up on
// a migrated layout without drift, down on a legacy one that an earlier
// down left nothing of.
func (in *inspection) nothingToDo(direction string) bool {
	return direction == "up" && in.state() == Migrated && len(in.drift()) == 0 || direction == "down" && in.state() == Legacy && !in.runtimeLeft()
}
