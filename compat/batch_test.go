package compat

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"go.opentelemetry.io/otel/trace"

	"github.com/migrate-unique/migrate-unique/internal/lockid"
	"github.com/migrate-unique/migrate-unique/internal/qualify"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// batchTemplates are the jobs TestEnqueueManyMatchesOneByOne draws batches
// from: every count kind (class-wide, keyed, schedule prefixes, nested
// prefixes), limits in code that differ within one group, groups without a
// limit, groups whose override is read by the count and groups whose
// override decides the lock (carried), a paused class, and skip records.
func batchTemplates(skipRecords bool) []Job {
	occ := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	jobs := []Job{
		{Class: "eq.A", Value: limited("k1", 2)},
		{Class: "eq.A", Value: limited("k1", 3)},
		{Class: "eq.A", Value: limited("k2", 1)},
		{Class: "eq.A", Value: nil},
		{Class: "eq.A", Value: limited("", 4)},
		{Class: "eq.A", Value: keyedJob{key: "free"}},
		{Class: "eq.B", Value: Scheduled(Limit("rep", 1), occ, NoOverlap())},
		{Class: "eq.B", Value: Scheduled(Limit("rep", 1), occ.Add(time.Minute), NoOverlap())},
		{Class: "eq.B", Value: Scheduled(Limit("rep", 2), occ.Add(2*time.Minute))},
		{Class: "eq.B", Value: Scheduled(Limit("rep:scheduled:1", 1), occ, NoOverlap())},
		{Class: "eq.B", Value: Scheduled(Limit("re", 1), occ, NoOverlap())},
		{Class: "eq.C", Value: limited("", 2)},
		{Class: "eq.C", Value: limited("", 2)},
		{Class: "eq.C", Value: limited("x", 1)},
		{Class: "eq.O", Value: nil},                   // keyless: the class's override (2) decides the lock
		{Class: "eq.O", Value: keyedJob{key: "ov"}},   // keyed: its group's override (1) decides the lock
		{Class: "eq.O", Value: keyedJob{key: "none"}}, // keyed, no override: no limit at all
		{Class: "eq.O", Value: limited("y", 1)},
		{Class: "eq.P", Value: limited("p", 3)}, // eq.P is paused: every group of it is blocked
		{Class: "eq.P", Value: nil},
		{Class: "eq.P", Value: keyedJob{key: "q"}},
	}
	if skipRecords {
		jobs = append(jobs, Job{Class: "eq.A", Value: skipper{limited("k1", 2)}}, Job{Class: "eq.C", Value: skipper{limited("", 2)}})
	}
	return jobs
}

