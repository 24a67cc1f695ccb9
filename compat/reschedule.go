package compat

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/migrate-unique/migrate-unique/internal/qualify"
	"github.com/migrate-unique/migrate-unique/layout"
)

// DefaultRescheduleDelay is how far a busy job is pushed back when no delay
// is configured.
const DefaultRescheduleDelay = 5 * time.Second

// DefaultRescheduleJitter is the default jitter, as a fraction of the delay.
const DefaultRescheduleJitter = 0.2

// RescheduleOptions configures a Rescheduler. The zero value is ready to use.
type RescheduleOptions struct {
	// Delay is how far a busy job is pushed back. Default
	// DefaultRescheduleDelay.
	Delay time.Duration
	// Jitter spreads busy jobs so they do not all come back at once: the
	// delay is drawn uniformly from Delay*(1-Jitter) to Delay*(1+Jitter).
	// 0 means DefaultRescheduleJitter; NoJitter turns it off.
	Jitter   float64
	NoJitter bool
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger receives debug records; nil discards them.
	Logger *slog.Logger
	// MeterProvider provides the compat.reschedules counter; nil means no
	// metrics.
	MeterProvider metric.MeterProvider
}

// Rescheduled is the outcome of a busy reschedule.
type Rescheduled struct {
	// RunAt is when the job becomes due again (UTC).
	RunAt time.Time
	// Reschedules counts this job's busy reschedules since it last got a
	// slot, this one included.
	Reschedules int64
}

// JobID identifies the job a Rescheduler moves back to the queue: the id
// column's value of a single-table layout, the request's uuid of a
// two-table one. Build it with RowID or TextID; the zero JobID names no job.
type JobID struct {
	v any // int64 or string, bound as the statement's job parameter
}

// RowID is an integer job id: a single-table layout's bigint id column.
func RowID(id int64) JobID { return JobID{v: id} }

// TextID is a job id as text: a two-table layout's request uuid, a
// single-table layout's text or uuid id, or the same string given to
// Slots.Acquire and Worker.Run (PostgreSQL reads it as the id column's
// type).
func TextID(id string) JobID { return JobID{v: id} }

// String returns the id as text, as the reschedule counters and the slot
// table keep it; "" for the zero JobID.
func (id JobID) String() string {
	if id.v == nil {
		return ""
	}
	return fmt.Sprint(id.v)
}

// Rescheduler puts a job whose slot was busy back into the queue without
// counting an attempt (SPEC 6: busy is not a failure). Real failures go
// through the queue's normal attempt path; this is only for "busy".
type Rescheduler struct {
	db     DB
	l      layout.Resolved
	opts   RescheduleOptions
	log    *slog.Logger
	count  metric.Int64Counter
	mu     sync.Mutex
	twoSQL string // the two-table statement, built from the catalog once
}

