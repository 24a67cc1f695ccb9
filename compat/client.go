package compat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/migrate-unique/migrate-unique/layout"
)

// Errors callers branch on. Every error the runtime returns for one of these
// causes wraps the sentinel; the message names the job and the fix.
var (
	// ErrInvalidJob: a job definition the runtime refuses (negative limit,
	// key too long for the column or containing a NUL byte, empty class).
	// Nothing is inserted.
	ErrInvalidJob = errors.New("invalid job")
	// ErrNotMigrated: the job wants skip records and the layout has no
	// column to keep them in yet (`migrate-unique up --expand` or `up`
	// adds it).
	ErrNotMigrated = errors.New("the database is not migrated")
	// ErrLayoutChanged: a migration phase (up --expand, complete, down)
	// changed the queue's tables under an EnqueueTx on the migrated layout,
	// and the caller's transaction is aborted. Nothing was inserted. Roll
	// back and run the transaction again: the client has read the layout
	// again. (On a legacy or expanded layout the enqueue runs under a
	// savepoint and retries by itself.)
	ErrLayoutChanged = errors.New("the queue's layout changed under the transaction")
	// ErrSchema: the layout's tables are missing or not a queue.
	ErrSchema = errors.New("unusable queue schema")
)

// Job is one job to enqueue.
type Job struct {
	// Class is the job class the queue stores (job_class, kind, job_type).
	Class string
	// Value is the job value whose optional methods give its concurrency
	// identity (ConcurrencyKey, ConcurrencyLimit, or the legacy UniqueKey)
	// and whether it wants skip records. nil: no key, no limit. An Identity
	// (from Limit or Scheduled) works too.
	Value any
	// Args is stored as JSON in the parameters column (parameters, args or
	// payload). []byte and json.RawMessage are stored as they are.
	Args any
	// Priority, Queue and Retries fill the columns of the same name when the
	// table has them. Queue "" is "default".
	Priority int
	Queue    string
	Retries  int
	// RetryAttempt is 0 for a new job; retries set it.
	RetryAttempt int
	// StartAt delays the job (start_at, or the run_at column of a
	// single-table layout). Zero: now.
	StartAt time.Time
	// Source fills plain-jobs' source column. "": "compat".
	Source string

	args            any // Args encoded: a JSON string or nil
	traceID, spanID any
}

// Result is the outcome of one enqueue: inserted, or skipped at the limit.
type Result struct {
	// ID and UUID identify the inserted row (UUID is "" when the table has
	// no uuid column). Both are zero when the job was skipped.
	ID   int64
	UUID string
	// Skipped is non-nil when the limit kept the job out.
	Skipped *Skip
}

// Inserted reports whether the job was enqueued.
func (r Result) Inserted() bool { return r.Skipped == nil }

// SkipReason says what kept a job out.
type SkipReason string

// The reasons of a Skip.
const (
	// SkipLimit: the group's active jobs reached its limit.
	SkipLimit SkipReason = "concurrency_limit"
	// SkipUniqueRule: the group was below its limit (or had none), but the
	// unique rule on the key still stands (a legacy or expanded layout, or
	// one that down is rolling back) and already holds a job of the key
	// that it covers: plain-jobs 0.37's partial unique index allows one
	// pending first attempt per (class, key). Skip.Rule names the index.
	// Limits above 1 take effect when the migration completes.
	SkipUniqueRule SkipReason = "unique_rule"
)

// Skip says why a job was not enqueued.
type Skip struct {
	// Reason is what kept the job out: SkipLimit or SkipUniqueRule.
	Reason SkipReason
	// Rule names the unique index that refused the job (SkipUniqueRule).
	Rule string
	// Group is the group's name: class, or class::key.
	Group string
	// Class and Key are the group's class and key (the schedule prefix in
	// no-overlap mode).
	Class, Key string
	// Limit is the limit that applied (the override when there is one; 0
	// with SkipUniqueRule when the job has none) and Active the active jobs
	// counted. Admission counts only up to the limit (its cost never grows
	// with the backlog), so Active is at most Limit and says the group is
	// full, not how full: under a limit of 0 (an override or a paused class)
	// it is 0 whatever the group holds. A message to a person names the
	// limit; 'migrate-unique concurrency status GROUP' counts the group's
	// queued and running jobs.
	Limit, Active int
	// Holders are the active jobs that hold the group.
	Holders []JobRef
	// RecordID is the id of the skip record, when the job type wants one.
	RecordID int64
}

// JobRef points at one row of the layout.
type JobRef struct {
	Table string `json:"table"`
	ID    int64  `json:"id"`
}

