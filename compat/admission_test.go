package compat

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/migrate-unique/migrate-unique/internal/lockid"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// keyedJob is a job type with the new API.
type keyedJob struct {
	key     string
	limit   int
	limited bool
}

func (j keyedJob) ConcurrencyKey() string        { return j.key }
func (j keyedJob) ConcurrencyLimit() (int, bool) { return j.limit, j.limited }

// legacyJob is an old job type: UniqueKey only.
type legacyJob struct{ key string }

func (j legacyJob) UniqueKey() string { return j.key }

func limited(key string, n int) keyedJob { return keyedJob{key: key, limit: n, limited: true} }

// clients returns the queue's client over pgx and over database/sql.
func clients(t *testing.T, q *queue) map[string]*Client {
	t.Helper()
	sqlDB := stdlib.OpenDBFromPool(q.pool)
	t.Cleanup(func() { _ = sqlDB.Close() })
	viaSQL, err := NewClient(SQL(sqlDB), q.l.Layout)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*Client{"pgx": q.c, "database-sql": viaSQL}
}

// step is one enqueue and what it must give.
type step struct {
	value    any
	running  bool   // start a running job of key (as a worker would) instead
	key      string // the running job's key
	finish   bool   // finish every active job of the class first
	inserted bool
	group    string // the skip's group, when skipped
	limit    int
	active   int
	holders  []int // indexes of the steps whose rows hold the group
}

// TestAdmissionRules walks every row of SPEC 3's table, limit 0, running and
// finished jobs, legacy UniqueKey jobs and a class-wide limit among keyed
// jobs, on every legacy schema after the migration, through pgx and
// database/sql.
func TestAdmissionRules(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
	}{
		{"no key, no limit: no check", []step{
			{value: keyedJob{}, inserted: true}, {value: keyedJob{}, inserted: true}, {value: nil, inserted: true},
		}},
		{"no key, limit N: at most N of the class", []step{
			{value: limited("", 2), inserted: true}, {value: limited("", 2), inserted: true},
			{value: limited("", 2), group: "", limit: 2, active: 2, holders: []int{0, 1}},
		}},
		{"key, no limit: unlimited", []step{
			{value: keyedJob{key: "k"}, inserted: true}, {value: keyedJob{key: "k"}, inserted: true}, {value: keyedJob{key: "k"}, inserted: true},
		}},
		{"key, limit N: at most N of (class, key)", []step{
			{value: limited("k", 2), inserted: true}, {value: limited("k", 2), inserted: true},
			{value: limited("k", 2), group: "k", limit: 2, active: 2, holders: []int{0, 1}},
			{value: limited("other", 2), inserted: true},
		}},
		{"limit 0 blocks everything", []step{
			{value: limited("k", 0), group: "k", limit: 0, active: 0},
			{value: limited("", 0), group: "", limit: 0, active: 0},
		}},
		{"running jobs count", []step{
			{key: "k", running: true, inserted: true},
			{value: limited("k", 2), inserted: true},
			{value: limited("k", 2), group: "k", limit: 2, active: 2, holders: []int{0, 1}},
		}},
		{"finished jobs never count", []step{
			{value: limited("k", 1), inserted: true},
			{value: limited("k", 1), group: "k", limit: 1, active: 1, holders: []int{0}},
			{value: limited("k", 1), finish: true, inserted: true},
		}},
		{"class-wide limit while keyed jobs are inserted", []step{
			{value: keyedJob{key: "a"}, inserted: true}, {value: limited("b", 5), inserted: true},
			{value: limited("", 3), inserted: true},
			{value: limited("", 3), group: "", limit: 3, active: 3, holders: []int{0, 1, 2}},
			{value: keyedJob{key: "c"}, inserted: true},
		}},
		{"legacy UniqueKey jobs: key means limit 1, empty key no limit", []step{
			{value: legacyJob{"x"}, inserted: true},
			{value: legacyJob{"x"}, group: "x", limit: 1, active: 1, holders: []int{0}},
			{value: legacyJob{""}, inserted: true}, {value: legacyJob{""}, inserted: true},
		}},
	}
	for _, s := range legacy.All {
		t.Run(s.Name, func(t *testing.T) {
			q := newQueue(t, s, true)
			for via, c := range clients(t, q) {
				for ci, tc := range cases {
					t.Run(via+"/"+tc.name, func(t *testing.T) {
						class := "app.jobs." + via + "." + string(rune('A'+ci))
						ids := make([]int64, len(tc.steps))
						tables := make([]string, len(tc.steps))
						for i, st := range tc.steps {
							if st.finish {
								q.finish(t, class)
							}
							if st.running {
								ids[i] = q.run(t, class, st.key)
								tables[i] = q.l.ActiveTables()[len(q.l.ActiveTables())-1]
								if !st.inserted {
									t.Fatalf("step %d: a running job is always inserted", i)
								}
								continue
							}
							res, err := c.Enqueue(t.Context(), Job{Class: class, Value: st.value, Args: map[string]int{"step": i}})
							if err != nil {
								t.Fatalf("step %d: %v", i, err)
							}
							if res.Inserted() != st.inserted {
								t.Fatalf("step %d: inserted = %v, want %v (skip %+v)", i, res.Inserted(), st.inserted, res.Skipped)
							}
							if st.inserted {
								if res.ID <= 0 {
									t.Fatalf("step %d: inserted with id %d", i, res.ID)
								}
								ids[i], tables[i] = res.ID, q.l.Tables()[0]
								continue
							}
							sk := res.Skipped
							wantGroup := layout.GroupName(class, st.group)
							if sk.Group != wantGroup || sk.Limit != st.limit || sk.Active != st.active {
								t.Fatalf("step %d: skip %+v, want group %q limit %d active %d", i, sk, wantGroup, st.limit, st.active)
							}
							var want []JobRef
							for _, h := range st.holders {
								want = append(want, JobRef{Table: tables[h], ID: ids[h]})
							}
							got := slices.Clone(sk.Holders)
							sortRefs(got)
							sortRefs(want)
							if !slices.Equal(got, want) {
								t.Fatalf("step %d: holders %v, want %v", i, got, want)
							}
						}
					})
				}
			}
		})
	}
}