// NewRescheduler returns a Rescheduler for the layout's queue on db.
func NewRescheduler(db DB, l layout.Layout, opts RescheduleOptions) (*Rescheduler, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: the database handle is nil", ErrSlotArgument)
	}
	rl, err := l.Resolve()
	if err != nil {
		return nil, err
	}
	switch {
	case opts.Delay < 0:
		return nil, fmt.Errorf("%w: reschedule delay %v; give a positive delay, for example 5s", ErrSlotArgument, opts.Delay)
	case opts.Delay == 0:
		opts.Delay = DefaultRescheduleDelay
	}
	switch {
	case opts.Jitter < 0 || opts.Jitter >= 1:
		return nil, fmt.Errorf("%w: reschedule jitter %v; give a fraction of the delay from 0 to below 1, for example 0.2", ErrSlotArgument, opts.Jitter)
	case opts.NoJitter:
		opts.Jitter = 0
	case opts.Jitter == 0:
		opts.Jitter = DefaultRescheduleJitter
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Rescheduler{db: db, l: rl, opts: opts, log: opts.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	mp := opts.MeterProvider
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	r.count, err = mp.Meter(instrumentationName).Int64Counter("compat.reschedules",
		metric.WithDescription("Jobs rescheduled because their slot was busy (no attempt counted)."),
		metric.WithUnit("{reschedule}"))
	if err != nil {
		return nil, fmt.Errorf("reschedule metrics: %w", err)
	}
	return r, nil
}

// singleTableSQL is SPEC 6's statement with the layout's names:
// UPDATE jobs SET run_at = $1, state = 'queued', lease_until = NULL,
// worker_id = NULL WHERE id = $2. The attempt column is not touched.
func (r *Rescheduler) singleTableSQL() string {
	l := r.l
	return `UPDATE ` + l.Table(l.JobsTable) + ` SET ` + layout.Ident(l.RunAtColumn) + ` = $1, ` +
		layout.Ident(l.StateColumn) + ` = ` + layout.Literal(l.PendingState()) + `, ` +
		layout.Ident(l.LeaseColumn) + ` = NULL, ` + layout.Ident(l.WorkerColumn) + ` = NULL WHERE ` +
		layout.Ident(l.IDColumn) + ` = $2`
}

// counterSQL bumps the job's reschedule counter.
func (r *Rescheduler) counterSQL() string {
	return `INSERT INTO ` + r.l.Table(layout.ReschedulesTable) + ` AS r (job_id, group_name, reschedules, first_at, last_at)
VALUES ($1, $2, 1, clock_timestamp(), clock_timestamp())
ON CONFLICT (job_id) DO UPDATE SET reschedules = r.reschedules + 1, group_name = EXCLUDED.group_name, last_at = EXCLUDED.last_at
RETURNING reschedules`
}

// delay draws the jittered delay.
func (r *Rescheduler) delay() time.Duration {
	d := r.opts.Delay
	if r.opts.Jitter == 0 {
		return d
	}
	f := 1 + r.opts.Jitter*(2*rand.Float64()-1)
	return time.Duration(float64(d) * f)
}

// Reschedule puts the busy job back into the queue, due after the
// (jittered) delay, with its attempt counter untouched, and bumps its
// reschedule counter (reset when it next gets a slot). jobID is the job's
// stable identity, the same one given to Acquire or Worker.Run: the id
// column's value for a single-table layout (RowID, or TextID for a text or
// uuid id), the request's uuid for a two-table one (TextID).
//
// Single-table layouts run exactly
//
//	UPDATE jobs SET run_at = $1, state = 'queued', lease_until = NULL, worker_id = NULL WHERE id = $2
//
// with the layout's names and $1 in UTC. Two-table layouts turn the running
// process row back into a request with the same uuid, retry_attempt
// unchanged and start_at = now + delay. Both happen in one transaction (a
// savepoint when db is the caller's transaction) with the counter.
func (r *Rescheduler) Reschedule(ctx context.Context, group string, jobID JobID) (Rescheduled, error) {
	if err := checkGroup(group); err != nil {
		return Rescheduled{}, err
	}
	if jobID.String() == "" {
		return Rescheduled{}, fmt.Errorf("%w: the job id is empty", ErrSlotArgument)
	}
	stmt := r.singleTableSQL
	where := r.l.Table(r.l.JobsTable)
	if !r.l.SingleTable() {
		s, err := r.twoTableSQL(ctx)
		if err != nil {
			return Rescheduled{}, err
		}
		stmt = func() string { return s }
		where = r.l.Table(r.l.ProcessesTable)
	}
	// In UTC, and at PostgreSQL's resolution so RunAt is what is stored.
	runAt := r.opts.Now().Add(r.delay()).UTC().Truncate(time.Microsecond)
	tx, err := r.db.Begin(ctx)
	if err != nil {
		return Rescheduled{}, fmt.Errorf("reschedule job %v: %w", jobID, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	n, err := tx.Exec(ctx, qualify.Must(stmt()), runAt, jobID.v)
	if err != nil {
		return Rescheduled{}, fmt.Errorf("reschedule job %v: %w", jobID, err)
	}
	if n == 0 {
		return Rescheduled{}, fmt.Errorf("reschedule job %v: no such running job in %s", jobID, where)
	}
	out := Rescheduled{RunAt: runAt}
	if err := tx.QueryRow(ctx, qualify.Must(r.counterSQL()), jobID.String(), group).Scan(&out.Reschedules); err != nil {
		return Rescheduled{}, fmt.Errorf("reschedule job %v: count it: %w", jobID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Rescheduled{}, fmt.Errorf("reschedule job %v: %w", jobID, err)
	}
	r.count.Add(ctx, 1)
	r.log.DebugContext(ctx, "job rescheduled, its slot was busy", "group", group, "job_id", jobID.String(), "run_at", runAt, "reschedules", out.Reschedules)
	return out, nil
}

// twoTableSQL builds, once, the statement that moves a process row back to
// the requests table: every column the two tables share is copied (so
// retry_attempt and the key stay as they were), uuid is the request's own
// (job_request_uuid when the processes table has it, else uuid), start_at
// is $1, and the row is found by $2.
func (r *Rescheduler) twoTableSQL(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.twoSQL != "" {
		return r.twoSQL, nil
	}
	l := r.l
	if l.ProcessesTable == "" {
		return "", fmt.Errorf("%w: this two-table layout has no processes table (layout.Layout.ProcessesTable), so a running job cannot be put back", ErrSlotArgument)
	}
	type col struct {
		name              string
		notNull, defaults bool
	}
	cols := map[string][]col{}
	rows, err := r.db.Query(ctx, qualify.Must(`SELECT c.relname, a.attname, a.attnotnull,
    a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> ''
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = ANY ($2) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY c.relname, a.attnum`), l.Schema, []string{l.RequestsTable, l.ProcessesTable})
	if err != nil {
		return "", fmt.Errorf("read the columns of %s and %s: %w", l.Table(l.RequestsTable), l.Table(l.ProcessesTable), err)
	}
	for rows.Next() {
		var table string
		var c col
		if err := rows.Scan(&table, &c.name, &c.notNull, &c.defaults); err != nil {
			rows.Close()
			return "", err
		}
		cols[table] = append(cols[table], c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", err
	}
	req, proc := cols[l.RequestsTable], cols[l.ProcessesTable]
	if len(req) == 0 || len(proc) == 0 {
		return "", fmt.Errorf("%w: %s or %s does not exist; check layout.Layout.Schema, RequestsTable and ProcessesTable", ErrSlotArgument, l.Table(l.RequestsTable), l.Table(l.ProcessesTable))
	}
	procHas := func(name string) bool {
		return slices.ContainsFunc(proc, func(c col) bool { return c.name == name })
	}
	reqHas := func(name string) bool {
		return slices.ContainsFunc(req, func(c col) bool { return c.name == name })
	}
	for _, need := range []string{"uuid", "start_at"} {
		if !reqHas(need) {
			return "", fmt.Errorf("%w: %s has no %s column, so a busy job cannot be put back as a request", ErrSlotArgument, l.Table(l.RequestsTable), need)
		}
	}
	key := "uuid"
	if procHas("job_request_uuid") {
		key = "job_request_uuid"
	}
	if !procHas(key) {
		return "", fmt.Errorf("%w: %s has neither job_request_uuid nor uuid, so the running job cannot be found", ErrSlotArgument, l.Table(l.ProcessesTable))
	}
	into := []string{layout.Ident("uuid"), layout.Ident("start_at")}
	from := []string{"p." + layout.Ident(key), "$1"}
	for _, c := range req {
		switch {
		case c.name == "uuid" || c.name == "start_at":
		case c.name == "id" && c.defaults:
			// The request gets a new row id from its own sequence.
		case procHas(c.name):
			into = append(into, layout.Ident(c.name))
			from = append(from, "p."+layout.Ident(c.name))
		case c.notNull && !c.defaults:
			return "", fmt.Errorf("%w: %s.%s is NOT NULL without a default and %s has no such column, so a busy job cannot be put back", ErrSlotArgument, l.Table(l.RequestsTable), layout.Ident(c.name), l.Table(l.ProcessesTable))
		}
	}
	r.twoSQL = `WITH p AS (DELETE FROM ` + l.Table(l.ProcessesTable) + ` WHERE ` + layout.Ident(key) + ` = $2 RETURNING *)
INSERT INTO ` + l.Table(l.RequestsTable) + ` (` + strings.Join(into, ", ") + `)
SELECT ` + strings.Join(from, ", ") + ` FROM p`
	return r.twoSQL, nil
}
