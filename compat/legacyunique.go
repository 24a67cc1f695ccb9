package compat

import (
	"context"
	"errors"
	"strings"
)

// While the unique rule on the key still stands (a legacy or expanded
// layout, or one that down is rolling back once it rebuilt the rule), the
// rule refuses a second row of a key it covers whatever the job's limit:
// plain-jobs 0.37's partial unique index allows one pending first attempt
// per (class, key). The admission inserts with ON CONFLICT DO NOTHING on
// the rule, so a job the limit admits and the rule refuses is a Skip with
// Reason SkipUniqueRule, never a 23505, and this holds against a legacy
// writer that takes no lock (plain-jobs 0.37 counts, then inserts): the
// insert waits for its transaction and does nothing once it commits.
// Limits above 1 take effect when the migration completes and the rule is
// gone.
//
// A migration phase can change the layout under a running client: complete
// renames the key column (42703), down rebuilds the rule (23505 from an
// index the cached view did not know of) and renames the column back, down
// drops the runtime's tables (42P01). The enqueue then reads the catalog
// again and retries (EnqueueManyTx). In a caller's transaction on a layout
// whose rule stands, the statements run under a savepoint so that such a
// failure leaves the caller's transaction usable and the enqueue retries
// in it; on the migrated layout there is no savepoint (subtransactions cost
// every session once a transaction holds more than 64 of them), and the
// failure is ErrLayoutChanged: the caller's transaction is aborted and must
// run again.

const legacySavepoint = "migrate_unique_admission"

// rolledBack wraps an admission's failure after ROLLBACK TO SAVEPOINT: the
// caller's transaction is still usable.
type rolledBack struct{ error }

func (e rolledBack) Unwrap() error { return e.error }

// rolledBackTo reports whether err's admission was rolled back to its
// savepoint, leaving the caller's transaction usable.
func rolledBackTo(err error) bool {
	var rb rolledBack
	return errors.As(err, &rb)
}

// runAdmission runs the admission statements qs through db (see run), under
// a savepoint in a caller's transaction while the rule stands.
func (c *Client) runAdmission(ctx context.Context, db DB, s *schema, qs []query) error {
	if !db.InTx() || s.migrated {
		return c.run(ctx, db, qs)
	}
	run := make([]query, 0, len(qs)+2)
	run = append(run, query{sql: "SAVEPOINT " + legacySavepoint})
	run = append(run, qs...)
	run = append(run, query{sql: "RELEASE SAVEPOINT " + legacySavepoint})
	err := c.run(ctx, db, run)
	if err == nil {
		return nil
	}
	if _, rerr := db.Exec(ctx, "ROLLBACK TO SAVEPOINT "+legacySavepoint); rerr != nil {
		return err
	}
	if _, rerr := db.Exec(ctx, "RELEASE SAVEPOINT "+legacySavepoint); rerr != nil {
		return err
	}
	return rolledBack{err}
}

// ruleRefused reports whether the rule, not the limit, kept o's job out:
// nothing was inserted while the count was below the limit (or there was
// none).
func (s *schema) ruleRefused(o admitResult) bool {
	return s.rule != nil && o.id == nil && (o.limit == nil || o.active < int64(*o.limit))
}

// ruleRefusedUnseen reports a refusal by the rule, of a job with a limit,
// for a row the count did not see: no job the count found is in the table
// new jobs go to. (A job without a limit counts nothing.)
func (s *schema) ruleRefusedUnseen(o admitResult) bool {
	return s.ruleRefused(o) && o.limit != nil && !strings.Contains(","+o.holders, ","+s.requests.name+":")
}