// TestSkipReportsAtMostTheLimit: a group above its limit (two running and
// two pending jobs, then limit 2) is reported with the limit as its active
// count and as many holders, each one of the group's active jobs, over
// pgx and database/sql.
func TestSkipReportsAtMostTheLimit(t *testing.T) {
	for _, s := range legacy.All {
		t.Run(s.Name, func(t *testing.T) {
			q := newQueue(t, s, true)
			for via, c := range clients(t, q) {
				class := "app.jobs.Over." + via
				running := q.l.ActiveTables()[len(q.l.ActiveTables())-1]
				active := map[JobRef]bool{}
				for range 2 {
					active[JobRef{Table: running, ID: q.run(t, class, "k")}] = true
				}
				for range 2 {
					res, err := c.Enqueue(t.Context(), Job{Class: class, Value: limited("k", 4)})
					if err != nil || !res.Inserted() {
						t.Fatalf("%s: %+v, %v", via, res, err)
					}
					active[JobRef{Table: q.l.Tables()[0], ID: res.ID}] = true
				}
				res, err := c.Enqueue(t.Context(), Job{Class: class, Value: limited("k", 2)})
				if err != nil || res.Inserted() {
					t.Fatalf("%s: %+v, %v", via, res, err)
				}
				sk := res.Skipped
				if sk.Limit != 2 || sk.Active != 2 || len(sk.Holders) != 2 || sk.Holders[0] == sk.Holders[1] {
					t.Fatalf("%s: skip %+v, want limit 2, active 2, two holders", via, sk)
				}
				for _, h := range sk.Holders {
					if !active[h] {
						t.Fatalf("%s: holder %+v is not one of the group's active jobs %v", via, h, active)
					}
				}
			}
		})
	}
}

