package compat

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/migrate-unique/migrate-unique/internal/lockid"
	"github.com/migrate-unique/migrate-unique/internal/qualify"
	"github.com/migrate-unique/migrate-unique/layout"
)

// Batch admission (EnqueueMany of two jobs or more) runs the protocol of
// admission.go in a constant number of statements, whatever the batch's
// size:
//
//  1. One lock statement takes every group's lock, in the order of
//     planLocks and in the modes lockQuery would take them one by one: an
//     aggregate over unnest(ids, modes) calls the lock functions row by row,
//     in array order (a function scan returns its rows in order). Carried
//     overrides go into their settings as they do for a single job.
//  2. One count-and-insert statement for the whole batch: the jobs as arrays
//     through unnest, each job's bounded count as for a single job (a
//     LATERAL of LIMIT scans over the counting index), then each job counts
//     the jobs of the batch admitted before it whose rows its count would
//     see. When every such job is of the job's own group with the same limit
//     (distinct groups, or repeats of one group: the fan-out case), that is
//     its rank in its group, which the client computes, and a job is
//     admitted when count + rank < limit. Otherwise (a class-wide limit after
//     keyed jobs of the class, mixed limits in one group, overlapping
//     schedule prefixes) a recursive CTE folds the batch in order, each job
//     summing the admitted ones among the predecessors the client listed.
//     The admitted rows are inserted in batch order by one INSERT ... SELECT.
//  3. When blocked jobs want skip records, one INSERT ... SELECT from unnest
//     writes all of them.
//
// Every array goes as one text parameter holding an array literal, cast on
// the server, so the statements work alike through every pgx execution mode
// and every database/sql driver (none needs to encode Go slices).

// batchMinJobs is the smallest batch that takes the set-based path; a
// single job keeps its own statements (admission.go).
const batchMinJobs = 2

// lockOp is one lock of the batch's lock statement.
type lockOp struct {
	id      int64
	mode    string // s: shared, x: exclusive, c: carried class, k: carried keyed
	group   string // carried modes: the group whose override decides
	setting string // carried modes: where the override goes
}

// lockOps lists, in order, the locks lockQuery takes for plans.
func (s *schema) lockOps(plans []*lockPlan) []lockOp {
	ops := make([]lockOp, 0, len(plans)+1)
	class, classID := "", int64(0)
	for i, p := range plans {
		if i == 0 || p.class != class {
			// Plans come sorted by class: one class id for its groups.
			class, classID = p.class, lockid.For(p.class, "")
		}
		switch carries := p.carries(s); {
		case carries && p.key == "":
			ops = append(ops, lockOp{id: classID, mode: "c", group: layout.GroupName(p.class, ""), setting: p.setting})
		case carries && p.sharedClass:
			ops = append(ops, lockOp{id: classID, mode: "s"}, lockOp{id: lockid.For(p.class, p.key), mode: "k", group: layout.GroupName(p.class, p.key), setting: p.setting})
		case carries:
			ops = append(ops, lockOp{id: lockid.For(p.class, p.key), mode: "k", group: layout.GroupName(p.class, p.key), setting: p.setting})
		case p.key != "" && !p.codeLimited || p.key == "" && !(p.hasKeyless && p.codeLimited):
			ops = append(ops, lockOp{id: classID, mode: "s"})
		case p.key != "" && p.sharedClass:
			ops = append(ops, lockOp{id: classID, mode: "s"}, lockOp{id: lockid.For(p.class, p.key), mode: "x"})
		default:
			ops = append(ops, lockOp{id: lockid.For(p.class, p.key), mode: "x"})
		}
	}
	return ops
}

// batchLockQuery renders the batch's lock statement.
func (s *schema) batchLockQuery(plans []*lockPlan) query {
	ops := s.lockOps(plans)
	var ids, modes pgArray
	carried := false
	for _, op := range ops {
		ids.int(op.id)
		modes.str(op.mode)
		carried = carried || op.mode == "c" || op.mode == "k"
	}
	if !carried {
		return query{sql: batchLockText, args: []any{ids.String(), modes.String()}}
	}
	var groups, settings pgArray
	for _, op := range ops {
		groups.str(op.group)
		settings.str(op.setting)
	}
	return s.text("batch/lock/carry", s.batchCarryLockText).query(ids.String(), modes.String(), groups.String(), settings.String())
}

