package compat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/migrate-unique/migrate-unique/internal/qualify"
	"github.com/migrate-unique/migrate-unique/layout"
)

// ErrNotRetryable is returned by Retry for a result that is not retryable
// now: not failed, out of attempts, already retried, or being retried by
// another sweeper at this moment.
var ErrNotRetryable = errors.New("result is not retryable")

// ErrRetryScope is returned by RetrySweep when its options name no class to
// retry and do not ask for every class (RetryOptions.ClassNames, Classes,
// AllClasses): a sweep never retries a class nobody gave it, so that it
// cannot retry the results plain-jobs' own sweeper retries.
var ErrRetryScope = errors.New("retry sweep without classes")

// RetryableStatuses are the result statuses a retry sweep picks up (SPEC 4).
var RetryableStatuses = []string{"ERRORED", "LOST", "CANCELLED"}

// Classes is a registry of job classes: for each class, how to rebuild a
// job value from the parameters its row stores. Code that only has a stored
// row (a retry) reads the class's limit from the rebuilt value exactly as
// Enqueue reads it from the value it is given (IdentityOf), so a sweeper
// does not restate each class's limit by hand. Decode builds the usual
// entry.
type Classes map[string]func(params []byte) (job any, err error)

// Decode is a Classes entry for job type T: it unmarshals the stored
// parameters (the JSON of Job.Args) into a T. Stored parameters that are
// NULL give T's zero value. Register it as compat.Decode[ChargeJob].
func Decode[T any](params []byte) (any, error) {
	var job T
	if len(params) == 0 {
		return job, nil
	}
	if err := json.Unmarshal(params, &job); err != nil {
		return nil, err
	}
	return job, nil
}

// RetryOptions configures Retry and RetrySweep.
type RetryOptions struct {
	// Classes rebuilds each retried job's value from its stored parameters;
	// the retry's limit is the value's own (its ConcurrencyLimit, or the
	// legacy UniqueKey reading), as Enqueue reads it, and a retry of a
	// scheduled occurrence whose job has no limit keeps limit 1 (Scheduled's
	// default). The key is always the stored one (a scheduled key too).
	Classes Classes
	// Limit, when set, returns the concurrency limit of a retry of class
	// with key (the stored key) and wins over Classes.
	//
	// A class that neither Limit nor Classes covers falls back to the
	// legacy reading of the stored key, as the legacy queue behaved: ""
	// is unlimited, any other key has limit 1.
	Limit func(class, key string) (limit int, ok bool)
	// Backoff returns the delay before retry attempt n (1 for the first
	// retry). nil: 10s * 2^(n-1), at most one hour.
	Backoff func(attempt int) time.Duration
	// BatchSize is how many results a sweep locks and retries per
	// transaction. Default 100.
	BatchSize int
	// ClassNames are job classes RetrySweep retries, beside the classes
	// of Classes. A sweep retries only the classes it is given: with
	// neither ClassNames nor Classes it returns ErrRetryScope, unless
	// AllClasses is set. Leave the classes plain-jobs' Python workers run to
	// plain-jobs' own sweeper, which locks no row: two sweepers on one
	// result retry it twice (docs/runtime.md, "Go and Python writers").
	// Retry, which names its result, ignores the scope.
	ClassNames []string
	// AllClasses makes RetrySweep retry every class's results: only where
	// no other sweeper (plain-jobs' workers) retries results of the same
	// tables.
	AllClasses bool
}

// sweepClasses is the sweep's class filter: nil for every class.
func (o RetryOptions) sweepClasses() ([]string, error) {
	if o.AllClasses {
		return nil, nil
	}
	classes := append([]string(nil), o.ClassNames...)
	for c := range o.Classes {
		classes = append(classes, c)
	}
	if len(classes) == 0 {
		return nil, fmt.Errorf("compat: %w: name the classes this sweeper retries (RetryOptions.ClassNames or Classes), or set AllClasses when no other sweeper (plain-jobs' Python workers) retries results of these tables; nothing was retried", ErrRetryScope)
	}
	return classes, nil
}

// identity is the concurrency identity a retry of class with the stored
// key and params is admitted under: Limit, else the class's job value from
// Classes, else the legacy reading.
func (o RetryOptions) identity(class, key string, params []byte) (Identity, error) {
	if o.Limit != nil {
		n, ok := o.Limit(class, key)
		return Identity{Key: key, Limit: n, Limited: ok}, nil
	}
	if build, ok := o.Classes[class]; ok && build != nil {
		job, err := build(params)
		if err != nil {
			return Identity{}, fmt.Errorf("%w: job class %s: rebuild the job from its stored parameters for its limit: %v; fix the class's entry in RetryOptions.Classes", ErrInvalidJob, class, err)
		}
		id := IdentityOf(job)
		if !id.Limited && strings.Contains(key, ScheduledSeparator) {
			id.Limit, id.Limited = 1, true
		}
		return Identity{Key: key, Limit: id.Limit, Limited: id.Limited}, nil
	}
	if key == "" {
		return Identity{}, nil
	}
	return Identity{Key: key, Limit: 1, Limited: true}, nil
}

