// Package neoqlike is shaped like a queue library with no legacy job
// (github.com/acaloiaro/neoq's postgres backend): its Enqueue maps a unique
// violation of its own fingerprint index to its own duplicate-job error.
// That 23505 cannot come from the migrated queue's legacy unique rule (no
// legacy job here, none of the layout's tables named), so nothing is
// reported.
package neoqlike

import (
	"context"
	"errors"

	"github.com/jackc/pgerrcode"
)

// ErrDuplicateJob is returned for a job whose fingerprint is queued already.
var ErrDuplicateJob = errors.New("duplicate job")

// Job is the library's job: data, with a fingerprint, and no UniqueKey.
type Job struct {
	Queue       string
	Fingerprint string
}

type pgError struct{ Code string }

func (e *pgError) Error() string { return e.Code }

// Backend enqueues into the library's own table.
type Backend struct {
	exec func(ctx context.Context, sql string, args ...any) error
}

// Enqueue adds a job; a second one with the same fingerprint is refused by
// the library's own unique index.
func (b *Backend) Enqueue(ctx context.Context, job *Job) (err error) {
	err = b.enqueueJob(ctx, job)
	if err != nil {
		var pgErr *pgError
		if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation {
			return ErrDuplicateJob
		}
		if pgErr != nil && pgErr.Code == "23505" {
			return ErrDuplicateJob
		}
	}
	return err
}

func (b *Backend) enqueueJob(ctx context.Context, job *Job) error {
	return b.exec(ctx, `INSERT INTO neoq_jobs(queue, fingerprint) VALUES ($1, $2)`, job.Queue, job.Fingerprint)
}