func sortRefs(r []JobRef) {
	slices.SortFunc(r, func(a, b JobRef) int {
		if c := strings.Compare(a.Table, b.Table); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
}

// TestInvalidJobsInsertNothing: a negative limit, a key too long for the
// column, a key or class with a NUL byte and an empty class are clear errors
// and leave the tables as they were.
func TestInvalidJobsInsertNothing(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	long := strings.Repeat("é", 256) // plain-jobs' key is varchar(255): characters, not bytes
	cases := []struct {
		name string
		job  Job
		want string
	}{
		{"negative limit", Job{Class: "c", Value: limited("k", -1)}, "negative concurrency limit -1"},
		{"negative class-wide limit", Job{Class: "c", Value: limited("", -3)}, "negative concurrency limit -3"},
		{"key too long", Job{Class: "c", Value: limited(long, 1)}, "is 256 characters long; the key column holds at most 255"},
		{"NUL in key", Job{Class: "c", Value: limited("a\x00b", 1)}, "contains a NUL byte"},
		{"NUL in class", Job{Class: "c\x00", Value: nil}, "contains a NUL byte"},
		{"empty class", Job{Value: limited("k", 1)}, "job class is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// In a batch after a valid job: the valid one must not go in either.
			_, err := q.c.EnqueueMany(t.Context(), []Job{{Class: "c", Value: limited("ok", 1)}, tc.job})
			if !errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidJob containing %q", err, tc.want)
			}
			if n := q.count(t, q.l.RequestsTable); n != 0 {
				t.Fatalf("%d rows inserted", n)
			}
		})
	}
	// The same key fits exactly at 255 characters.
	if res, err := q.c.Enqueue(t.Context(), Job{Class: "c", Value: limited(long[:255*2], 1)}); err != nil || !res.Inserted() {
		t.Fatalf("255-character key: %+v, %v", res, err)
	}
}

// TestLockIDsArePlainJobs pins the advisory-lock ids to plain-jobs' vectors.
func TestLockIDsArePlainJobs(t *testing.T) {
	for _, v := range []struct {
		class, key string
		id         int64
	}{
		{"app.jobs.ChargeJob", "charge-7", 7527929927103732752},
		{"app.jobs.ChargeJob", "", -744096600792446844},
	} {
		if got := lockid.For(v.class, v.key); got != v.id {
			t.Errorf("lockid.For(%q, %q) = %d, want %d", v.class, v.key, got, v.id)
		}
	}
}

// TestEnqueueManyCountsEarlierJobsOfTheBatch: a batch is one transaction in
// which each job counts every job admitted before it, across classes and
// groups, with one result per job in order.
func TestEnqueueManyCountsEarlierJobsOfTheBatch(t *testing.T) {
	q := newQueue(t, legacy.SingleTable, true)
	jobs := []Job{
		{Class: "b.A", Value: limited("k", 2)}, {Class: "b.B", Value: limited("", 1)},
		{Class: "b.A", Value: limited("k", 2)}, {Class: "b.B", Value: keyedJob{key: "x"}},
		{Class: "b.A", Value: limited("k", 2)}, {Class: "b.B", Value: limited("", 2)},
		{Class: "b.A", Value: limited("", 3)},
	}
	res, err := q.c.EnqueueMany(t.Context(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, true, true, true, false, false, true}
	for i, r := range res {
		if r.Inserted() != want[i] {
			t.Fatalf("job %d: inserted %v, want %v (%+v)", i, r.Inserted(), want[i], r.Skipped)
		}
	}
	if s := res[5].Skipped; s.Group != "b.B" || s.Active != 2 || s.Limit != 2 {
		t.Fatalf("class-wide skip after a keyed job of the batch: %+v", s)
	}
	if n := q.count(t, q.l.JobsTable); n != 5 {
		t.Fatalf("%d rows, want 5", n)
	}
}

// TestEmptyKeyFollowsTheColumn: a keyless job stores NULL in a nullable key
// column (the team queue, the single-table queue) and the empty string in a NOT NULL one
// (plain-jobs), as each queue's own writers do.
func TestEmptyKeyFollowsTheColumn(t *testing.T) {
	for _, tc := range []struct {
		s        legacy.Schema
		wantNull bool
	}{{legacy.PlainJobs, false}, {legacy.TeamQueue, true}, {legacy.SingleTable, true}} {
		t.Run(tc.s.Name, func(t *testing.T) {
			q := newQueue(t, tc.s, true)
			res, err := q.c.Enqueue(t.Context(), Job{Class: "k.A", Value: limited("", 2)})
			if err != nil || !res.Inserted() {
				t.Fatal(res, err)
			}
			var key *string
			if err := q.pool.QueryRow(t.Context(), `SELECT concurrency_key FROM `+q.l.Table(q.l.Tables()[0])+` WHERE id = $1`, res.ID).Scan(&key); err != nil {
				t.Fatal(err)
			}
			if (key == nil) != tc.wantNull || (key != nil && *key != "") {
				t.Fatalf("stored key %v, want NULL: %v", key, tc.wantNull)
			}
		})
	}
}
