package compat

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/migrate-unique/migrate-unique/internal/lockid"
	"github.com/migrate-unique/migrate-unique/internal/qualify"
	"github.com/migrate-unique/migrate-unique/layout"
)

// The admission protocol (SPEC 3), for a batch of jobs in one transaction:
//
//  1. Lock statements, one per class then one per keyed group, in the global
//     order (class, key) with the class first, so two transactions never
//     wait on each other in a cycle. A keyed group's statement takes the
//     class's shared lock (unless the class has a statement of its own),
//     then the group's lock. A class statement takes the class-wide lock
//     exclusively when a keyless job of the class is limited, and shared
//     otherwise. When no job of the group has a limit in code, only the
//     group's override can limit it: the statement reads the override,
//     takes the exclusive lock only if there is one, and keeps it in a
//     transaction-local setting ("carries" it), so the count below uses
//     exactly the limit the lock was chosen for. A group limited in code is
//     locked whatever its override, and its count reads the override itself.
//  2. One count-and-insert statement per job. It starts after the locks are
//     held, so under READ COMMITTED its snapshot sees every job admitted
//     before it, and every override set before it. The count stops at the
//     limit (LIMIT), so a check reads at most limit index entries per table.
//
// With pgx the statements are pipelined in one batch: one round trip, and,
// outside a caller's transaction, one implicit transaction.

// overrideSetting names the transaction-local setting that carries group i's
// override from its lock statement to the count.
func overrideSetting(i int) string {
	if i < len(overrideSettings) {
		return overrideSettings[i]
	}
	return "migrate_unique.override_" + strconv.Itoa(i)
}

// overrideSettings are the first names of overrideSetting, built once: a
// single enqueue uses name 0.
var overrideSettings = func() []string {
	names := make([]string, 16)
	for i := range names {
		names[i] = "migrate_unique.override_" + strconv.Itoa(i)
	}
	return names
}()

// sqlArgs numbers the parameters of a statement as it is written.
type sqlArgs []any

func (a *sqlArgs) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// query is one statement of a batch; scan reads its single row, rows its
// rows (both nil: none). mk is sql opened with layout.CompatMarker, when it
// was built once with the text (s.text): the pipelined path sends it
// as it is instead of marking sql on every call.
type query struct {
	sql  string
	mk   string
	args []any
	scan func(Row) error
	rows func(Rows) error
}

// admission is one job on its way in, validated.
type admission struct {
	job     Job
	id      Identity
	lockKey string    // the group's key: id.Key, or id.Prefix in no-overlap mode
	plan    *lockPlan // the lock statement of its group
	record  bool      // write a skip record when blocked
}

// lockPlan is one lock statement: a class (key "") or a keyed group.
type lockPlan struct {
	class, key  string
	setting     string // the transaction-local setting a carried override goes in
	hasKeyless  bool   // class plans: a keyless job of the class is in the batch
	codeLimited bool   // some job of the group (class plans: a keyless one) has a limit in code
	sharedClass bool   // group plans: take the class's shared lock first
}

// carries reports whether p's lock mode depends on the group's override,
// which p's statement then reads and carries to the counts: a group with
// keyless jobs (class plans) or keyed ones (group plans) of which none has a
// limit in code, where an override can exist.
func (p *lockPlan) carries(s *schema) bool {
	return (p.key != "" || p.hasKeyless) && !p.codeLimited && s.hasLimits
}