// batchLockText locks without reading overrides. The aggregate's argument is
// evaluated row by row in the function scan's order; the statement is a
// scalar subquery so that the guard's entries, put first in the outer
// target list, run before any lock.
var batchLockText = qualify.Must(`SELECT (SELECT count(CASE WHEN g.m = 'x' THEN pg_advisory_xact_lock(g.id)::text ELSE pg_advisory_xact_lock_shared(g.id)::text END) ` +
	`FROM unnest($1::text::bigint[], $2::text::text[]) AS g(id, m))`)

// batchCarryLockText also reads and carries the overrides of the groups
// whose lock mode they decide (carryLockText, row by row).
func (s *schema) batchCarryLockText() string {
	ov := "set_config(g.setting, coalesce(" + overrideSQL(s.l.Table(layout.LimitsTable), "g.grp") + "::text, ''), true) <> ''"
	return "SELECT (SELECT count(CASE WHEN g.m = 'x' THEN pg_advisory_xact_lock(g.id)::text WHEN g.m = 's' THEN pg_advisory_xact_lock_shared(g.id)::text" +
		" WHEN g.m = 'c' THEN CASE WHEN " + ov + " THEN pg_advisory_xact_lock(g.id)::text ELSE pg_advisory_xact_lock_shared(g.id)::text END" +
		" WHEN g.m = 'k' THEN CASE WHEN " + ov + " THEN pg_advisory_xact_lock(g.id)::text END END) " +
		"FROM unnest($1::text::bigint[], $2::text::text[], $3::text::text[], $4::text::text[]) AS g(id, m, grp, setting))"
}

// Count kinds: what a job's count reads.
const (
	kindClass  = 1 // every active job of the class
	kindKeyed  = 2 // the active jobs of (class, key)
	kindPrefix = 4 // the active jobs of the class whose key starts with the prefix
)

// scope is what one job's count reads.
type scope struct {
	class, key string // key: the key, or the prefix; "" for the class
	kind       int
}

func (a *admission) scope() scope {
	switch {
	case a.lockKey == "":
		return scope{class: a.job.Class, kind: kindClass}
	case a.id.NoOverlap:
		return scope{class: a.job.Class, key: a.id.Prefix, kind: kindPrefix}
	}
	return scope{class: a.job.Class, key: a.id.Key, kind: kindKeyed}
}

// prefixEnd is the first string after every string that starts with p
// (validate keeps p's last byte below 0xff).
func prefixEnd(p string) string { return p[:len(p)-1] + string([]byte{p[len(p)-1] + 1}) }

// sees reports whether a's count reads b's row (b of the same batch).
func (a *admission) sees(b *admission) bool {
	if a.job.Class != b.job.Class {
		return false
	}
	switch sc := a.scope(); sc.kind {
	case kindClass:
		return true
	case kindKeyed:
		return b.id.Key == sc.key
	default:
		return b.id.Key >= sc.key && b.id.Key < prefixEnd(sc.key)
	}
}

// sameLimit reports whether a and b have the same limit in code.
func sameLimit(a, b *admission) bool {
	return a.id.Limited == b.id.Limited && (!a.id.Limited || a.id.Limit == b.id.Limit)
}

