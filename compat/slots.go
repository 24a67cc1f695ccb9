package compat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/migrate-unique/migrate-unique/internal/qualify"
	"github.com/migrate-unique/migrate-unique/layout"
)

// ErrLeaseLost is returned by Release and Extend when the lease's token is no
// longer current: the lease expired and the slot was given to another job,
// an operator released it, or it was released already. The holder must stop
// working on the job.
var ErrLeaseLost = errors.New("slot lease lost")

// ErrSlotArgument is wrapped by every error about a bad argument to the slot
// API: an empty group name, a negative limit, a lease that is not positive.
var ErrSlotArgument = errors.New("invalid slot argument")

// Lease is a slot held by one job. Token is its fencing token: it is new on
// every acquisition and never reused, and only the current token may extend
// or release the slot.
type Lease struct {
	// Group is the group name, class or class::key.
	Group string
	// Slot is the slot number, 0 <= Slot < limit at acquisition.
	Slot int
	// Token is the fencing token.
	Token int64
	// JobID and WorkerID say who holds the slot.
	JobID, WorkerID string
	// AcquiredAt and ExpiresAt are the database's times. ExpiresAt moves
	// with every Extend.
	AcquiredAt, ExpiresAt time.Time
	// Limit is the effective limit the slot was acquired under: the
	// operator's override when one is set, else the caller's.
	Limit int
	// Waited is how long the job waited for a slot across busy reschedules
	// (from its first reschedule to this acquisition); 0 when it got a slot
	// at its first try.
	Waited time.Duration
}

// SlotsOptions configures Slots. The zero value is ready to use.
type SlotsOptions struct {
	// Logger receives debug records; nil discards them. Busy and lost
	// leases are expected outcomes and are never logged above debug.
	Logger *slog.Logger
	// MeterProvider provides the instruments described in docs/runtime.md;
	// nil means no metrics.
	MeterProvider metric.MeterProvider
	// GaugeGroups lists the groups whose slots-active and slots-limit
	// gauges are reported. Group names are unbounded (they contain
	// concurrency keys), so the per-group gauges are opt-in: a group not
	// listed here has no gauge series. Each collection runs one query for
	// the listed groups, from the metrics SDK's goroutine: give Slots a
	// handle that is safe for concurrent use (a pool or *sql.DB).
	GaugeGroups []string
}

// Slots hands out slot leases: at most limit unexpired leases per group,
// whatever the contention, each with a fencing token. It is safe for
// concurrent use.
type Slots struct {
	db        DB
	l         layout.Resolved
	overrides *Overrides
	log       *slog.Logger
	metrics   slotMetrics
}

// NewSlots returns the slot lease API on db for the layout's schema, whose
// tables the migration creates (layout.Resolved.RuntimeDDL). An invalid
// layout is an error wrapping layout.ErrInvalid.
func NewSlots(db DB, l layout.Layout, opts SlotsOptions) (*Slots, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: the database handle is nil", ErrSlotArgument)
	}
	rl, err := l.Resolve()
	if err != nil {
		return nil, fmt.Errorf("compat: %w", err)
	}
	s := &Slots{db: db, l: rl, overrides: &Overrides{db: db, l: rl}, log: opts.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	mp := opts.MeterProvider
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m, err := newSlotMetrics(mp, s, opts.GaugeGroups)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	return s, nil
}

func checkGroup(group string) error {
	switch {
	case group == "":
		return fmt.Errorf("%w: the group name is empty; give the job's class, or class::key", ErrSlotArgument)
	case strings.ContainsRune(group, 0):
		return fmt.Errorf("%w: the group name %q contains a NUL byte", ErrSlotArgument, group)
	}
	return nil
}

func checkLimit(group string, limit int) error {
	if limit < 0 {
		return fmt.Errorf("%w: group %q has limit %d; a limit is 0 (run nothing) or more", ErrSlotArgument, group, limit)
	}
	if limit > maxSlotLimit {
		return fmt.Errorf("%w: group %q has limit %d; at most %d slots per group are supported (leave the group unlimited instead)", ErrSlotArgument, group, limit, maxSlotLimit)
	}
	return nil
}

// maxSlotLimit bounds the generate_series of a group's missing slots.
const maxSlotLimit = 1 << 20