// TestEnqueueManyMatchesOneByOne: random batches, in every layout, give the
// same result per job (admitted or not; the skip's group, limit and active
// count; a skip record when wanted) and leave the same rows as the same
// jobs enqueued one by one, across rounds in which some classes' jobs
// finish; over pgx and database/sql, through both ways a batch folds; a
// paused class blocks every job of it in a batch as alone.
func TestEnqueueManyMatchesOneByOne(t *testing.T) {
	for _, s := range legacy.All {
		t.Run(s.Name, func(t *testing.T) {
			ctx := t.Context()
			batch, single := newQueue(t, s, true), newQueue(t, s, true)
			skipRecords := s.Layout.SingleTable() || s.Layout.ResultsTable != ""
			for _, q := range []*queue{batch, single} {
				if s.Layout.SingleTable() {
					if _, err := q.pool.Exec(ctx, `ALTER TABLE jobs DROP CONSTRAINT jobs_status_check`); err != nil {
						t.Fatal(err)
					}
				}
				for g, n := range map[string]int{"eq.O": 2, "eq.O::ov": 1, "eq.A::k2": 2, PauseName("eq.P"): 0} {
					if _, err := q.pool.Exec(ctx, `INSERT INTO `+q.l.Table(layout.LimitsTable)+` (group_name, concurrency_limit) VALUES ($1, $2)`, g, n); err != nil {
						t.Fatal(err)
					}
				}
				q.run(t, "eq.A", "k1")
				q.run(t, "eq.B", ScheduledKey("rep", time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)))
			}
			templates := batchTemplates(skipRecords)
			viaBatch := clients(t, batch)
			sch, err := batch.c.loadSchema(ctx, batch.c.db)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(23, uint64(len(s.Name))))
			folds := map[bool]int{}
			for round := range 24 {
				if round%4 == 3 {
					class := []string{"eq.A", "eq.B", "eq.C", "eq.O"}[rng.IntN(4)]
					batch.finish(t, class)
					single.finish(t, class)
				}
				// Every other batch repeats groups that see no other group's
				// rows (the fan-out shape, which folds by rank).
				pool := templates
				if round%2 == 0 {
					pool = []Job{templates[2], templates[6], templates[11], templates[12], templates[15]}
				}
				jobs := make([]Job, 2+rng.IntN(11))
				for i := range jobs {
					jobs[i] = pool[rng.IntN(len(pool))]
				}
				if round == 1 { // a class-wide limit after keyed jobs of its class: the fold by predecessors
					jobs = append(jobs, templates[0], templates[4], templates[1], templates[4])
				}
				for i := range jobs {
					jobs[i].Args = map[string]int{"round": round, "i": i}
				}
				adms, err := batch.c.prepare(sch, jobs, trace.SpanContext{})
				if err != nil {
					t.Fatal(err)
				}
				planLocks(sch, adms)
				_, byRank := batchRanks(adms)
				folds[byRank]++
				via := "pgx"
				if round%4 >= 2 {
					via = "database-sql"
				}
				got, err := viaBatch[via].EnqueueMany(ctx, jobs)
				if err != nil {
					t.Fatalf("round %d: batch: %v", round, err)
				}
				for i, j := range jobs {
					want, err := single.c.Enqueue(ctx, j)
					if err != nil {
						t.Fatalf("round %d job %d: %v", round, i, err)
					}
					if msg := sameResult(got[i], want); msg != "" {
						t.Fatalf("round %d (%s, fold by rank %v) job %d (%s %+v): %s", round, via, byRank, i, j.Class, IdentityOf(j.Value), msg)
					}
				}
			}
			if folds[true] == 0 || folds[false] == 0 {
				t.Fatalf("batches folded by rank %d times, by predecessors %d times: the test must exercise both", folds[true], folds[false])
			}
			if b, o := activeRows(t, batch), activeRows(t, single); b != o {
				t.Fatalf("active rows after the batches:\n%s\none by one:\n%s", b, o)
			}
		})
	}
}

// sameResult compares a batch's result for a job with the same job's result
// enqueued alone.
func sameResult(got, want Result) string {
	switch {
	case got.Inserted() != want.Inserted():
		return fmt.Sprintf("inserted %v, one by one %v (batch skip %+v, one by one %+v)", got.Inserted(), want.Inserted(), got.Skipped, want.Skipped)
	case got.Inserted():
		if got.ID == 0 {
			return "inserted without an id"
		}
		return ""
	}
	g, w := got.Skipped, want.Skipped
	if g.Group != w.Group || g.Limit != w.Limit || g.Active != w.Active || len(g.Holders) != len(w.Holders) || (g.RecordID == 0) != (w.RecordID == 0) {
		return fmt.Sprintf("skip %+v, one by one %+v", g, w)
	}
	return ""
}

