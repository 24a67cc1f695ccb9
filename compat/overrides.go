package compat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/migrate-unique/migrate-unique/internal/qualify"
	"github.com/migrate-unique/migrate-unique/layout"
)

// Override is an operator's override of one group's limit.
type Override struct {
	// Group is the group's name: class, or class::key.
	Group string
	// Limit is the group's limit while the override stands; 0 blocks the
	// group (the maintenance switch).
	Limit int
	// Reason is the operator's note.
	Reason string
	// UpdatedAt is when the override was last written.
	UpdatedAt time.Time
}

// Overrides reads and writes operators' overrides of group limits, kept in
// the concurrency_limits table of the layout's schema (the migration creates
// it). An override wins over the code's limit for admission (Client reads
// it inside each admission transaction) and execution (Slots) alike, so it
// takes effect without a deploy. A service that only enqueues steers its
// limits with an Overrides alone; Slots.SetLimit and Slots.ClearLimit are
// the same calls. It is safe for concurrent use.
type Overrides struct {
	db DB
	l  layout.Resolved
}

// NewOverrides returns the overrides of the layout's schema on db. An
// invalid layout is an error wrapping layout.ErrInvalid.
func NewOverrides(db DB, l layout.Layout) (*Overrides, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: the database handle is nil", ErrSlotArgument)
	}
	rl, err := l.Resolve()
	if err != nil {
		return nil, fmt.Errorf("compat: %w", err)
	}
	return &Overrides{db: db, l: rl}, nil
}

// SetLimit writes an operator override of group's limit, which wins over
// the code's limit for admission and execution alike. limit 0 is the
// maintenance switch. Lowering a limit hands out no slot at or above it;
// current holders finish.
func (o *Overrides) SetLimit(ctx context.Context, group string, limit int, reason string) error {
	if err := checkGroup(group); err != nil {
		return err
	}
	if err := checkLimit(group, limit); err != nil {
		return err
	}
	if class, ok := isPauseName(group); ok {
		return fmt.Errorf("%w: %q (an empty key after '::') is the pause of class %q; use PauseClass", ErrSlotArgument, group, class)
	}
	if strings.ContainsRune(reason, 0) {
		return fmt.Errorf("%w: the reason contains a NUL byte", ErrSlotArgument)
	}
	_, err := o.db.Exec(ctx, qualify.Must(`INSERT INTO `+o.l.Table(layout.LimitsTable)+` AS o (group_name, concurrency_limit, reason, updated_at)
VALUES ($1, $2, $3, now())
ON CONFLICT (group_name) DO UPDATE SET concurrency_limit = EXCLUDED.concurrency_limit, reason = EXCLUDED.reason, updated_at = EXCLUDED.updated_at`),
		group, limit, reason)
	if err != nil {
		return fmt.Errorf("set the limit override of group %q: %w", group, explainMissing(o.l.Schema, err))
	}
	return nil
}

// ClearLimit removes group's override, so the code's limit applies again.
// It reports whether there was one.
func (o *Overrides) ClearLimit(ctx context.Context, group string) (bool, error) {
	if err := checkGroup(group); err != nil {
		return false, err
	}
	n, err := o.db.Exec(ctx, qualify.Must(`DELETE FROM `+o.l.Table(layout.LimitsTable)+` WHERE group_name = $1`), group)
	if err != nil {
		return false, fmt.Errorf("clear the limit override of group %q: %w", group, explainMissing(o.l.Schema, err))
	}
	return n > 0, nil
}

// Get returns group's override; ok is false when the group has none (the
// code's limit applies).
func (o *Overrides) Get(ctx context.Context, group string) (ov Override, ok bool, err error) {
	if err := checkGroup(group); err != nil {
		return Override{}, false, err
	}
	ov.Group = group
	err = o.db.QueryRow(ctx, qualify.Must(`SELECT concurrency_limit, reason, updated_at FROM `+o.l.Table(layout.LimitsTable)+` WHERE group_name = $1`), group).
		Scan(&ov.Limit, &ov.Reason, &ov.UpdatedAt)
	switch {
	case errors.Is(err, ErrNoRows):
		return Override{}, false, nil
	case err != nil:
		return Override{}, false, fmt.Errorf("read the limit override of group %q: %w", group, explainMissing(o.l.Schema, err))
	}
	return ov, true, nil
}

// explainMissing adds the fix to a missing-table error (SQLSTATE 42P01 or
// 3F000, whichever driver reports it): the migration has not run.
func explainMissing(schema string, err error) error {
	if code := sqlState(err); code == "42P01" || code == "3F000" {
		return fmt.Errorf("the runtime tables (%s, %s, %s) are missing in schema %q; run 'migrate-unique up' first: %w",
			layout.SlotsTable, layout.LimitsTable, layout.ReschedulesTable, schema, err)
	}
	return err
}
