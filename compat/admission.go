package compat

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/migrate-unique/migrate-unique/internal/layout"
	"github.com/migrate-unique/migrate-unique/internal/lockid"
)

// The admission protocol (SPEC 3), for a batch of jobs in one transaction:
//
//  1. Lock statements, one per class then one per keyed group, in the global
//     order (class, key) with the class first, so two transactions never
//     wait on each other in a cycle. A class statement takes the class-wide
//     lock exclusively when a keyless job of the class is limited (by code
//     or by an override) and shared otherwise; a group statement takes the
//     group lock when the group is limited. Each statement also reads the
//     group's override from concurrency_limits and keeps it in a
//     transaction-local setting, so the count below uses exactly the limit
//     the lock was chosen for.
//  2. One count-and-insert statement per job. It starts after the locks are
//     held, so under READ COMMITTED its snapshot sees every job admitted
//     before it; the count stops at the limit (LIMIT), so a check reads at
//     most limit index entries per table.
//
// With pgx the statements are pipelined in one batch: one round trip, and,
// outside a caller's transaction, one implicit transaction.

// overrideSetting names the transaction-local setting that carries group i's
// override from its lock statement to the count.
func overrideSetting(i int) string { return "migrate_unique.override_" + strconv.Itoa(i) }

// sqlArgs numbers the parameters of a statement as it is written.
type sqlArgs []any

func (a *sqlArgs) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// query is one statement of a batch; scan reads its single row (nil: none).
type query struct {
	sql  string
	args []any
	scan func(Row) error
}

// admission is one job on its way in, validated.
type admission struct {
	job     Job
	id      Identity
	lockKey string // the group's key: id.Key, or id.Prefix in no-overlap mode
	setting string // the override setting of its group
	record  bool   // write a skip record when blocked
}

// lockPlan is one lock statement: a class (key "") or a keyed group.
type lockPlan struct {
	class, key  string
	setting     string
	hasKeyless  bool // class plans: a keyless job of the class is in the batch
	codeLimited bool // some job of the group has a limit in code
	sharedClass bool // group plans: take the class's shared lock first
}

// planLocks orders the batch's groups and gives each admission the setting
// that will carry its group's override.
func planLocks(adms []*admission) []*lockPlan {
	byGroup := map[[2]string]*lockPlan{}
	get := func(class, key string) *lockPlan {
		k := [2]string{class, key}
		p := byGroup[k]
		if p == nil {
			p = &lockPlan{class: class, key: key}
			byGroup[k] = p
		}
		return p
	}
	for _, a := range adms {
		cp := get(a.job.Class, "")
		if a.lockKey == "" {
			cp.hasKeyless = true
			cp.codeLimited = cp.codeLimited || a.id.Limited
			continue
		}
		gp := get(a.job.Class, a.lockKey)
		gp.codeLimited = gp.codeLimited || a.id.Limited
	}
	all := make([]*lockPlan, 0, len(byGroup))
	for _, p := range byGroup {
		all = append(all, p)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].class != all[j].class {
			return all[i].class < all[j].class
		}
		return all[i].key < all[j].key
	})
	// A class without keyless jobs only needs its shared lock: it is taken
	// by the class's first group statement, before the group's own lock, so
	// the order stays the same and a keyed enqueue is one lock statement.
	plans := all[:0]
	for i, p := range all {
		p.setting = overrideSetting(i)
		if p.key == "" && !p.hasKeyless && i+1 < len(all) && all[i+1].class == p.class {
			all[i+1].sharedClass = true
			continue
		}
		plans = append(plans, p)
	}
	for _, a := range adms {
		a.setting = byGroup[[2]string{a.job.Class, a.lockKey}].setting
	}
	return plans
}