func checkLeaseDuration(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: lease duration %v; a lease must be positive, for example 30s", ErrSlotArgument, d)
	}
	return nil
}

// Acquire takes a slot of group for the job, in one atomic statement: a free
// or expired slot below the effective limit (an override in
// concurrency_limits wins over limit), or a new slot row when the group has
// fewer rows than that. It never hands out more than the limit's unexpired
// leases, and none at or above a lowered limit. acquired is false when every
// slot is held: that is the expected "busy" outcome, not an error (see
// Rescheduler). A limit of 0 is the maintenance switch: always busy.
func (s *Slots) Acquire(ctx context.Context, group string, limit int, jobID, workerID string, lease time.Duration) (l Lease, acquired bool, err error) {
	if err := checkGroup(group); err != nil {
		return Lease{}, false, err
	}
	if err := checkLimit(group, limit); err != nil {
		return Lease{}, false, err
	}
	if err := checkLeaseDuration(lease); err != nil {
		return Lease{}, false, err
	}
	if strings.ContainsRune(jobID, 0) || strings.ContainsRune(workerID, 0) {
		return Lease{}, false, fmt.Errorf("%w: job id %q or worker id %q contains a NUL byte", ErrSlotArgument, jobID, workerID)
	}
	for range maxAcquireRounds {
		var (
			slot              *int
			token             *int64
			acquired, expires *time.Time
			firstWait         *time.Time
			effective         int
			raced             *bool
		)
		err = s.db.QueryRow(ctx, qualify.Must(s.acquireSQL()), group, limit, jobID, workerID, lease.Microseconds()).
			Scan(&slot, &token, &acquired, &expires, &effective, &firstWait, &raced)
		if err != nil {
			return Lease{}, false, fmt.Errorf("acquire a slot of group %q: %w", group, s.explain(err))
		}
		if slot == nil {
			if raced != nil && *raced {
				// A concurrent acquirer created the slot row this one
				// tried to create, and other slots were missing: try again
				// with a fresh snapshot rather than report a false busy.
				continue
			}
			break
		}
		l = Lease{Group: group, Slot: *slot, Token: *token, JobID: jobID, WorkerID: workerID,
			AcquiredAt: *acquired, ExpiresAt: *expires, Limit: effective}
		if firstWait != nil && l.AcquiredAt.After(*firstWait) {
			l.Waited = l.AcquiredAt.Sub(*firstWait)
		}
		s.metrics.acquisition(ctx, "acquired")
		s.metrics.waited(ctx, l.Waited)
		return l, true, nil
	}
	s.metrics.acquisition(ctx, "busy")
	s.log.DebugContext(ctx, "slot busy", "group", group, "job_id", jobID)
	return Lease{}, false, nil
}

// maxAcquireRounds bounds the statement's retries after losing the race to
// create a missing slot row; each retry sees the rows created meanwhile.
const maxAcquireRounds = 8

