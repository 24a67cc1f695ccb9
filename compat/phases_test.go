package compat

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// plainJobsRule is plain-jobs 0.37's unique rule on the key.
const plainJobsRule = "plainjobs_jobrequest_unique_job_class_key"

// While the unique rule stands, a batch admits what the rule allows and
// reports the rest as a Skip naming it, in its own transaction and in the
// caller's, whose transaction goes on; jobs the rule does not cover (retries,
// the empty key) go in up to their limit.
func TestRuleStandingBatchSkipsByTheRule(t *testing.T) {
	for _, inTx := range []bool{false, true} {
		t.Run(map[bool]string{false: "own transaction", true: "caller's transaction"}[inTx], func(t *testing.T) {
			q := newQueue(t, legacy.PlainJobs, false)
			ctx := t.Context()
			jobs := []Job{
				{Class: "fan", Value: limited("k", 3)},
				{Class: "fan", Value: limited("k", 3)},
				{Class: "fan", Value: limited("k", 3), RetryAttempt: 1},
				{Class: "fan", Value: limited("k", 3)},
				{Class: "all", Value: limited("", 2)},
				{Class: "all", Value: limited("", 2)},
				{Class: "all", Value: limited("", 2)},
			}
			var res []Result
			var err error
			if inTx {
				err = pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
					if res, err = q.c.EnqueueManyTx(ctx, Pgx(tx), jobs); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, "SELECT 1")
					return err
				})
			} else {
				res, err = q.c.EnqueueMany(ctx, jobs)
			}
			if err != nil {
				t.Fatal(err)
			}
			// Job 3 counts jobs 0 and 2, below its limit: the rule refuses
			// it for job 0.
			want := []SkipReason{"", SkipUniqueRule, "", SkipUniqueRule, "", "", SkipLimit}
			for i, r := range res {
				got := SkipReason("")
				if r.Skipped != nil {
					got = r.Skipped.Reason
					if got == SkipUniqueRule && r.Skipped.Rule != plainJobsRule {
						t.Errorf("job %d: skipped by rule %q, want %s", i, r.Skipped.Rule, plainJobsRule)
					}
				}
				if got != want[i] {
					t.Errorf("job %d: %+v (skip %+v), want reason %q", i, r, r.Skipped, want[i])
				}
			}
			if n := q.count(t, q.l.RequestsTable); n != 4 {
				t.Fatalf("%d requests, want the 4 admitted", n)
			}
		})
	}
}