// lockQuery renders a lock statement.
func (s *schema) lockQuery(p *lockPlan) query {
	var a sqlArgs
	var cond, lock string
	if p.key == "" {
		cond = a.add(p.hasKeyless) + "::boolean AND (" + a.add(p.codeLimited) + "::boolean OR s.o <> '')"
		id := a.add(lockid.For(p.class, ""))
		lock = "CASE WHEN " + cond + " THEN pg_advisory_xact_lock(" + id + ")::text ELSE pg_advisory_xact_lock_shared(" + id + ")::text END"
	} else {
		if p.sharedClass {
			// Target-list entries are evaluated left to right.
			lock = "pg_advisory_xact_lock_shared(" + a.add(lockid.For(p.class, "")) + ")::text, "
		}
		cond = a.add(p.codeLimited) + "::boolean OR s.o <> ''"
		lock += "CASE WHEN " + cond + " THEN pg_advisory_xact_lock(" + a.add(lockid.For(p.class, p.key)) + ")::text END"
	}
	override := "''"
	if s.hasLimits {
		override = "coalesce((SELECT concurrency_limit::text FROM " + s.l.Table(layout.LimitsTable) +
			" WHERE group_name = " + a.add(layout.GroupName(p.class, p.key)) + "), '')"
	}
	sql := "SELECT " + lock + " FROM (SELECT set_config(" + a.add(p.setting) + ", " + override + ", true) AS o OFFSET 0) s"
	return query{sql: sql, args: a}
}

// admitResult is the row an admission statement returns.
type admitResult struct {
	limit   *int32
	active  int64
	holders string
	id      *int64
	uuid    *string
}

// admitQuery renders the count-and-insert statement of one job.
func (s *schema) admitQuery(adm *admission, out *admitResult) query {
	var a sqlArgs
	l := s.l
	var codeLimit any
	if adm.id.Limited {
		codeLimit = adm.id.Limit
	}
	var b strings.Builder
	b.WriteString("WITH lim AS (\n    SELECT coalesce(nullif(current_setting(" + a.add(adm.setting) + "), '')::integer, " + a.add(codeLimit) + "::integer) AS n\n), active AS (\n    SELECT t, id FROM (")

	class := a.add(adm.job.Class)
	var keyCond string
	key := layout.Ident(s.keyCol)
	switch {
	case adm.lockKey == "":
	case adm.id.NoOverlap:
		collate := ""
		if !s.cCollation {
			collate = ` COLLATE "C"`
		}
		p := adm.id.Prefix
		hi := p[:len(p)-1] + string(p[len(p)-1]+1)
		keyCond = " AND " + key + collate + " >= " + a.add(p) + " AND " + key + collate + " < " + a.add(hi)
	default:
		keyCond = " AND " + key + " = " + a.add(adm.id.Key)
	}
	stateCond := ""
	if l.SingleTable() {
		stateCond = " AND " + layout.Ident(l.StateColumn) + " IN " + l.StatesList()
	}
	id := layout.Ident(s.idColumn())
	for i, t := range s.activeTables() {
		if i > 0 {
			b.WriteString("\n        UNION ALL")
		}
		fmt.Fprintf(&b, "\n        (SELECT %s AS t, %s AS id FROM %s WHERE (SELECT n FROM lim) IS NOT NULL AND %s = %s%s%s LIMIT (SELECT n FROM lim))",
			layout.Literal(t.name), id, l.Table(t.name), layout.Ident(l.ClassColumn), class, keyCond, stateCond)
	}
	b.WriteString("\n    ) a LIMIT (SELECT n FROM lim)\n), ins AS (\n    ")

	cols, vals := s.rowValues(s.requests, adm, &a, "")
	returning := id + " AS r_id, NULL::text AS r_uuid"
	if s.requests.has("uuid") {
		returning = id + " AS r_id, " + layout.Ident("uuid") + "::text AS r_uuid"
	}
	fmt.Fprintf(&b, "INSERT INTO %s (%s)\n    SELECT %s\n    WHERE (SELECT n FROM lim) IS NULL OR (SELECT count(*) FROM active) < (SELECT n FROM lim)\n    RETURNING %s\n)\n",
		l.Table(s.requests.name), strings.Join(cols, ", "), strings.Join(vals, ", "), returning)
	b.WriteString("SELECT (SELECT n FROM lim), (SELECT count(*) FROM active), coalesce((SELECT string_agg(t || ':' || id::text, ',') FROM active), ''), (SELECT r_id FROM ins), (SELECT r_uuid FROM ins)")
	return query{sql: b.String(), args: a, scan: func(r Row) error {
		return r.Scan(&out.limit, &out.active, &out.holders, &out.id, &out.uuid)
	}}
}