// acquireSQL is the acquisition statement. free locks the lowest free or
// expired slot row below the limit, skipping rows another session is
// locking (so concurrent acquirers spread over the free slots instead of
// queueing on one); FOR UPDATE re-checks the row's latest version after the
// lock, so a slot taken meanwhile is never taken twice. When no row is free,
// fresh inserts the lowest missing slot below the limit; a concurrent insert
// of the same slot makes it do nothing, never a second holder (the last
// column then tells Acquire that a missing slot existed, and it runs the
// statement again with a fresh snapshot instead of reporting busy). The
// primary key (group_name, slot) and slot < limit bound the unexpired
// leases by the limit.
func (s *Slots) acquireSQL() string {
	slots, limits, resched := s.l.Table(layout.SlotsTable), s.l.Table(layout.LimitsTable), s.l.Table(layout.ReschedulesTable)
	return `WITH lim AS (
    SELECT COALESCE(` + overrideSQL(limits, "$1") + `, $2::integer) AS n
), free AS (
    SELECT s.slot FROM ` + slots + ` s
    WHERE s.group_name = $1 AND s.slot >= 0 AND s.slot < (SELECT n FROM lim)
      AND (s.expires_at IS NULL OR s.expires_at <= clock_timestamp())
    ORDER BY s.slot LIMIT 1
    FOR UPDATE OF s SKIP LOCKED
), taken AS (
    UPDATE ` + slots + ` s SET job_id = $3, worker_id = $4, token = DEFAULT, concurrency_limit = $2::integer,
        acquired_at = clock_timestamp(), expires_at = clock_timestamp() + ($5::bigint * interval '1 microsecond')
    FROM free WHERE s.group_name = $1 AND s.slot = free.slot
    RETURNING s.slot, s.token, s.acquired_at, s.expires_at
), fresh AS (
    INSERT INTO ` + slots + ` (group_name, slot, job_id, worker_id, concurrency_limit, acquired_at, expires_at)
    SELECT $1, g.slot, $3, $4, $2::integer, clock_timestamp(), clock_timestamp() + ($5::bigint * interval '1 microsecond')
    FROM lim, generate_series(0, lim.n - 1) AS g(slot)
    WHERE NOT EXISTS (SELECT FROM taken)
      AND (SELECT 1 FROM ` + slots + ` s WHERE s.group_name = $1 AND s.slot = g.slot LIMIT 1) IS NULL
    ORDER BY g.slot LIMIT 1
    ON CONFLICT (group_name, slot) DO NOTHING
    RETURNING slot, token, acquired_at, expires_at
), won AS (
    SELECT * FROM taken UNION ALL SELECT * FROM fresh
), waited AS (
    DELETE FROM ` + resched + ` r WHERE r.job_id = $3 AND EXISTS (SELECT FROM won)
    RETURNING r.first_at
)
SELECT won.slot, won.token, won.acquired_at, won.expires_at, lim.n, (SELECT min(first_at) FROM waited),
    CASE WHEN won.slot IS NULL THEN EXISTS (
        SELECT FROM generate_series(0, lim.n - 1) AS g(slot)
        WHERE (SELECT 1 FROM ` + slots + ` s WHERE s.group_name = $1 AND s.slot = g.slot LIMIT 1) IS NULL
    ) END
FROM lim LEFT JOIN won ON true`
}

// Extend moves the lease's expiry to now + d, only while its token is
// current; otherwise it returns an error wrapping ErrLeaseLost. On success it
// returns the lease with the new ExpiresAt.
func (s *Slots) Extend(ctx context.Context, l Lease, d time.Duration) (Lease, error) {
	if err := checkLeaseDuration(d); err != nil {
		return l, err
	}
	if err := checkGroup(l.Group); err != nil {
		return l, err
	}
	err := s.db.QueryRow(ctx, qualify.Must(`UPDATE `+s.l.Table(layout.SlotsTable)+`
SET expires_at = clock_timestamp() + ($4::bigint * interval '1 microsecond')
WHERE group_name = $1 AND slot = $2 AND token = $3 AND expires_at IS NOT NULL
RETURNING expires_at`), l.Group, l.Slot, l.Token, d.Microseconds()).Scan(&l.ExpiresAt)
	if errors.Is(err, ErrNoRows) {
		return l, s.lost(ctx, "extend", l)
	}
	if err != nil {
		return l, fmt.Errorf("extend slot %d of group %q: %w", l.Slot, l.Group, s.explain(err))
	}
	return l, nil
}

// Release frees the lease's slot, only while its token is current;
// otherwise it returns an error wrapping ErrLeaseLost and changes nothing.
func (s *Slots) Release(ctx context.Context, l Lease) error {
	if err := checkGroup(l.Group); err != nil {
		return err
	}
	n, err := s.db.Exec(ctx, qualify.Must(`UPDATE `+s.l.Table(layout.SlotsTable)+`
SET job_id = NULL, worker_id = NULL, expires_at = NULL
WHERE group_name = $1 AND slot = $2 AND token = $3 AND expires_at IS NOT NULL`), l.Group, l.Slot, l.Token)
	if err != nil {
		return fmt.Errorf("release slot %d of group %q: %w", l.Slot, l.Group, s.explain(err))
	}
	if n == 0 {
		return s.lost(ctx, "release", l)
	}
	return nil
}

// explain adds the fix to a missing-table error: the migration has not
// run.
func (s *Slots) explain(err error) error { return explainMissing(s.l.Schema, err) }