// batchRanks returns each job's rank among the earlier jobs of its group
// when the batch folds by rank: every earlier job whose row a job's count
// reads is of its own scope, with the same limit. ok is false otherwise.
// It runs in linear time except for overlapping schedule prefixes.
func batchRanks(adms []*admission) (ranks []int, ok bool) {
	type first struct {
		sc    scope
		adm   *admission
		mixed bool // an earlier job with another scope or limit
	}
	ranks = make([]int, len(adms))
	seen := make(map[scope]int, len(adms))
	classJobs := map[string]*first{}                   // class -> its class-kind jobs so far
	keyedRows := make(map[[2]string]*first, len(adms)) // (class, row key) -> the jobs with that key so far
	keyedJobs := map[string]*first{}                   // class -> its keyed and prefix jobs so far
	var byClass map[string][]*admission                // class -> its keyed and prefix jobs, when a prefix job may read them
	if slices.ContainsFunc(adms, func(a *admission) bool { return a.lockKey != "" && a.id.NoOverlap }) {
		byClass = map[string][]*admission{}
	}
	note := func(m *first, a *admission, sc scope) *first {
		if m == nil {
			return &first{sc: sc, adm: a}
		}
		if m.sc != sc || !sameLimit(m.adm, a) {
			m.mixed = true
		}
		return m
	}
	for i, a := range adms {
		sc := a.scope()
		class := a.job.Class
		switch sc.kind {
		case kindClass:
			if keyedJobs[class] != nil {
				return nil, false
			}
			if m := classJobs[class]; m != nil && (m.mixed || !sameLimit(m.adm, a)) {
				return nil, false
			}
		case kindKeyed:
			if m := keyedRows[[2]string{class, sc.key}]; m != nil && (m.mixed || m.sc != sc || !sameLimit(m.adm, a)) {
				return nil, false
			}
		case kindPrefix:
			if m := keyedJobs[class]; m != nil && (m.mixed || m.sc != sc || !sameLimit(m.adm, a)) {
				for _, b := range byClass[class] {
					if a.sees(b) && (b.scope() != sc || !sameLimit(a, b)) {
						return nil, false
					}
				}
			}
		}
		ranks[i] = seen[sc]
		seen[sc]++
		if sc.kind == kindClass {
			classJobs[class] = note(classJobs[class], a, sc)
			continue
		}
		rk := [2]string{class, a.id.Key}
		keyedRows[rk] = note(keyedRows[rk], a, sc)
		keyedJobs[class] = note(keyedJobs[class], a, sc)
		if byClass != nil {
			byClass[class] = append(byClass[class], a)
		}
	}
	return ranks, true
}

// batchPreds lists, for each job, the earlier jobs (1-based) whose rows its
// count reads, flattened: job i's are preds[offs[i]:offs[i+1]].
func batchPreds(adms []*admission) (preds, offs []int) {
	offs = make([]int, len(adms)+1)
	for i, a := range adms {
		for j := range i {
			if a.sees(adms[j]) {
				preds = append(preds, j+1)
			}
		}
		offs[i+1] = len(preds)
	}
	return preds, offs
}

// batchOut is what the batch statement says of one job.
type batchOut struct {
	admitResult
	ok bool
}

// batchAdmitQuery renders the batch's count-and-insert statement.
func (s *schema) batchAdmitQuery(adms []*admission, outs []batchOut) query {
	var classes, kinds, keys, his, codes, ovs, ocs pgArray
	shapeKinds, reads, carries := 0, false, false
	for _, a := range adms {
		sc := a.scope()
		shapeKinds |= sc.kind
		classes.str(a.job.Class)
		kinds.int(int64(sc.kind))
		switch sc.kind {
		case kindClass:
			keys.null()
			his.null()
		case kindKeyed:
			keys.str(sc.key)
			his.null()
		default:
			keys.str(sc.key)
			his.str(prefixEnd(sc.key))
		}
		if a.id.Limited {
			codes.int(int64(a.id.Limit))
		} else {
			codes.null()
		}
		switch {
		case a.plan.carries(s):
			carries = true
			ovs.str(a.plan.setting)
			ocs.bool(true)
		case s.hasLimits:
			reads = true
			ovs.str(layout.GroupName(a.job.Class, a.lockKey))
			ocs.bool(false)
		}
	}
	args := []any{classes.String(), kinds.String(), keys.String(), his.String(), codes.String()}
	ov := "none"
	switch {
	case carries && reads:
		ov = "both"
		args = append(args, ovs.String(), ocs.String())
	case carries:
		ov = "carried"
		args = append(args, ovs.String())
	case reads:
		ov = "read"
		args = append(args, ovs.String())
	}
	fold := "rank"
	if ranks, ok := batchRanks(adms); ok {
		var r pgArray
		for _, n := range ranks {
			r.int(int64(n))
		}
		args = append(args, r.String())
	} else {
		fold = "preds"
		preds, offs := batchPreds(adms)
		var p, o pgArray
		for _, n := range preds {
			p.int(int64(n))
		}
		for _, n := range offs {
			o.int(int64(n))
		}
		args = append(args, p.String(), o.String())
	}
	fields := s.rowFieldsOf(s.requests)
	for _, f := range fields {
		if f.val == nil {
			continue
		}
		var col pgArray
		for _, a := range adms {
			col.any(f.val(a, ""))
		}
		args = append(args, col.String())
	}
	shape := "batch/admit/" + strconv.Itoa(shapeKinds) + "/" + ov + "/" + fold
	q := s.text(shape, func() string { return s.batchAdmitText(shapeKinds, ov, fold) }).query(args...)
	q.rows = func(r Rows) error { return scanBatch(r, outs) }
	return q
}