// Client enqueues jobs into one queue layout. It is safe for concurrent use.
type Client struct {
	db     DB
	l      layout.Resolved
	o      options
	tracer trace.Tracer
	// tracing is false when the tracer provider is the no-op one.
	tracing bool
	ins     *instruments
	// destination is the messaging destination (schema.table new jobs go
	// to) and spanName the enqueue span's name, "enqueue <destination>".
	destination, spanName string

	mu     sync.Mutex
	schema *schema
	// schemaAt is when schema was read: it is read again after
	// schemaRefresh, so that a client sees what a migration phase added
	// without breaking any statement (up --expand's overrides table).
	schemaAt time.Time
	// explicitTx is set once an own transaction was found above READ
	// COMMITTED: own transactions are then begun at READ COMMITTED.
	explicitTx atomic.Bool
}

// NewClient returns a client for the layout's queue on db. db is usually a
// pool (Pgx(pool) or SQL(db)); Enqueue runs each call in its own
// transaction there, and EnqueueTx joins a caller's transaction.
func NewClient(db DB, l layout.Layout, opts ...Option) (*Client, error) {
	rl, err := l.Resolve()
	if err != nil {
		return nil, fmt.Errorf("compat: %w", err)
	}
	c := &Client{db: db, l: rl}
	for _, o := range opts {
		o(&c.o)
	}
	c.o.defaults()
	c.tracer = c.o.tp.Tracer(instrumentationName)
	// A no-op provider's spans record nothing and carry the caller's span
	// context, which enqueue reads from ctx all the same: skip their
	// per-call options and attributes.
	_, noop := c.o.tp.(tracenoop.TracerProvider)
	c.tracing = !noop
	c.destination = rl.Schema + "." + rl.RequestsTable
	if rl.SingleTable() {
		c.destination = rl.Schema + "." + rl.JobsTable
	}
	c.spanName = "enqueue " + c.destination
	c.ins = newInstruments(c.o.mp.Meter(instrumentationName), c.destination)
	return c, nil
}

// Layout returns the client's layout, resolved.
func (c *Client) Layout() layout.Resolved { return c.l }

// Enqueue admits and inserts one job in its own transaction.
func (c *Client) Enqueue(ctx context.Context, job Job) (Result, error) {
	return c.EnqueueTx(ctx, c.db, job)
}

// EnqueueTx admits and inserts one job through db. When db is the caller's
// transaction (Pgx(tx), SQL(tx)) the insert joins it and the group's lock is
// held until the caller commits, so the admission stays exact. The caller's
// transaction must be READ COMMITTED (PostgreSQL's default): above it the
// enqueue fails with ErrIsolation before inserting anything. Otherwise it
// runs its own transaction, at READ COMMITTED whatever the session's
// default.
func (c *Client) EnqueueTx(ctx context.Context, db DB, job Job) (Result, error) {
	res, err := c.EnqueueManyTx(ctx, db, []Job{job})
	if err != nil {
		return Result{}, err
	}
	return res[0], nil
}

// EnqueueMany admits and inserts jobs in one transaction, in order: a job
// counts every job admitted before it, in the batch too. A result per job.
func (c *Client) EnqueueMany(ctx context.Context, jobs []Job) ([]Result, error) {
	return c.EnqueueManyTx(ctx, c.db, jobs)
}