func (o RetryOptions) backoff(attempt int) time.Duration {
	if o.Backoff != nil {
		return o.Backoff(attempt)
	}
	d := 10 * time.Second
	for i := 1; i < attempt && d < time.Hour; i++ {
		d *= 2
	}
	return min(d, time.Hour)
}

// SweepReport is what one RetrySweep did.
type SweepReport struct {
	// Retried counts the retry requests created, Blocked the retryable
	// results whose retry the limit kept out (the next sweep tries again).
	Retried, Blocked int
	// Results has one entry per retryable result the sweep locked, in id
	// order: the retry request, or the skip.
	Results []RetryOutcome
}

// RetryOutcome is the admission result of one result's retry.
type RetryOutcome struct {
	// ResultID is the finished job's result row.
	ResultID int64
	Result
}

// failed is a retryable result row.
type failed struct {
	id                              int64
	class                           string
	key, params, queue, source      *string
	priority, retries, retryAttempt int
}

// retrySQL selects and locks retryable results. A sweeper skips rows another
// sweeper holds, and re-checks retry_job_request_uuid under the row lock, so
// two sweepers never retry one result twice.
// A sweep (byID false) limited to classes takes them as its third
// parameter.
func (s *schema) retrySQL(byID, classes bool) (string, error) {
	t := s.results
	if s.l.SingleTable() || t == nil {
		return "", fmt.Errorf("%w: retries need a two-table layout with a results table (layout.Layout.ResultsTable)", ErrSchema)
	}
	for _, c := range []string{"status", "retries", "retry_attempt", "retry_job_request_uuid"} {
		if !t.has(c) {
			return "", fmt.Errorf("%w: results table %s has no %s column; retries need plain-jobs' result columns", ErrSchema, s.l.Table(t.name), layout.Ident(c))
		}
	}
	if !s.requests.has("uuid") {
		return "", fmt.Errorf("%w: requests table %s has no uuid column to link a retry from its result", ErrSchema, s.l.Table(s.requests.name))
	}
	opt := func(col, typ string) string {
		if t.has(col) {
			return layout.Ident(col) + "::" + typ
		}
		return "NULL::" + typ
	}
	params := "NULL::text"
	for _, c := range []string{"parameters", "args", "payload"} {
		if t.has(c) {
			params = layout.Ident(c) + "::text"
			break
		}
	}
	prio := "0"
	if t.has("priority") {
		prio = layout.Ident("priority") + "::integer"
	}
	where := "id = $1"
	tail := ""
	if !byID {
		where = "id > $1"
		tail = " ORDER BY id LIMIT $2"
		if classes {
			// A JSON array, which every driver passes as text (lib/pq
			// takes no Go slice).
			where += " AND " + layout.Ident(s.l.ClassColumn) + " = ANY (ARRAY(SELECT jsonb_array_elements_text($3::jsonb)))"
		}
	}
	return qualify.Must("SELECT id, " + layout.Ident(s.l.ClassColumn) + "::text, " + layout.Ident(s.keyCol) + "::text, " + params + ", " + prio + ", " +
		opt("queue", "text") + ", " + opt("source", "text") + ", retries, retry_attempt FROM " + s.l.Table(t.name) +
		" WHERE " + where + " AND status = ANY (" + layout.ArrayLiteral(RetryableStatuses) + ") AND retry_job_request_uuid IS NULL AND retries > 0 AND retry_attempt < retries" +
		tail + " FOR UPDATE SKIP LOCKED"), nil
}

func scanFailed(rows Rows) ([]failed, error) {
	defer rows.Close()
	var fs []failed
	for rows.Next() {
		var f failed
		if err := rows.Scan(&f.id, &f.class, &f.key, &f.params, &f.priority, &f.queue, &f.source, &f.retries, &f.retryAttempt); err != nil {
			return nil, err
		}
		fs = append(fs, f)
	}
	return fs, rows.Err()
}

// Retry creates the retry request of one failed result (SPEC 4): same class,
// key, parameters, priority and queue, retry_attempt + 1, start_at = now +
// backoff, through the admission check. A blocked retry creates nothing and
// leaves the result as it was; Result.Skipped says so. A result that is not
// retryable now returns ErrNotRetryable.
func (c *Client) Retry(ctx context.Context, resultID int64, o RetryOptions) (Result, error) {
	var out Result
	err := c.inTx(ctx, func(tx DB, s *schema) error {
		q, err := s.retrySQL(true, false)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, q, resultID)
		if err != nil {
			return err
		}
		fs, err := scanFailed(rows)
		if err != nil {
			return err
		}
		if len(fs) == 0 {
			return fmt.Errorf("compat: retry result %d: %w (not failed, out of attempts, already retried, or being retried now)", resultID, ErrNotRetryable)
		}
		outs, err := c.retryAll(ctx, tx, s, fs, o)
		if err != nil {
			return err
		}
		out = outs[0].Result
		return nil
	})
	return out, err
}