// scanBatch reads the batch statement's rows into outs: first one row per
// blocked job, in batch order (false, its 1-based position, limit, count,
// holders), then one per inserted row, in batch order (true, ..., id, uuid),
// which belong to the jobs not reported blocked.
func scanBatch(r Rows, outs []batchOut) error {
	for i := range outs {
		outs[i] = batchOut{ok: true}
	}
	blocked, last := 0, 0
	next := 0 // the next admitted job an inserted row belongs to
	inserted := 0
	// One set of destinations for every row; a pointer kept in outs is
	// cleared after it, so the next row's Scan never writes into it.
	var ins bool
	var ord, id, active *int64
	var limit *int32
	var uuid, holders *string
	for r.Next() {
		if err := r.Scan(&ins, &ord, &limit, &active, &holders, &id, &uuid); err != nil {
			return err
		}
		if !ins {
			if inserted > 0 {
				return fmt.Errorf("the batch statement returned a blocked job after an inserted row")
			}
			if ord == nil || active == nil || holders == nil || limit == nil {
				return fmt.Errorf("the batch statement returned a blocked job without its count")
			}
			if *ord <= int64(last) || *ord > int64(len(outs)) {
				return fmt.Errorf("the batch statement returned job %d out of order (after %d, of %d)", *ord, last, len(outs))
			}
			last = int(*ord)
			outs[last-1] = batchOut{admitResult: admitResult{limit: limit, active: *active, holders: *holders}}
			limit = nil
			blocked++
			continue
		}
		for next < len(outs) && !outs[next].ok {
			next++
		}
		if next == len(outs) || id == nil {
			return fmt.Errorf("the batch statement inserted more rows than it admitted jobs (%d)", len(outs)-blocked)
		}
		outs[next].id, outs[next].uuid = id, uuid
		id, uuid = nil, nil
		next++
		inserted++
	}
	if err := r.Err(); err != nil {
		return err
	}
	if inserted != len(outs)-blocked {
		return fmt.Errorf("the batch statement admitted %d jobs but returned %d rows", len(outs)-blocked, inserted)
	}
	return nil
}