// rowValues returns the columns and value expressions of a new row of t for
// the job: every column the runtime knows that t has. state is the state of
// a single-table row; "" means the pending state.
func (s *schema) rowValues(t *table, adm *admission, a *sqlArgs, state string) (cols, vals []string) {
	l := s.l
	j := adm.job
	add := func(col, val string) {
		if t.has(col) {
			cols = append(cols, layout.Ident(col))
			vals = append(vals, val)
		}
	}
	add(l.ClassColumn, a.add(j.Class))
	if t.cols[s.keyCol].notNull {
		add(s.keyCol, a.add(adm.id.Key))
	} else {
		add(s.keyCol, "nullif("+a.add(adm.id.Key)+", '')")
	}
	for _, c := range []string{"parameters", "args", "payload"} {
		if col, ok := t.cols[c]; ok {
			v := a.add(j.args) + "::jsonb"
			if col.notNull {
				v = "coalesce(" + v + ", '{}')"
			}
			add(c, v)
			break
		}
	}
	if t.has("priority") {
		add("priority", a.add(j.Priority))
	}
	if t.has("queue") {
		add("queue", a.add(j.Queue))
	}
	if t.has("retries") {
		add("retries", a.add(j.Retries))
	}
	if t.has("retry_attempt") {
		add("retry_attempt", a.add(j.RetryAttempt))
	}
	startCol := "start_at"
	if l.SingleTable() {
		startCol = l.RunAtColumn
	}
	if col, ok := t.cols[startCol]; ok {
		var start any
		if !j.StartAt.IsZero() {
			start = j.StartAt.UTC()
		}
		v := a.add(start) + "::timestamptz"
		if col.notNull {
			v = "coalesce(" + v + ", now())"
		}
		add(startCol, v)
	}
	add("created_at", "now()")
	add("uuid", "gen_random_uuid()")
	if t.has("source") {
		add("source", a.add(j.Source))
	}
	if t.has("trace_id") && t.has("span_id") {
		add("trace_id", a.add(j.traceID))
		add("span_id", a.add(j.spanID))
	}
	if l.SingleTable() {
		if state == "" {
			state = l.PendingState()
		}
		add(l.StateColumn, a.add(state))
	}
	return cols, vals
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
	ids := make([]int64, len(sk.Holders))
	for i, h := range sk.Holders {
		ids[i] = h.ID
	}
	meta, err := json.Marshal(skipMetadata{
		Reason: "concurrency_limit", Group: sk.Group, Limit: sk.Limit, Active: sk.Active,
		ConflictingJobIDs: ids, ConflictingJobs: sk.Holders, SkippedAt: at.UTC(),
	})
	if err != nil {
		return query{}, err
	}
	var a sqlArgs
	t := s.results
	cols, vals := s.rowValues(t, adm, &a, SkipRecordState)
	add := func(col, val string) {
		if t.has(col) {
			cols = append(cols, layout.Ident(col))
			vals = append(vals, val)
		}
	}
	if !s.l.SingleTable() {
		add("job_request_uuid", "gen_random_uuid()")
		add("job_process_uuid", "gen_random_uuid()")
		add("ended_at", "now()")
		add("status", a.add(SkipRecordStatus))
	} else {
		add("finished_at", "now()")
	}
	add(layout.SkipMetadataColumn, a.add(string(meta))+"::jsonb")
	sql := "INSERT INTO " + s.l.Table(t.name) + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(vals, ", ") + ") RETURNING " + layout.Ident(s.idColumn())
	return query{sql: sql, args: a, scan: func(r Row) error { return r.Scan(out) }}, nil
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
