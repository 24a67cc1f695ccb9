package compat

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// Before the migration the requests table still has its unique rule on the
// key (plain-jobs 0.37's partial unique index, a team's unique
// constraint), and a legacy writer that takes no advisory lock (plain-jobs
// 0.37's Python run_in_worker counts, then inserts) can insert the same
// key between this runtime's count and its insert. The insert then fails
// with 23505 once the other transaction commits. That is the limit doing
// its job, not an error: the admission runs again, its count now sees the
// committed row, and the caller gets a Skip like any other. In a caller's
// transaction the statements run under a savepoint, so that the failure
// does not abort the caller's transaction; after the migration there is no
// unique rule and no savepoint.

// legacyAdmissionAttempts bounds the re-runs: each 23505 means another
// writer committed the key, which the next count sees.
const legacyAdmissionAttempts = 3

const legacySavepoint = "migrate_unique_admission"

// runAdmission runs the admission statements qs through db (see run).
func (c *Client) runAdmission(ctx context.Context, db DB, s *schema, qs []query) error {
	if s.migrated {
		return c.run(ctx, db, qs)
	}
	inTx := db.InTx()
	run := qs
	if inTx {
		run = make([]query, 0, len(qs)+2)
		run = append(run, query{sql: "SAVEPOINT " + legacySavepoint})
		run = append(run, qs...)
		run = append(run, query{sql: "RELEASE SAVEPOINT " + legacySavepoint})
	}
	for attempt := 1; ; attempt++ {
		err := c.run(ctx, db, run)
		if attempt == legacyAdmissionAttempts || !s.legacyDuplicate(err) {
			return err
		}
		if inTx {
			if _, rerr := db.Exec(ctx, "ROLLBACK TO SAVEPOINT "+legacySavepoint); rerr != nil {
				return err
			}
		}
	}
}

// legacyDuplicate reports a unique violation on the requests table of a
// layout that is not migrated: the legacy unique rule on the key.
func (s *schema) legacyDuplicate(err error) bool {
	var pe *pgconn.PgError
	return !s.migrated && errors.As(err, &pe) && pe.Code == "23505" && pe.TableName == s.requests.name
}
