package compat

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/migrate-unique/migrate-unique/internal/qualify"
	"github.com/migrate-unique/migrate-unique/layout"
)

// A class pause stops every group of a job class at once: the keyless group
// and every keyed one, in admission (an enqueue is blocked at limit 0, the
// typed Skip result) and in slot acquisition (busy, so a worker reschedules
// the job). It is kept in concurrency_limits as the row PauseName(class)
// with limit 0: the class name followed by "::" and an empty key, a name
// GroupName never gives a group, so a pause never takes the place of a
// group's own override, and resuming leaves that override as it was.
//
// Every read of a group's override (admission, acquisition, status) reads
// the least of the group's own override and its class's pause row, in one
// statement with the rest of the check, so a pause binds from the next
// enqueue and acquisition on, exactly as an override of 0 does.

// PauseName is the concurrency_limits row that pauses class.
func PauseName(class string) string { return class + "::" }

// isPauseName reports whether a concurrency_limits row is a class pause,
// and of which class.
func isPauseName(group string) (class string, ok bool) {
	class, ok = strings.CutSuffix(group, "::")
	return class, ok && class != "" && !strings.Contains(class, "::")
}

// overrideSQL is the effective override of the group whose name is the SQL
// expression group (a placeholder): its own override, or 0 while its class
// is paused; NULL when it has neither. The class is the name's part before
// the first "::" (layout.SplitGroupName).
func overrideSQL(limits, group string) string {
	return "(SELECT min(concurrency_limit) FROM " + limits + " WHERE group_name = ANY (ARRAY[" + group + ", split_part(" + group + ", '::', 1) || '::']))"
}

// Pause is a class pause.
type Pause struct {
	// Class is the paused job class.
	Class string `json:"class"`
	// Reason is the operator's note.
	Reason string `json:"reason"`
	// Since is when the pause was written.
	Since time.Time `json:"since"`
}

// PauseClass stops every group of class (the keyless group and every key)
// in admission and in slot acquisition until ResumeClass. Groups' own
// overrides are left as they are. Jobs that hold a slot finish; pending
// jobs stay pending (a worker that picks one gets no slot and reschedules
// it). It reports whether the class was already paused (its reason is
// then replaced).
func (o *Overrides) PauseClass(ctx context.Context, class, reason string) (already bool, err error) {
	if err := checkClass(class); err != nil {
		return false, err
	}
	if strings.ContainsRune(reason, 0) {
		return false, fmt.Errorf("%w: the reason contains a NUL byte", ErrSlotArgument)
	}
	var inserted bool
	err = o.db.QueryRow(ctx, qualify.Must(`INSERT INTO `+o.l.Table(layout.LimitsTable)+` AS o (group_name, concurrency_limit, reason, updated_at)
VALUES ($1, 0, $2, now())
ON CONFLICT (group_name) DO UPDATE SET concurrency_limit = 0, reason = EXCLUDED.reason, updated_at = EXCLUDED.updated_at
RETURNING xmax = 0`), PauseName(class), reason).Scan(&inserted)
	if err != nil {
		return false, fmt.Errorf("pause class %q: %w", class, explainMissing(o.l.Schema, err))
	}
	return !inserted, nil
}

// ResumeClass lifts class's pause; groups' own overrides and code limits
// apply again. It reports whether the class was paused.
func (o *Overrides) ResumeClass(ctx context.Context, class string) (bool, error) {
	if err := checkClass(class); err != nil {
		return false, err
	}
	n, err := o.db.Exec(ctx, qualify.Must(`DELETE FROM `+o.l.Table(layout.LimitsTable)+` WHERE group_name = $1`), PauseName(class))
	if err != nil {
		return false, fmt.Errorf("resume class %q: %w", class, explainMissing(o.l.Schema, err))
	}
	return n > 0, nil
}

// Pauses lists the paused classes, by name.
func (o *Overrides) Pauses(ctx context.Context) ([]Pause, error) {
	rows, err := o.db.Query(ctx, qualify.Must(`SELECT group_name, reason, updated_at FROM `+o.l.Table(layout.LimitsTable)+
		` WHERE right(group_name, 2) = '::' ORDER BY group_name`))
	if err != nil {
		return nil, fmt.Errorf("read class pauses: %w", explainMissing(o.l.Schema, err))
	}
	defer rows.Close()
	var out []Pause
	for rows.Next() {
		var name string
		var p Pause
		if err := rows.Scan(&name, &p.Reason, &p.Since); err != nil {
			return nil, fmt.Errorf("read class pauses: %w", err)
		}
		if class, ok := isPauseName(name); ok {
			p.Class = class
			out = append(out, p)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read class pauses: %w", err)
	}
	return out, nil
}

// checkClass refuses a class no job can have.
func checkClass(class string) error {
	switch {
	case class == "":
		return fmt.Errorf("%w: the class name is empty", ErrSlotArgument)
	case strings.ContainsRune(class, 0):
		return fmt.Errorf("%w: the class name %q contains a NUL byte", ErrSlotArgument, class)
	case strings.Contains(class, "::"):
		return fmt.Errorf("%w: %q is a group name (class::key); a pause takes the class alone", ErrSlotArgument, class)
	}
	return nil
}