// batchAdmitText builds the batch's count-and-insert statement for the
// count kinds present, where the overrides come from (none, read, carried,
// both) and how the batch folds (rank, preds). Its rows (scanBatch): one per
// blocked job in order (false, position, limit, count, holders), then one
// per inserted row in the same order (true, ..., id, uuid). An admitted job
// sends one row, not two.
func (s *schema) batchAdmitText(kinds int, ov, fold string) string {
	var a sqlArgs
	l := s.l
	var cols, arrays []string
	col := func(name, typ string) {
		cols = append(cols, name)
		arrays = append(arrays, a.add(nil)+"::text::"+typ+"[]")
	}
	col("cls", "text")
	col("kind", "integer")
	col("k", "text")
	col("hi", "text")
	col("code", "integer")
	override := "NULL::integer"
	// Overrides and pauses are rare: when the table has none (one probe
	// for the batch, an uncorrelated subquery evaluated once), no job looks
	// its group up.
	read := "CASE WHEN (SELECT EXISTS (SELECT FROM " + l.Table(layout.LimitsTable) + ")) THEN " + overrideSQL(l.Table(layout.LimitsTable), "j.ov") + " END"
	carried := "CASE WHEN current_setting(j.ov) <> '' THEN current_setting(j.ov)::integer END"
	switch ov {
	case "both":
		col("ov", "text")
		col("oc", "boolean")
		override = "CASE WHEN j.oc THEN " + carried + " ELSE " + read + " END"
	case "carried":
		col("ov", "text")
		override = carried
	case "read":
		col("ov", "text")
		override = read
	}
	var preds, offs string
	if fold == "rank" {
		col("rank", "integer")
	} else {
		preds, offs = a.add(nil)+"::text::integer[]", a.add(nil)+"::text::integer[]"
	}
	fields := s.rowFieldsOf(s.requests)
	var insCols, insVals []string
	for i, f := range fields {
		insCols = append(insCols, layout.Ident(f.col))
		if f.val == nil {
			insVals = append(insVals, f.expr)
			continue
		}
		name := "f" + strconv.Itoa(i)
		col(name, s.requests.fieldType(f))
		insVals = append(insVals, strings.ReplaceAll(f.expr, "?", "c."+name))
	}

	var b strings.Builder
	b.WriteString("WITH RECURSIVE c AS (\n    SELECT j.*, l.n AS lim, u.n, u.holders\n")
	b.WriteString("    FROM unnest(" + strings.Join(arrays, ", ") + ") WITH ORDINALITY AS j(" + strings.Join(cols, ", ") + ", ord)\n")
	b.WriteString("    CROSS JOIN LATERAL (SELECT coalesce(" + override + ", j.code) AS n OFFSET 0) l\n")
	b.WriteString("    CROSS JOIN LATERAL (SELECT count(*) AS n, coalesce(string_agg(x.t || ':' || x.id::text, ','), '') AS holders FROM (")
	// The branches of admitText, one per count kind present, each gated by
	// the job's kind (a one-time filter) when several are.
	stateCond := ""
	if l.SingleTable() {
		stateCond = " AND " + l.StatesCondition()
	}
	id := layout.Ident(s.idColumn())
	classCol := layout.Ident(l.ClassColumn)
	n := 0
	for _, t := range s.activeTables() {
		for _, kind := range []int{kindClass, kindKeyed, kindPrefix} {
			if kinds&kind == 0 {
				continue
			}
			gate := ""
			if kinds != kind {
				gate = "j.kind = " + strconv.Itoa(kind) + " AND "
			}
			var keyCond, keyOrder string
			key := layout.Ident(s.keyCol)
			switch kind {
			case kindKeyed:
				keyCond, keyOrder = s.keyRange(key, "j.k"), ", "+key
			case kindPrefix:
				if !s.bytewise {
					key += ` COLLATE "C"`
				}
				keyCond, keyOrder = " AND "+key+" >= j.k AND "+key+" < j.hi", ", "+key
			}
			if n > 0 {
				b.WriteString("\n        UNION ALL")
			}
			n++
			fmt.Fprintf(&b, "\n        (SELECT %s AS t, %s AS id FROM %s WHERE %s%s = ANY (ARRAY[j.cls])%s%s ORDER BY %s%s LIMIT coalesce(l.n, 0))",
				layout.Literal(t.name), id, l.Table(t.name), gate, classCol, keyCond, stateCond, classCol, keyOrder)
		}
	}
	b.WriteString("\n    ) x) u\n)")
	ok := "(c.lim IS NULL OR (c.n + c.rank) < c.lim)"
	if fold != "rank" {
		// Each job, in order, counts the admitted ones among the earlier
		// jobs whose rows it sees (job i's: preds[offs[i]+1 : offs[i+1]]).
		b.WriteString(", v AS (\n    SELECT array_agg(c.n) AS ns, array_agg(c.lim) AS lims, " + preds + " AS preds, " + offs + " AS offs FROM c\n)")
		b.WriteString(", f(i, adm) AS (\n    SELECT 0, '{}'::boolean[]\n    UNION ALL\n")
		b.WriteString("    SELECT f.i + 1, f.adm || (v.lims[f.i + 1] IS NULL OR (v.ns[f.i + 1] + (SELECT count(*) FROM unnest(v.preds[v.offs[f.i + 1] + 1:v.offs[f.i + 2]]) p WHERE f.adm[p])) < v.lims[f.i + 1])\n")
		b.WriteString("    FROM f, v WHERE f.i < cardinality(v.ns)\n)")
		b.WriteString(", fin AS (\n    SELECT f.adm FROM f, v WHERE f.i = cardinality(v.ns)\n)")
		ok = "(SELECT fin.adm[c.ord] FROM fin)"
	}
	returning := id + "::bigint AS r_id, NULL::text AS r_uuid"
	if s.requests.has("uuid") {
		returning = id + "::bigint AS r_id, " + layout.Ident("uuid") + "::text AS r_uuid"
	}
	fmt.Fprintf(&b, ", ins AS (\n    INSERT INTO %s (%s)\n    SELECT %s\n    FROM c WHERE %s\n    RETURNING %s\n)\n",
		l.Table(s.requests.name), strings.Join(insCols, ", "), strings.Join(insVals, ", "), ok, returning)
	b.WriteString("SELECT false AS ins, c.ord, c.lim, c.n, c.holders, NULL::bigint AS id, NULL::text AS uuid FROM c WHERE NOT " + ok + "\n")
	b.WriteString("UNION ALL\nSELECT true, NULL, NULL, NULL, NULL, ins.r_id, ins.r_uuid FROM ins")
	return b.String()
}