// planLocks orders the batch's groups and gives each admission its group's
// plan.
func planLocks(s *schema, adms []*admission) []*lockPlan {
	if len(adms) == 1 && !s.looseKey {
		return planOne(adms[0])
	}
	// A batch has at most a class plan and a group plan per job: the
	// plans live in one slice of that capacity, so their addresses hold.
	buf := make([]lockPlan, 0, 2*len(adms))
	byGroup := make(map[[2]string]*lockPlan, len(adms)+1)
	get := func(class, key string) *lockPlan {
		k := [2]string{class, key}
		p := byGroup[k]
		if p == nil {
			buf = append(buf, lockPlan{class: class, key: key})
			p = &buf[len(buf)-1]
			byGroup[k] = p
		}
		return p
	}
	for _, a := range adms {
		cp := get(a.job.Class, "")
		if a.lockKey == "" {
			cp.hasKeyless = true
			cp.codeLimited = cp.codeLimited || a.id.Limited
			a.plan = cp
			continue
		}
		gp := get(a.job.Class, a.lockKey)
		gp.codeLimited = gp.codeLimited || a.id.Limited
		a.plan = gp
		if s.looseKey && (a.id.Limited || s.hasLimits) {
			// Keys the lock tells apart (ACCT-7, acct-7) count as one
			// group: the class's lock, exclusive, serializes them; the
			// group's own lock stays plain-jobs' (its Python writers take
			// it), and the count reads the override itself.
			gp.codeLimited = true
			cp.hasKeyless, cp.codeLimited = true, true
		}
	}
	all := make([]*lockPlan, len(buf))
	for i := range buf {
		all[i] = &buf[i]
	}
	slices.SortFunc(all, func(a, b *lockPlan) int {
		if c := strings.Compare(a.class, b.class); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	// A class without keyless jobs only needs its shared lock: it is taken
	// by the class's first group statement, before the group's own lock, so
	// the order stays the same and a keyed enqueue is one lock statement.
	plans := all[:0]
	for i, p := range all {
		if p.carries(s) {
			// Only a carried override needs a setting (named by the
			// plan's place in the order, so names never collide).
			p.setting = overrideSetting(i)
		}
		if p.key == "" && !p.hasKeyless && i+1 < len(all) && all[i+1].class == p.class {
			all[i+1].sharedClass = true
			continue
		}
		plans = append(plans, p)
	}
	return plans
}

// planOne is planLocks for a single job, without the map and the sort: a
// keyed job's class plan folds into its group's plan, which takes the
// class's shared lock first; a keyless job has the class plan alone.
func planOne(a *admission) []*lockPlan {
	if a.lockKey == "" {
		a.plan = &lockPlan{class: a.job.Class, setting: overrideSetting(0), hasKeyless: true, codeLimited: a.id.Limited}
	} else {
		a.plan = &lockPlan{class: a.job.Class, key: a.lockKey, setting: overrideSetting(0), codeLimited: a.id.Limited, sharedClass: true}
	}
	return []*lockPlan{a.plan}
}

// lockQuery renders a lock statement. Its text depends only on the plan's
// shape, so it is built once per shape; the arguments follow the text's
// placeholders in order.
func (s *schema) lockQuery(p *lockPlan) query {
	classID, carries := lockid.For(p.class, ""), p.carries(s)
	switch {
	case carries && p.key == "":
		return s.text("lock/carry/class", func() string { return s.carryLockText(false, true) }).
			query(classID, layout.GroupName(p.class, ""), p.setting)
	case carries && p.sharedClass:
		return s.text("lock/carry/keyed+class", func() string { return s.carryLockText(true, false) }).
			query(classID, lockid.For(p.class, p.key), layout.GroupName(p.class, p.key), p.setting)
	case carries:
		return s.text("lock/carry/keyed", func() string { return s.carryLockText(false, false) }).
			query(lockid.For(p.class, p.key), layout.GroupName(p.class, p.key), p.setting)
	case p.key != "" && !p.codeLimited || p.key == "" && !(p.hasKeyless && p.codeLimited):
		// Nothing can limit the group (no override table, or a class plan
		// without keyless jobs): the class's shared lock is all it needs.
		return query{sql: lockSharedText, args: []any{classID}}
	case p.key != "" && p.sharedClass:
		// Target-list entries are evaluated left to right: the class's
		// shared lock, then the group's.
		return query{sql: lockSharedThenExclusiveText, args: []any{classID, lockid.For(p.class, p.key)}}
	}
	return query{sql: lockExclusiveText, args: []any{lockid.For(p.class, p.key)}}
}

// The lock statements whose text is fixed. Like every statement of the
// runtime they name pg_catalog's functions and type their parameters, so
// that a function another role created (pg_advisory_xact_lock(text) in
// public) neither runs nor makes the call ambiguous.
const (
	lockSharedText              = "SELECT pg_catalog.pg_advisory_xact_lock_shared($1::pg_catalog.int8)"
	lockSharedThenExclusiveText = "SELECT pg_catalog.pg_advisory_xact_lock_shared($1::pg_catalog.int8), pg_catalog.pg_advisory_xact_lock($2::pg_catalog.int8)"
	lockExclusiveText           = "SELECT pg_catalog.pg_advisory_xact_lock($1::pg_catalog.int8)"
)

// carryLockText is the lock statement whose mode the group's override
// decides: the group's lock exclusive when it has one (a class group: shared
// otherwise; a keyed one: none otherwise, after the class's shared lock when
// sharedClass). The override (an empty string for none) goes into the
// transaction-local setting for the counts.
func (s *schema) carryLockText(sharedClass, class bool) string {
	var a sqlArgs
	lock := ""
	if sharedClass {
		// Target-list entries are evaluated left to right.
		lock = "pg_advisory_xact_lock_shared(" + a.add(nil) + "::int8)::text, "
	}
	id := a.add(nil) + "::int8"
	if class {
		lock += "CASE WHEN s.o <> '' THEN pg_advisory_xact_lock(" + id + ")::text ELSE pg_advisory_xact_lock_shared(" + id + ")::text END"
	} else {
		lock += "CASE WHEN s.o <> '' THEN pg_advisory_xact_lock(" + id + ")::text END"
	}
	group := a.add(nil)
	return "SELECT " + lock + " FROM (SELECT set_config(" + a.add(nil) + "::text, coalesce(" +
		overrideSQL(s.l.Table(layout.LimitsTable), group) + "::text, ''), true) AS o OFFSET 0) s"
}

// text returns the statement text of a shape, building it on first use
// and qualifying its functions, operators and types with pg_catalog
// (qualify.Must): the statement runs on the caller's search_path, which
// compat never changes and which may put another role's schema first.
func (s *schema) text(shape string, build func() string) stmtText {
	if t, ok := s.texts.Load(shape); ok {
		return t.(stmtText)
	}
	t, _ := s.texts.LoadOrStore(shape, newStmtText(qualify.Must(build())))
	return t.(stmtText)
}

// stmtText is a statement's text, plain and marked (layout.CompatMarker),
// both built once.
type stmtText struct{ sql, mk string }

func newStmtText(sql string) stmtText { return stmtText{sql: sql, mk: marked(sql)} }

// query returns the statement with its arguments.
func (t stmtText) query(args ...any) query { return query{sql: t.sql, mk: t.mk, args: args} }

// admitResult is the row an admission statement returns.
type admitResult struct {
	limit   *int32
	active  int64
	holders string
	id      *int64
	uuid    *string
}

// admitQuery renders the count-and-insert statement of one job: the text
// once per shape (class-wide, keyed, prefix; where the override comes
// from), the arguments in the order of its placeholders.
func (s *schema) admitQuery(adm *admission, out *admitResult) query {
	var codeLimit any
	if adm.id.Limited {
		codeLimit = adm.id.Limit
	}
	kind, src := 0, 0 // indexes into admitShapes
	var keys [2]any   // the key's parameters: none, the key, or the prefix's bounds
	nkeys := 0
	switch {
	case adm.lockKey == "":
	case adm.id.NoOverlap:
		p := adm.id.Prefix
		kind, nkeys = 2, 2
		keys[0], keys[1] = p, prefixEnd(p)
	default:
		kind, nkeys = 1, 1
		keys[0] = adm.id.Key
	}
	args := make([]any, 0, 24) // 5 for the check, at most 14 for the row
	switch {
	case adm.plan.carries(s):
		src = 1
		args = append(args, adm.plan.setting)
	case s.hasLimits:
		src = 2
		args = append(args, layout.GroupName(adm.job.Class, adm.lockKey))
	}
	args = append(args, codeLimit, adm.job.Class)
	args = append(args, keys[:nkeys]...)
	args = s.rowArgs(s.requests, adm, "", args)
	shape := admitShapes[kind][src]
	q := s.text(shape, func() string { return s.admitText(shape) }).query(args...)
	q.scan = func(r Row) error {
		return r.Scan(&out.limit, &out.active, &out.holders, &out.id, &out.uuid)
	}
	return q
}

// admitShapes names admitQuery's shapes, by what the count reads (the
// class, a key, a prefix) and where the override comes from (none, the
// carried setting, the table).
var admitShapes = [3][3]string{
	{"admit/class", "admit/class/carried", "admit/class/read"},
	{"admit/keyed", "admit/keyed/carried", "admit/keyed/read"},
	{"admit/prefix", "admit/prefix/carried", "admit/prefix/read"},
}

// admitText builds the count-and-insert statement of a shape made by
// admitQuery. It returns one row: the limit (NULL: none), the active jobs
// counted (at most the limit per table) and who they are, and the new row's
// id and uuid (NULL when blocked).
func (s *schema) admitText(shape string) string {
	var a sqlArgs
	l := s.l
	var b strings.Builder
	// l.n is the limit: the override, else the code's. The subquery is
	// fenced (OFFSET 0) so the override is read once; a NULL limit reads no
	// active job (LIMIT 0).
	override := "NULL::integer"
	switch {
	case strings.HasSuffix(shape, "/carried"):
		p := a.add(nil)
		override = "CASE WHEN current_setting(" + p + "::text) <> '' THEN current_setting(" + p + "::text)::integer END"
	case strings.HasSuffix(shape, "/read"):
		override = overrideSQL(l.Table(layout.LimitsTable), a.add(nil))
	}
	b.WriteString("WITH c AS (\n    SELECT min(l.n) AS lim, count(u.id) AS n, coalesce(string_agg(u.t || ':' || u.id::text, ','), '') AS holders\n")
	b.WriteString("    FROM (SELECT coalesce(" + override + ", " + a.add(nil) + "::integer) AS n OFFSET 0) l\n    LEFT JOIN LATERAL (")
	// Each active table is read in the order of its counting index, class
	// then key, up to the limit (see boundedScan). The class is matched with
	// = ANY so that the planner keeps the class in the required order, and
	// the key with a closed range for the same reason.
	class := "ANY (ARRAY[" + a.add(nil) + "::text])"
	var keyCond, keyOrder string
	key := layout.Ident(s.keyCol)
	switch {
	case strings.HasPrefix(shape, "admit/prefix"):
		// A prefix is a range only in a bytewise order: compare with
		// COLLATE "C" when the column sorts otherwise (the prefix index).
		if !s.bytewise {
			key += ` COLLATE "C"`
		}
		keyCond = " AND " + key + " >= " + a.add(nil) + " AND " + key + " < " + a.add(nil)
		keyOrder = ", " + key
	case strings.HasPrefix(shape, "admit/keyed"):
		keyCond = s.keyRange(key, a.add(nil))
		keyOrder = ", " + key
	}
	stateCond := ""
	if l.SingleTable() {
		stateCond = " AND " + l.StatesCondition()
	}
	id := layout.Ident(s.idColumn())
	classCol := layout.Ident(l.ClassColumn)
	for i, t := range s.activeTables() {
		if i > 0 {
			b.WriteString("\n        UNION ALL")
		}
		fmt.Fprintf(&b, "\n        (SELECT %s AS t, %s AS id FROM %s WHERE %s = %s%s%s ORDER BY %s%s LIMIT coalesce(l.n, 0))",
			layout.Literal(t.name), id, l.Table(t.name), classCol, class, keyCond, stateCond, classCol, keyOrder)
	}
	b.WriteString("\n    ) u ON true\n), ins AS (\n    ")

	cols, vals := s.rowText(s.requests, &a)
	returning := id + " AS r_id, NULL::text AS r_uuid"
	if s.requests.has("uuid") {
		returning = id + " AS r_id, " + layout.Ident("uuid") + "::text AS r_uuid"
	}
	fmt.Fprintf(&b, "INSERT INTO %s (%s)\n    SELECT %s\n    FROM c WHERE c.lim IS NULL OR c.n < c.lim%s\n    RETURNING %s\n)\n",
		l.Table(s.requests.name), strings.Join(cols, ", "), strings.Join(vals, ", "), s.rule.onConflict(), returning)
	b.WriteString("SELECT c.lim, c.n, c.holders, ins.r_id, ins.r_uuid FROM c LEFT JOIN ins ON true")
	return b.String()
}

// rowField is one column of a new row: its value expression, in which "?"
// stands for the field's parameter when it has one (val non-nil).
type rowField struct {
	col  string
	expr string
	val  func(adm *admission, state string) any
}

// rowFields lists the columns of a new row of t: every column the runtime
// knows that t has, in a fixed order.
func (s *schema) rowFields(t *table) []rowField {
	l := s.l
	var fs []rowField
	add := func(col, expr string, val func(*admission, string) any) {
		if t.has(col) {
			fs = append(fs, rowField{col, expr, val})
		}
	}
	add(l.ClassColumn, "?", func(a *admission, _ string) any { return a.job.Class })
	keyExpr := "CASE WHEN ?::text <> '' THEN ?::text END"
	if t.cols[s.keyCol].notNull {
		keyExpr = "?"
	}
	add(s.keyCol, keyExpr, func(a *admission, _ string) any { return a.id.Key })
	for _, c := range []string{"parameters", "args", "payload"} {
		if col, ok := t.cols[c]; ok {
			expr := "?::jsonb"
			if col.notNull {
				expr = "coalesce(?::jsonb, '{}')"
			}
			add(c, expr, func(a *admission, _ string) any { return a.job.args })
			break
		}
	}
	add("priority", "?", func(a *admission, _ string) any { return a.job.Priority })
	add("queue", "?", func(a *admission, _ string) any { return a.job.Queue })
	add("retries", "?", func(a *admission, _ string) any { return a.job.Retries })
	add("retry_attempt", "?", func(a *admission, _ string) any { return a.job.RetryAttempt })
	startCol := "start_at"
	if l.SingleTable() {
		startCol = l.RunAtColumn
	}
	if col, ok := t.cols[startCol]; ok {
		expr := "?::timestamptz"
		if col.notNull {
			expr = "coalesce(?::timestamptz, now())"
		}
		add(startCol, expr, func(a *admission, _ string) any {
			if a.job.StartAt.IsZero() {
				return nil
			}
			return a.job.StartAt.UTC()
		})
	}
	add("created_at", "now()", nil)
	add("uuid", "gen_random_uuid()", nil)
	add("source", "?", func(a *admission, _ string) any { return a.job.Source })
	if t.has("trace_id") && t.has("span_id") {
		add("trace_id", "?", func(a *admission, _ string) any { return a.job.traceID })
		add("span_id", "?", func(a *admission, _ string) any { return a.job.spanID })
	}
	if l.SingleTable() {
		add(l.StateColumn, "?", func(_ *admission, state string) any {
			if state == "" {
				return l.PendingState()
			}
			return state
		})
	}
	return fs
}

// rowText renders the columns and value expressions of t's new rows,
// numbering their parameters after a's.
func (s *schema) rowText(t *table, a *sqlArgs) (cols, vals []string) {
	for _, f := range s.rowFields(t) {
		cols = append(cols, layout.Ident(f.col))
		if f.val == nil {
			vals = append(vals, f.expr)
			continue
		}
		vals = append(vals, strings.ReplaceAll(f.expr, "?", a.add(nil)))
	}
	return cols, vals
}

// rowArgs appends the parameters of a new row of t for adm, in the order of
// rowText's placeholders. state is the state of a single-table row; ""
// means the pending state.
func (s *schema) rowArgs(t *table, adm *admission, state string, args []any) []any {
	for _, f := range s.rowFieldsOf(t) {
		if f.val != nil {
			args = append(args, f.val(adm, state))
		}
	}
	return args
}

// SkipRecordState is the state of a skip record in a single-table layout;
// SkipRecordStatus is its status in a results table.
const (
	SkipRecordState  = "skipped"
	SkipRecordStatus = "SKIPPED"
)

// skipMetadata is the jsonb of a skip record (SPEC 3).
type skipMetadata struct {
	Reason            string    `json:"reason"`
	Group             string    `json:"group"`
	Limit             int       `json:"limit"`
	Active            int       `json:"active"`
	ConflictingJobIDs []int64   `json:"conflicting_job_ids"`
	ConflictingJobs   []JobRef  `json:"conflicting_jobs"`
	SkippedAt         time.Time `json:"skipped_at"`
}

// skipRecordQuery renders the statement that writes a skip record.
func (s *schema) skipRecordQuery(adm *admission, sk *Skip, at time.Time, out *int64) (query, error) {
	meta, err := skipMetadataJSON(sk, at)
	if err != nil {
		return query{}, err
	}
	t := s.results
	var a sqlArgs
	cols, vals := s.rowText(t, &a)
	a = s.rowArgs(t, adm, SkipRecordState, a[:0:0])
	for _, e := range s.skipRecordExtras(a.add) {
		cols, vals = append(cols, layout.Ident(e[0])), append(vals, e[1])
	}
	cols, vals = append(cols, layout.Ident(layout.SkipMetadataColumn)), append(vals, a.add(string(meta))+"::jsonb")
	sql := qualify.Must("INSERT INTO " + s.l.Table(t.name) + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(vals, ", ") + ") RETURNING " + layout.Ident(s.idColumn()))
	return query{sql: sql, args: a, scan: func(r Row) error { return r.Scan(out) }}, nil
}

// skipRecordExtras lists the columns, and their expressions, that a skip
// record fills beyond a new row's and its metadata; param renders the
// status's parameter.
func (s *schema) skipRecordExtras(param func(any) string) [][2]string {
	t := s.results
	fixed := [][2]string{{"finished_at", "now()"}}
	if !s.l.SingleTable() {
		// plain-jobs' error column is NOT NULL without a default (its
		// migrations create none; Python fills it with "").
		fixed = [][2]string{{"job_request_uuid", "gen_random_uuid()"}, {"job_process_uuid", "gen_random_uuid()"}, {"ended_at", "now()"}, {"error", "''"}}
	}
	var extras [][2]string
	for _, e := range fixed {
		if t.has(e[0]) {
			extras = append(extras, e)
		}
	}
	if !s.l.SingleTable() && t.has("status") {
		extras = append(extras, [2]string{"status", param(SkipRecordStatus)})
	}
	return extras
}

// skipMetadataJSON is sk's skip metadata as JSON.
func skipMetadataJSON(sk *Skip, at time.Time) ([]byte, error) {
	ids := make([]int64, len(sk.Holders))
	for i, h := range sk.Holders {
		ids[i] = h.ID
	}
	return json.Marshal(skipMetadata{
		Reason: string(sk.Reason), Group: sk.Group, Limit: sk.Limit, Active: sk.Active,
		ConflictingJobIDs: ids, ConflictingJobs: sk.Holders, SkippedAt: at.UTC(),
	})
}

// parseHolders reads "table:id,table:id".
func parseHolders(s string) []JobRef {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	refs := make([]JobRef, 0, len(parts))
	for _, p := range parts {
		i := strings.LastIndexByte(p, ':')
		if i < 0 {
			continue
		}
		id, err := strconv.ParseInt(p[i+1:], 10, 64)
		if err != nil {
			continue
		}
		refs = append(refs, JobRef{Table: p[:i], ID: id})
	}
	return refs
}