// A client made before `up` (complete) enqueues inside a caller's
// transaction after it: the renamed column fails its statement under the
// savepoint, it reads the layout again and retries, and the caller's
// transaction commits its own write and the jobs; through pgx (a batch) and
// database/sql (one job).
func TestCallerTransactionFollowsComplete(t *testing.T) {
	for _, driver := range []string{"pgx", "database/sql"} {
		t.Run(driver, func(t *testing.T) {
			q := newQueue(t, legacy.PlainJobs, false)
			ctx := t.Context()
			if r, err := q.c.Enqueue(ctx, Job{Class: "warm", Value: limited("w", 1)}); err != nil || !r.Inserted() {
				t.Fatalf("before up: %+v %v", r, err)
			}
			migrate(t, q.url, q.l.Layout)
			if _, err := q.pool.Exec(ctx, "CREATE TABLE caller_writes (id int)"); err != nil {
				t.Fatal(err)
			}
			var r Result
			var err error
			switch driver {
			case "pgx":
				err = pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, "INSERT INTO caller_writes VALUES (1)"); err != nil {
						return err
					}
					// A batch: both jobs in one admission.
					res, err := q.c.EnqueueManyTx(ctx, Pgx(tx), []Job{{Class: "after", Value: limited("a", 2)}, {Class: "after", Value: limited("b", 2)}})
					if err == nil && !res[1].Inserted() {
						err = fmt.Errorf("second job of the batch skipped: %+v", res[1].Skipped)
					}
					if err == nil {
						r = res[0]
					}
					return err
				})
			default:
				db := stdlib.OpenDBFromPool(q.pool)
				defer db.Close()
				var tx *sql.Tx
				if tx, err = db.BeginTx(ctx, nil); err != nil {
					t.Fatal(err)
				}
				if _, err = tx.ExecContext(ctx, "INSERT INTO caller_writes VALUES (1)"); err != nil {
					t.Fatal(err)
				}
				if r, err = q.c.EnqueueTx(ctx, SQL(tx), Job{Class: "after", Value: limited("a", 2)}); err != nil {
					_ = tx.Rollback()
					break
				}
				err = tx.Commit()
			}
			if err != nil || !r.Inserted() {
				t.Fatalf("enqueue in a caller's transaction after complete, client made before: %+v %v", r, err)
			}
			var writes, jobs int
			if err := q.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM caller_writes), (SELECT count(*) FROM plainjobs_jobrequest WHERE job_class = 'after')`).Scan(&writes, &jobs); err != nil {
				t.Fatal(err)
			}
			if want := map[string]int{"pgx": 2, "database/sql": 1}[driver]; writes != 1 || jobs != want {
				t.Fatalf("after commit: %d caller writes, %d jobs; want 1 and %d", writes, jobs, want)
			}
		})
	}
}

// down rebuilds the unique rule under a client that read the migrated
// layout: an enqueue the rule refuses is a Skip naming it, never a 23505;
// in a caller's transaction, which the 23505 aborted, it is
// ErrLayoutChanged and the transaction's next run gets the Skip. While the
// rebuilt index is not valid yet (a CREATE INDEX CONCURRENTLY still
// building, or one that failed) it refuses duplicates all the same, and the
// refusal is a Skip too (the test marks the index not valid in the catalog,
// as it is between the build's last two phases).
func TestRuleRebuiltUnderAClient(t *testing.T) {
	for _, valid := range []bool{true, false} {
		t.Run(map[bool]string{true: "valid", false: "not valid yet"}[valid], func(t *testing.T) {
			q := newQueue(t, legacy.PlainJobs, true)
			ctx := t.Context()
			for _, k := range []string{"a", "b"} {
				if r, err := q.c.Enqueue(ctx, Job{Class: "c", Value: limited(k, 3)}); err != nil || !r.Inserted() {
					t.Fatalf("before the rule: %+v %v", r, err)
				}
			}
			buildRule := func() {
				t.Helper()
				if _, err := q.pool.Exec(ctx, `DROP INDEX IF EXISTS `+plainJobsRule); err != nil {
					t.Fatal(err)
				}
				if _, err := q.pool.Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY `+plainJobsRule+` ON plainjobs_jobrequest (job_class, concurrency_key) WHERE (retry_attempt = 0 AND concurrency_key > '')`); err != nil {
					t.Fatal(err)
				}
				if !valid {
					if _, err := q.pool.Exec(ctx, `UPDATE pg_index SET indisvalid = false WHERE indexrelid = '`+plainJobsRule+`'::regclass`); err != nil {
						t.Fatal(err)
					}
				}
			}
			buildRule()
			// The caller's transaction: the 23505 aborts it.
			err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
				_, err := q.c.EnqueueTx(ctx, Pgx(tx), Job{Class: "c", Value: limited("a", 3)})
				return err
			})
			if !errors.Is(err, ErrLayoutChanged) {
				t.Fatalf("enqueue in a caller's transaction as the rule reappears: %v, want ErrLayoutChanged", err)
			}
			err = pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
				r, err := q.c.EnqueueTx(ctx, Pgx(tx), Job{Class: "c", Value: limited("a", 3)})
				if err == nil && (r.Inserted() || r.Skipped.Reason != SkipUniqueRule || r.Skipped.Rule != plainJobsRule) {
					t.Errorf("the transaction run again: %+v (skip %+v), want a Skip by %s", r, r.Skipped, plainJobsRule)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			// A client of its own transaction, made before the rule.
			fresh, err := NewClient(Pgx(q.pool), q.l.Layout)
			if err != nil {
				t.Fatal(err)
			}
			if r, err := fresh.Enqueue(ctx, Job{Class: "c", Value: limited("new", 3)}); err != nil || !r.Inserted() {
				t.Fatal(r, err)
			}
			buildRule()
			for _, jobs := range [][]Job{{{Class: "c", Value: limited("new", 3)}}, {{Class: "c", Value: limited("a", 3)}, {Class: "c", Value: limited("new", 3)}, {Class: "c", Value: limited("z", 3)}}} {
				res, err := fresh.EnqueueMany(ctx, jobs)
				if err != nil {
					t.Fatalf("enqueue %d jobs as the rule reappears: %v, want Skips", len(jobs), err)
				}
				for i, r := range res {
					if jobs[i].Value.(keyedJob).key == "z" {
						if !r.Inserted() {
							t.Errorf("a key the rule holds no row of: %+v", r.Skipped)
						}
						continue
					}
					if r.Inserted() || r.Skipped.Reason != SkipUniqueRule || r.Skipped.Rule != plainJobsRule {
						t.Errorf("job %d of %d as the rule reappears: %+v (skip %+v), want a Skip by %s", i, len(jobs), r, r.Skipped, plainJobsRule)
					}
				}
			}
		})
	}
}

// A unique rule whose predicate the admission's text cannot be qualified
// with (IS DISTINCT FROM has no place for OPERATOR(pg_catalog.=)) still
// stands: the insert takes any unique index as its arbiter, and the job it
// refuses is a Skip naming the rule, never a panic or a 23505.
func TestRuleWithAnUnqualifiablePredicate(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	ctx := t.Context()
	const rule = "plainjobs_jobrequest_first_attempt_key"
	if _, err := q.pool.Exec(ctx, `CREATE UNIQUE INDEX `+rule+` ON plainjobs_jobrequest (job_class, concurrency_key) WHERE (retry_attempt IS NOT DISTINCT FROM 0)`); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(Pgx(q.pool), q.l.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Enqueue(ctx, Job{Class: "c", Value: limited("k", 3)}); err != nil || !r.Inserted() {
		t.Fatalf("first job: %+v %v", r, err)
	}
	if s, err := c.loadSchema(ctx, c.db); err != nil || s.rule == nil || s.rule.valid || s.rule.onConflict() != "\n    ON CONFLICT DO NOTHING" {
		t.Fatalf("the rule as the client reads it: %+v %v; want it, with any unique index as the arbiter", s.rule, err)
	}
	r, err := c.Enqueue(ctx, Job{Class: "c", Value: limited("k", 3)})
	if err != nil || r.Inserted() || r.Skipped.Reason != SkipUniqueRule || r.Skipped.Rule != rule {
		t.Fatalf("second job of the key: %+v %v; want a Skip by %s", r.Skipped, err, rule)
	}
}