// RetrySweep retries every retryable result of the classes o names
// (ClassNames and the classes of Classes; every class with AllClasses; with
// none of them it returns ErrRetryScope), BatchSize at a time, each page in
// its own transaction. Several RetrySweeps may run at once: each locks the
// rows it works on and skips the rows others hold. plain-jobs' own sweeper
// locks no row: give it and RetrySweep disjoint classes.
func (c *Client) RetrySweep(ctx context.Context, o RetryOptions) (SweepReport, error) {
	var rep SweepReport
	classes, err := o.sweepClasses()
	if err != nil {
		return rep, err
	}
	size := o.BatchSize
	if size <= 0 {
		size = 100
	}
	after := int64(0)
	for {
		var page []RetryOutcome
		err := c.inTx(ctx, func(tx DB, s *schema) error {
			q, err := s.retrySQL(false, classes != nil)
			if err != nil {
				return err
			}
			args := []any{after, size}
			if classes != nil {
				names, _ := json.Marshal(classes) // strings always encode
				args = append(args, string(names))
			}
			rows, err := tx.Query(ctx, q, args...)
			if err != nil {
				return err
			}
			fs, err := scanFailed(rows)
			if err != nil || len(fs) == 0 {
				return err
			}
			page, err = c.retryAll(ctx, tx, s, fs, o)
			return err
		})
		if err != nil {
			return rep, err
		}
		if len(page) == 0 {
			return rep, nil
		}
		for _, p := range page {
			if p.Inserted() {
				rep.Retried++
			} else {
				rep.Blocked++
			}
		}
		rep.Results = append(rep.Results, page...)
		after = page[len(page)-1].ResultID
	}
}

// retryAll admits the retries of fs in one batch (one lock order for all)
// and links each created request from its result.
func (c *Client) retryAll(ctx context.Context, tx DB, s *schema, fs []failed, o RetryOptions) ([]RetryOutcome, error) {
	jobs := make([]Job, len(fs))
	now := time.Now()
	for i, f := range fs {
		key := deref(f.key)
		var params []byte
		if f.params != nil {
			params = []byte(*f.params)
		}
		id, err := o.identity(f.class, key, params)
		if err != nil {
			return nil, fmt.Errorf("compat: retry result %d: %w", f.id, err)
		}
		j := Job{
			Class: f.class, Value: id, Priority: f.priority, Queue: deref(f.queue),
			Retries: f.retries, RetryAttempt: f.retryAttempt + 1, StartAt: now.Add(o.backoff(f.retryAttempt + 1)),
			Source: deref(f.source),
		}
		if f.params != nil {
			j.Args = json.RawMessage(*f.params)
		}
		jobs[i] = j
	}
	adms, err := c.prepare(s, jobs, trace.SpanContext{})
	if err != nil {
		return nil, err
	}
	res, err := c.admit(ctx, tx, s, adms)
	if err != nil {
		return nil, err
	}
	outs := make([]RetryOutcome, len(fs))
	link := qualify.Must("UPDATE " + s.l.Table(s.results.name) + " SET retry_job_request_uuid = $1::uuid WHERE id = $2::int8")
	for i, r := range res {
		outs[i] = RetryOutcome{ResultID: fs[i].id, Result: r}
		if !r.Inserted() {
			continue
		}
		if _, err := tx.Exec(ctx, link, r.UUID, fs[i].id); err != nil {
			return nil, fmt.Errorf("compat: link retry %s from result %d: %w", r.UUID, fs[i].id, err)
		}
		c.ins.retried.Add(ctx, 1, c.ins.class(fs[i].class))
	}
	return outs, nil
}

// inTx runs f in a transaction of the client's handle, retrying once when
// the schema changed under the cached view.
func (c *Client) inTx(ctx context.Context, f func(tx DB, s *schema) error) error {
	attempt := func() error {
		tx, err := c.db.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		s, err := c.loadSchema(ctx, tx)
		if err != nil {
			return err
		}
		if err := f(txDB{tx}, s); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	err := attempt()
	for retry := 0; err != nil && isStaleSchema(err) && retry < staleRetries; retry++ {
		c.forget()
		err = attempt()
	}
	return err
}

// txDB is a Tx seen as a DB that is inside a transaction.
type txDB struct{ Tx }

func (t txDB) Begin(ctx context.Context) (Tx, error) {
	return nil, errors.New("compat: nested transaction not supported here")
}
func (t txDB) InTx() bool { return true }

func (t txDB) sendBatch(ctx context.Context, qs []query) error {
	if b, ok := t.Tx.(batcher); ok {
		return b.sendBatch(ctx, qs)
	}
	return runEach(ctx, t.Tx, qs)
}