// EnqueueManyTx is EnqueueMany through db (see EnqueueTx).
func (c *Client) EnqueueManyTx(ctx context.Context, db DB, jobs []Job) (res []Result, err error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	start := time.Now()
	class := jobs[0].Class
	var span trace.Span
	if c.tracing {
		attrs := []attribute.KeyValue{attribute.String(AttrMessagingSystem, MessagingSystem),
			attribute.String(AttrMessagingOperationName, "enqueue"), attribute.String(AttrMessagingOperationType, "send"),
			attribute.String(AttrMessagingDestination, c.destination),
			attribute.String(AttrJobClass, class), attribute.Int("job.enqueue.count", len(jobs))}
		if len(jobs) > 1 {
			attrs = append(attrs, attribute.Int(AttrMessagingBatchCount, len(jobs)))
		}
		ctx, span = c.tracer.Start(ctx, c.spanName, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	}
	defer func() {
		if err != nil {
			c.ins.errors.Add(ctx, 1, c.ins.class(class))
		}
		c.ins.duration.Record(ctx, time.Since(start).Seconds(), c.ins.class(class))
		if span == nil {
			return
		}
		skipped := 0
		for _, r := range res {
			if r.Skipped != nil {
				skipped++
			}
		}
		span.SetAttributes(attribute.Bool(AttrEnqueueSkipped, skipped > 0))
		switch {
		case err != nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			span.SetAttributes(attribute.String("error.type", errorType(err)))
		case skipped > 0:
			span.SetAttributes(attribute.String("error.type", ErrorTypeLimitReached), attribute.Int("job.enqueue.skipped_count", skipped))
		}
		span.End()
	}()

	res, err = c.enqueue(ctx, db, jobs, trace.SpanContextFromContext(ctx))
	for retry := 0; err != nil && isStaleSchema(err) && retry < staleRetries; retry++ {
		// A migration phase renamed a column, dropped a table or rebuilt
		// the unique rule under us: read the catalog again and retry, in
		// a caller's transaction only when a savepoint kept it usable.
		c.forget()
		if db.InTx() && !rolledBackTo(err) {
			return nil, fmt.Errorf("%w (roll back and run the transaction again): %w", ErrLayoutChanged, err)
		}
		res, err = c.enqueue(ctx, db, jobs, trace.SpanContextFromContext(ctx))
	}
	if err != nil && isStaleSchema(err) {
		c.forget()
	}
	if err != nil {
		return nil, err
	}
	// The attributes of a debug line are built only when it is logged.
	debug := c.o.logger.Enabled(ctx, slog.LevelDebug)
	for i, r := range res {
		cls := jobs[i].Class
		if r.Skipped != nil {
			c.ins.rejected.Add(ctx, 1, c.ins.class(cls))
			if debug {
				c.o.logger.LogAttrs(ctx, slog.LevelDebug, "compat: job not enqueued: concurrency limit reached",
					slog.String("group", r.Skipped.Group), slog.Int("limit", r.Skipped.Limit), slog.Int("active", r.Skipped.Active))
			}
			continue
		}
		c.ins.admitted.Add(ctx, 1, c.ins.class(cls))
		if debug {
			c.o.logger.LogAttrs(ctx, slog.LevelDebug, "compat: job enqueued", slog.String("class", cls), slog.Int64("id", r.ID))
		}
	}
	return res, nil
}

// staleRetries bounds the statements retried after the schema changed
// under them, each after reading the catalog again. One migration changes
// what the runtime names more than once within milliseconds (down renames
// the key column back, then drops the runtime's tables), and a statement
// that waited for the first change can find the second on its retry.
const staleRetries = 3

// isStaleSchema reports an error from a layout that changed under the
// cached schema: a column or table it named that the database no longer
// has (42703, 42P01), a unique rule it did not know of (23505: down rebuilt
// the rule; read again, the admission inserts with ON CONFLICT and the job
// is a Skip), or one it knew of that is gone (42P10: no index for ON
// CONFLICT). The SQLSTATE is read as every driver reports it (see
// sqlState), so a client over database/sql with lib/pq recovers as one over
// pgx does.
func isStaleSchema(err error) bool {
	switch sqlState(err) {
	case "42703", "42P01", "23505", "42P10":
		return true
	}
	return false
}

// schemaRefresh is how long a client trusts its catalog view when no
// statement found it stale: up --expand adds the overrides table and the
// skip-metadata column without breaking any statement, and a client sees
// them at most this long after.
const schemaRefresh = 10 * time.Second

// loadSchema returns the cached catalog view, reading it on first use and
// again once it is older than schemaRefresh.
func (c *Client) loadSchema(ctx context.Context, db Executor) (*schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.schema != nil && time.Since(c.schemaAt) < schemaRefresh {
		return c.schema, nil
	}
	s, err := inspect(ctx, db, c.l)
	if err != nil {
		return nil, err
	}
	c.schema, c.schemaAt = s, time.Now()
	return s, nil
}

func (c *Client) forget() {
	c.mu.Lock()
	c.schema = nil
	c.mu.Unlock()
}

// prepare validates the jobs against the schema and encodes their values.
func (c *Client) prepare(s *schema, jobs []Job, sc trace.SpanContext) ([]*admission, error) {
	adms := make([]*admission, len(jobs))
	maxLen := s.keyMaxLen()
	for i, j := range jobs {
		id := IdentityOf(j.Value)
		if err := id.validate(j.Class, maxLen); err != nil {
			return nil, fmt.Errorf("compat: job %d: %w", i, err)
		}
		rec, _ := j.Value.(SkipRecorder)
		adm := &admission{job: j, id: id, lockKey: id.Key, record: rec != nil && rec.ConcurrencySkipRecord()}
		if id.NoOverlap {
			adm.lockKey = id.Prefix
		}
		if adm.record {
			if s.results == nil {
				return nil, fmt.Errorf("compat: job class %s wants skip records, but the layout has no results table to keep them in; set layout.Layout.ResultsTable or drop ConcurrencySkipRecord", j.Class)
			}
			if !s.results.has(layout.SkipMetadataColumn) {
				return nil, fmt.Errorf("compat: job class %s wants skip records: %w: %s has no %s column; run `migrate-unique up` first", j.Class, ErrNotMigrated, s.l.Table(s.results.name), layout.SkipMetadataColumn)
			}
		}
		if adm.job.Queue == "" {
			adm.job.Queue = "default"
		}
		if adm.job.Source == "" {
			adm.job.Source = "compat"
		}
		switch a := j.Args.(type) {
		case nil:
		case json.RawMessage:
			adm.job.args = string(a)
		case []byte:
			adm.job.args = string(a)
		default:
			b, err := json.Marshal(a)
			if err != nil {
				return nil, fmt.Errorf("compat: job %d (class %s): encode Args as JSON: %w", i, j.Class, err)
			}
			adm.job.args = string(b)
		}
		if c.o.python[j.Class] {
			if err := checkPlainArgs(j.Class, adm.job.args); err != nil {
				return nil, fmt.Errorf("compat: job %d: %w", i, err)
			}
		}
		if sc.IsValid() {
			adm.job.traceID, adm.job.spanID = sc.TraceID().String(), sc.SpanID().String()
		}
		adms[i] = adm
	}
	return adms, nil
}

func (c *Client) enqueue(ctx context.Context, db DB, jobs []Job, sc trace.SpanContext) ([]Result, error) {
	s, err := c.loadSchema(ctx, db)
	if err != nil {
		return nil, err
	}
	adms, err := c.prepare(s, jobs, sc)
	if errors.Is(err, ErrNotMigrated) {
		// The cached view may predate a migration that ran since: look again.
		c.forget()
		if s, err = c.loadSchema(ctx, db); err != nil {
			return nil, err
		}
		adms, err = c.prepare(s, jobs, sc)
	}
	if err != nil {
		return nil, err
	}
	return c.admit(ctx, db, s, adms)
}

// admit runs the admission protocol for adms through db and writes the skip
// records the blocked ones want.
func (c *Client) admit(ctx context.Context, db DB, s *schema, adms []*admission) ([]Result, error) {
	if len(adms) >= batchMinJobs && s.rule == nil && !s.looseKey {
		// While a unique rule stands, each job's insert has its own ON
		// CONFLICT outcome: the jobs go one statement each (below), in the
		// same transaction and lock order. So do the jobs of a key whose
		// equality is not byte equality: the batch statement folds the
		// batch's own jobs by their keys' bytes, while each statement's count
		// sees the earlier ones with the column's equality.
		return c.admitBatch(ctx, db, s, adms)
	}
	plans := planLocks(s, adms)
	qs := make([]query, 0, len(plans)+len(adms)+1)
	inTx := db.InTx()
	for i, p := range plans {
		q := s.lockQuery(p)
		if i == 0 {
			q = s.guarded(q, c.o.lockWait, inTx)
		}
		qs = append(qs, q)
	}
	outs := make([]admitResult, len(adms))
	for i, a := range adms {
		qs = append(qs, s.admitQuery(a, &outs[i]))
	}
	if inTx {
		qs = append(qs, restoreQuery())
	}
	if err := c.admitStatements(ctx, db, s, qs); err != nil {
		return nil, c.admitError(adms, err)
	}
	if len(adms) == 1 && s.ruleRefusedUnseen(outs[0]) {
		// The rule refused the job for a row committed after the count's
		// snapshot (a writer that takes no lock: plain-jobs 0.37). Nothing
		// was inserted: count again, so that the Skip shows that row.
		if err := c.admitStatements(ctx, db, s, qs); err != nil {
			return nil, c.admitError(adms, err)
		}
	}
	res := make([]Result, len(adms))
	var records []query
	for i, o := range outs {
		a := adms[i]
		if o.id != nil {
			res[i].ID = *o.id
			if o.uuid != nil {
				res[i].UUID = *o.uuid
			}
			continue
		}
		sk := &Skip{Reason: SkipLimit, Group: layout.GroupName(a.job.Class, a.lockKey), Class: a.job.Class, Key: a.lockKey,
			Active: int(o.active), Holders: parseHolders(o.holders)}
		if s.ruleRefused(o) {
			sk.Reason, sk.Rule = SkipUniqueRule, s.rule.name
		}
		if o.limit != nil {
			// Each active table is read up to the limit: report the
			// first limit of them, in the order they were read.
			sk.Limit = int(*o.limit)
			sk.Active = min(sk.Active, sk.Limit)
			sk.Holders = sk.Holders[:min(len(sk.Holders), sk.Limit)]
		}
		res[i].Skipped = sk
		if a.record {
			q, err := s.skipRecordQuery(a, sk, time.Now(), &sk.RecordID)
			if err != nil {
				return nil, err
			}
			records = append(records, q)
		}
	}
	if len(records) > 0 {
		if err := c.run(ctx, db, records); err != nil {
			return nil, fmt.Errorf("compat: write skip record for %s: %w", adms[0].job.Class, err)
		}
	}
	return res, nil
}

// admitStatements runs an admission's statements as one transaction
// (runAdmission), beginning it explicitly at READ COMMITTED from then on
// when the session's default isolation proves to be above it.
func (c *Client) admitStatements(ctx context.Context, db DB, s *schema, qs []query) error {
	inTx := db.InTx()
	err := c.runAdmission(ctx, db, s, qs)
	if isIsolationError(err) && !inTx && !c.explicitTx.Load() {
		// Our own transaction runs at the session's default isolation,
		// which is above READ COMMITTED here: from now on begin it
		// explicitly at READ COMMITTED.
		c.explicitTx.Store(true)
		err = c.runAdmission(ctx, db, s, qs)
	}
	return err
}

// admitError wraps an admission's failure, with the sentinel a caller
// branches on when there is one.
func (c *Client) admitError(adms []*admission, err error) error {
	class := adms[0].job.Class
	switch {
	case isIsolationError(err):
		return fmt.Errorf("compat: enqueue %s: %w: the transaction runs above READ COMMITTED, whose snapshot would miss jobs admitted while it waited for the group's lock; enqueue in a READ COMMITTED transaction (nothing was inserted): %w", class, ErrIsolation, err)
	case isLockTimeout(err):
		groups := make([]string, 0, len(adms))
		for _, a := range adms {
			groups = append(groups, layout.GroupName(a.job.Class, a.lockKey))
		}
		return fmt.Errorf("compat: enqueue %s: %w: waited %v for the lock of %s, which another transaction holds (see `migrate-unique concurrency status`); nothing was inserted: %w",
			class, ErrLockTimeout, c.o.lockWait, strings.Join(groups, ", "), err)
	}
	return fmt.Errorf("compat: enqueue %s: %w", class, err)
}

// run executes qs as one transaction: pipelined in one batch with pgx,
// statement by statement otherwise. Through a caller's transaction they
// join it. Our own transaction is the batch's implicit one, or, once the
// session's default isolation proved to be above READ COMMITTED, one begun
// explicitly at READ COMMITTED.
func (c *Client) run(ctx context.Context, db DB, qs []query) error {
	b, batches := db.(batcher)
	if batches && (db.InTx() || !c.explicitTx.Load()) {
		return b.sendBatch(ctx, qs)
	}
	if db.InTx() {
		return runEach(ctx, db, qs)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if b, ok := tx.(batcher); ok {
		err = b.sendBatch(ctx, qs)
	} else {
		err = runEach(ctx, tx, qs)
	}
	if err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func runEach(ctx context.Context, db Executor, qs []query) error {
	for _, q := range qs {
		if q.scan != nil {
			if err := q.scan(db.QueryRow(ctx, q.sql, q.args...)); err != nil {
				return err
			}
			continue
		}
		if q.rows != nil {
			rows, err := db.Query(ctx, q.sql, q.args...)
			if err != nil {
				return err
			}
			err = q.rows(rows)
			rows.Close()
			if err == nil {
				err = rows.Err()
			}
			if err != nil {
				return err
			}
			continue
		}
		if _, err := db.Exec(ctx, q.sql, q.args...); err != nil {
			return err
		}
	}
	return nil
}

// errorType is a failed enqueue's error.type: the sentinel's name when the
// runtime has one for it, else the server's SQLSTATE, else "_OTHER".
func errorType(err error) string {
	for _, e := range []struct {
		err  error
		name string
	}{{ErrInvalidJob, "InvalidJob"}, {ErrNotMigrated, "NotMigrated"}, {ErrSchema, "Schema"}, {ErrIsolation, "Isolation"}, {ErrLockTimeout, "LockTimeout"}} {
		if errors.Is(err, e.err) {
			return e.name
		}
	}
	if code := sqlState(err); code != "" {
		return code
	}
	return "_OTHER"
}