// rowFieldsOf returns rowFields(t), built once per table.
func (s *schema) rowFieldsOf(t *table) []rowField {
	fs, ok := s.fields.Load(t.name)
	if !ok {
		fs, _ = s.fields.LoadOrStore(t.name, s.rowFields(t))
	}
	return fs.([]rowField)
}

// typmod matches a type modifier in format_type's output: (255), (6), (10,2).
var typmod = regexp.MustCompile(`\(\d+(,\d+)?\)`)

// fieldType is the element type of a field's array: the type its expression
// casts its parameter to, else the column's type without its modifier (so a
// value too long for a varchar column fails as it does through a parameter,
// instead of being cut by an explicit cast).
func (t *table) fieldType(f rowField) string {
	if i := strings.Index(f.expr, "?::"); i >= 0 {
		rest := f.expr[i+3:]
		end := strings.IndexFunc(rest, func(r rune) bool { return !(r >= 'a' && r <= 'z') })
		if end < 0 {
			end = len(rest)
		}
		return rest[:end]
	}
	return typmod.ReplaceAllString(t.cols[f.col].typ, "")
}

// pgArray builds a PostgreSQL array literal, element by element.
type pgArray struct {
	b strings.Builder
}

func (a *pgArray) sep() {
	if a.b.Len() == 0 {
		a.b.WriteByte('{')
		return
	}
	a.b.WriteByte(',')
}

func (a *pgArray) null() { a.sep(); a.b.WriteString("NULL") }

func (a *pgArray) int(n int64) { a.sep(); a.b.WriteString(strconv.FormatInt(n, 10)) }

func (a *pgArray) bool(v bool) {
	a.sep()
	if v {
		a.b.WriteByte('t')
	} else {
		a.b.WriteByte('f')
	}
}

func (a *pgArray) str(s string) {
	a.sep()
	a.b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			a.b.WriteByte('\\')
		}
		a.b.WriteByte(s[i])
	}
	a.b.WriteByte('"')
}

func (a *pgArray) any(v any) {
	switch v := v.(type) {
	case nil:
		a.null()
	case string:
		a.str(v)
	case int:
		a.int(int64(v))
	case int64:
		a.int(v)
	case bool:
		a.bool(v)
	case time.Time:
		a.str(v.Format(time.RFC3339Nano))
	default:
		a.str(fmt.Sprint(v))
	}
}

// String returns the literal ("{}" when empty).
func (a *pgArray) String() string {
	if a.b.Len() == 0 {
		return "{}"
	}
	return a.b.String() + "}"
}