// activeRows lists the queue's rows by table, class, key and state, with
// their count.
func activeRows(t *testing.T, q *queue) string {
	t.Helper()
	var b strings.Builder
	for _, tbl := range q.l.Tables() {
		state := "''"
		if q.l.SingleTable() {
			state = layout.Ident(q.l.StateColumn)
		}
		rows, err := q.pool.Query(t.Context(), `SELECT `+layout.Ident(q.l.ClassColumn)+`, coalesce(concurrency_key, ''), `+state+`::text, count(*) FROM `+q.l.Table(tbl)+
			` WHERE `+layout.Ident(q.l.ClassColumn)+` LIKE 'eq.%' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var class, key, st string
			var n int
			if err := rows.Scan(&class, &key, &st, &n); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s %s %q %s %d\n", tbl, class, key, st, n)
		}
		rows.Close()
	}
	return b.String()
}

// TestEnqueueManyBeforeTheMigration: on the legacy schemas (unique_key, no
// concurrency_limits), a batch of limit-1 keys and keyless jobs admits one
// job per key, as the old unique rule did, in every layout.
func TestEnqueueManyBeforeTheMigration(t *testing.T) {
	for _, s := range legacy.All {
		t.Run(s.Name, func(t *testing.T) {
			q := newQueue(t, s, false)
			jobs := []Job{
				{Class: "old.A", Value: legacyJob{"k1"}}, {Class: "old.A", Value: legacyJob{"k1"}},
				{Class: "old.A", Value: legacyJob{"k2"}}, {Class: "old.A", Value: legacyJob{""}}, {Class: "old.A", Value: legacyJob{"k2"}},
			}
			res, err := q.c.EnqueueMany(t.Context(), jobs)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []bool{true, false, true, true, false} {
				if res[i].Inserted() != want {
					t.Fatalf("job %d: inserted %v, want %v (%+v)", i, res[i].Inserted(), want, res[i].Skipped)
				}
			}
			if sk := res[1].Skipped; sk.Limit != 1 || sk.Active != 1 || len(sk.Holders) != 1 || sk.Holders[0].ID != res[0].ID {
				t.Fatalf("skip of the repeated key: %+v, want limit 1, active 1, held by job 0 (id %d)", sk, res[0].ID)
			}
		})
	}
}

// TestBatchStatementsAreConstant: whatever the batch's size, EnqueueMany is
// one transaction of two statements (the lock statement over every group,
// the count-and-insert over every job); the lock statement's arrays list
// the class's shared lock, then each group's, in the global order.
func TestBatchStatementsAreConstant(t *testing.T) {
	for _, n := range []int{2, 10, 200} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			db, mock, err := sqlmock.New()
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			c, err := NewClient(SQL(db), layout.PlainJobs())
			if err != nil {
				t.Fatal(err)
			}
			mock.ExpectQuery(regexp.QuoteMeta(qualify.Must(catalogQuery))).WillReturnRows(plainJobsCatalog())
			mock.ExpectQuery(regexp.QuoteMeta(qualify.Must(ruleQuery))).WillReturnRows(noRule())
			const class = "app.jobs.FanOut"
			jobs := make([]Job, n)
			keys := make([]string, n)
			for i := range jobs {
				keys[i] = fmt.Sprintf("k%03d", i)
				jobs[i] = Job{Class: class, Value: limited(keys[i], 2)}
			}
			ids, modes := []string{strconv.FormatInt(lockid.For(class, ""), 10)}, []string{`"s"`}
			for _, k := range keys {
				ids, modes = append(ids, strconv.FormatInt(lockid.For(class, k), 10)), append(modes, `"x"`)
			}
			mock.ExpectBegin()
			mock.ExpectExec(regexp.QuoteMeta(`pg_catalog.pg_advisory_xact_lock(g.id)::pg_catalog.text ELSE pg_catalog.pg_advisory_xact_lock_shared(g.id)::pg_catalog.text END) FROM unnest($1::pg_catalog.text::bigint[], $2::pg_catalog.text::pg_catalog.text[]) AS g(id, m))`)).
				WithArgs("{"+strings.Join(ids, ",")+"}", "{"+strings.Join(modes, ",")+"}").
				WillReturnResult(sqlmock.NewResult(0, 1))
			// Every job admitted: one row per inserted job, none for the
			// counts (only a blocked job's count comes back).
			rows := sqlmock.NewRows([]string{"ins", "ord", "lim", "n", "holders", "id", "uuid"})
			for i := range n {
				rows.AddRow(true, nil, nil, nil, nil, 100+i, fmt.Sprintf("uuid-%d", i))
			}
			mock.ExpectQuery(`^` + regexp.QuoteMeta(marked("WITH RECURSIVE c AS ("))).WillReturnRows(rows)
			mock.ExpectCommit()
			res, err := c.EnqueueMany(t.Context(), jobs)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.ID != int64(100+i) || r.UUID != fmt.Sprintf("uuid-%d", i) {
					t.Fatalf("job %d: %+v", i, r)
				}
			}
			if err := mock.ExpectationsWereMet(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