// lost builds the ErrLeaseLost error for a failed release or extend, saying
// what became of the slot.
func (s *Slots) lost(ctx context.Context, op string, l Lease) error {
	var (
		token   int64
		jobID   *string
		expires *time.Time
	)
	err := s.db.QueryRow(ctx, qualify.Must(`SELECT token, job_id, expires_at FROM `+s.l.Table(layout.SlotsTable)+`
WHERE group_name = $1 AND slot = $2`), l.Group, l.Slot).Scan(&token, &jobID, &expires)
	var why string
	switch {
	case errors.Is(err, ErrNoRows):
		why = "the group has no such slot (never acquired, or swept after it expired)"
	case err != nil:
		why = "its state could not be read: " + err.Error()
	case token != l.Token && jobID != nil:
		why = fmt.Sprintf("it now belongs to job %q with token %d", *jobID, token)
	case token != l.Token:
		why = fmt.Sprintf("it was given to token %d since", token)
	default:
		why = "it was released already"
	}
	s.log.DebugContext(ctx, "slot lease lost", "op", op, "group", l.Group, "slot", l.Slot, "token", l.Token, "reason", why)
	return fmt.Errorf("%w: %s slot %d of group %q with token %d: %s", ErrLeaseLost, op, l.Slot, l.Group, l.Token, why)
}

// CleanupExpired deletes the slot rows that hold no lease: expired leases
// (their holders crashed or stalled) and released slots. Tokens are never
// reused, so a holder whose row was swept gets ErrLeaseLost. It returns how
// many rows it deleted. Run it periodically (the worker helper does not).
func (s *Slots) CleanupExpired(ctx context.Context) (int64, error) {
	n, err := s.db.Exec(ctx, qualify.Must(`DELETE FROM `+s.l.Table(layout.SlotsTable)+`
WHERE expires_at IS NULL OR expires_at <= clock_timestamp()`))
	if err != nil {
		return 0, fmt.Errorf("delete expired slot leases: %w", s.explain(err))
	}
	return n, nil
}

// ForceRelease frees a slot whatever its holder, for an operator freeing a
// stuck slot: the row is deleted, so the old holder's token stops working
// (tokens are never reused). It returns the lease it freed and an error
// when the group has no such slot.
func (s *Slots) ForceRelease(ctx context.Context, group string, slot int) (Lease, error) {
	if err := checkGroup(group); err != nil {
		return Lease{}, err
	}
	l := Lease{Group: group, Slot: slot}
	var jobID, workerID *string
	var acquired, expires *time.Time
	var limit *int
	err := s.db.QueryRow(ctx, qualify.Must(`DELETE FROM `+s.l.Table(layout.SlotsTable)+` WHERE group_name = $1 AND slot = $2
RETURNING token, job_id, worker_id, acquired_at, expires_at, concurrency_limit`), group, slot).
		Scan(&l.Token, &jobID, &workerID, &acquired, &expires, &limit)
	if errors.Is(err, ErrNoRows) {
		return Lease{}, fmt.Errorf("%w: group %q has no slot %d; run 'migrate-unique concurrency status %s' to see its slots", ErrSlotArgument, group, slot, group)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("release slot %d of group %q: %w", slot, group, s.explain(err))
	}
	l.JobID, l.WorkerID = deref(jobID), deref(workerID)
	if acquired != nil {
		l.AcquiredAt = *acquired
	}
	if expires != nil {
		l.ExpiresAt = *expires
	}
	if limit != nil {
		l.Limit = *limit
	}
	return l, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// SetLimit is Overrides.SetLimit on the slots' schema: it writes an
// operator override of group's limit, which wins over the code's limit for
// admission and execution alike. limit 0 is the maintenance switch.
// Lowering a limit hands out no slot at or above it; current holders finish.
func (s *Slots) SetLimit(ctx context.Context, group string, limit int, reason string) error {
	return s.overrides.SetLimit(ctx, group, limit, reason)
}

// ClearLimit is Overrides.ClearLimit on the slots' schema: it removes
// group's override, so the code's limit applies again, and reports whether
// there was one.
func (s *Slots) ClearLimit(ctx context.Context, group string) (bool, error) {
	return s.overrides.ClearLimit(ctx, group)
}

// Overrides returns the limit overrides of the slots' schema.
func (s *Slots) Overrides() *Overrides { return s.overrides }

// attrGroup is the group attribute of the per-group gauges.
func attrGroup(group string) attribute.KeyValue { return attribute.String("group", group) }