// batchSkipRecordsQuery renders one statement that writes the skip records
// of a batch's blocked jobs, in order, returning their ids.
func (s *schema) batchSkipRecordsQuery(adms []*admission, sks []*Skip, at time.Time) (query, error) {
	t := s.results
	var a sqlArgs
	var cols, arrays, vals, insCols []string
	col := func(name, typ string, vs func(*pgArray)) {
		cols = append(cols, name)
		arrays = append(arrays, a.add(nil)+"::text::"+typ+"[]")
		var arr pgArray
		vs(&arr)
		a[len(a)-1] = arr.String()
	}
	for i, f := range s.rowFieldsOf(t) {
		insCols = append(insCols, layout.Ident(f.col))
		if f.val == nil {
			vals = append(vals, f.expr)
			continue
		}
		name := "f" + strconv.Itoa(i)
		col(name, t.fieldType(f), func(arr *pgArray) {
			for _, adm := range adms {
				arr.any(f.val(adm, SkipRecordState))
			}
		})
		vals = append(vals, strings.ReplaceAll(f.expr, "?", "r."+name))
	}
	for _, e := range s.skipRecordExtras(a.add) {
		insCols, vals = append(insCols, layout.Ident(e[0])), append(vals, e[1])
	}
	var metaErr error
	col("meta", "jsonb", func(arr *pgArray) {
		for i, adm := range adms {
			meta, err := skipMetadataJSON(sks[i], at)
			if err != nil {
				metaErr = fmt.Errorf("job class %s: %w", adm.job.Class, err)
			}
			arr.str(string(meta))
		}
	})
	if metaErr != nil {
		return query{}, metaErr
	}
	insCols, vals = append(insCols, layout.Ident(layout.SkipMetadataColumn)), append(vals, "r.meta")
	sql := qualify.Must("INSERT INTO " + s.l.Table(t.name) + " (" + strings.Join(insCols, ", ") + ")\nSELECT " + strings.Join(vals, ", ") +
		"\nFROM unnest(" + strings.Join(arrays, ", ") + ") AS r(" + strings.Join(cols, ", ") + ")\nRETURNING " + layout.Ident(s.idColumn()) + "::bigint")
	return query{sql: sql, args: a, rows: func(r Rows) error {
		i := 0
		for r.Next() {
			if i == len(sks) {
				return fmt.Errorf("%d skip records written, want %d", i+1, len(sks))
			}
			if err := r.Scan(&sks[i].RecordID); err != nil {
				return err
			}
			i++
		}
		if err := r.Err(); err != nil {
			return err
		}
		if i != len(sks) {
			return fmt.Errorf("%d skip records written, want %d", i, len(sks))
		}
		return nil
	}}, nil
}

// admitBatch runs the batch protocol (above) for adms through db.
func (c *Client) admitBatch(ctx context.Context, db DB, s *schema, adms []*admission) ([]Result, error) {
	plans := planLocks(s, adms)
	inTx := db.InTx()
	outs := make([]batchOut, len(adms))
	qs := []query{s.guarded(s.batchLockQuery(plans), c.o.lockWait, inTx), s.batchAdmitQuery(adms, outs)}
	if inTx {
		qs = append(qs, restoreQuery())
	}
	if err := c.admitStatements(ctx, db, s, qs); err != nil {
		return nil, c.admitError(adms, err)
	}
	res := make([]Result, len(adms))
	var recAdms []*admission
	var recSkips []*Skip
	for i, o := range outs {
		a := adms[i]
		if o.ok {
			res[i].ID = *o.id
			if o.uuid != nil {
				res[i].UUID = *o.uuid
			}
			continue
		}
		sk := &Skip{Reason: SkipLimit, Group: layout.GroupName(a.job.Class, a.lockKey), Class: a.job.Class, Key: a.lockKey,
			Active: int(o.active), Holders: parseHolders(o.holders)}
		if o.limit != nil {
			// The count read up to the limit per table; the jobs of the
			// batch admitted before this one that it sees come after.
			sk.Limit = int(*o.limit)
			for j := 0; j < i && sk.Active < sk.Limit; j++ {
				if res[j].Inserted() && a.sees(adms[j]) {
					sk.Active++
					sk.Holders = append(sk.Holders, JobRef{Table: s.requests.name, ID: res[j].ID})
				}
			}
			sk.Active = min(sk.Active, sk.Limit)
			sk.Holders = sk.Holders[:min(len(sk.Holders), sk.Limit)]
		}
		res[i].Skipped = sk
		if a.record {
			recAdms = append(recAdms, a)
			recSkips = append(recSkips, sk)
		}
	}
	if len(recAdms) > 0 {
		q, err := s.batchSkipRecordsQuery(recAdms, recSkips, time.Now())
		if err != nil {
			return nil, fmt.Errorf("compat: skip records for %s: %w", adms[0].job.Class, err)
		}
		if err := c.run(ctx, db, []query{q}); err != nil {
			return nil, fmt.Errorf("compat: write skip records for %s: %w", adms[0].job.Class, err)
		}
	}
	return res, nil
}
