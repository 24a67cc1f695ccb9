package compat

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/migrate-unique/migrate-unique/internal/lockid"
	"github.com/migrate-unique/migrate-unique/internal/qualify"
	"github.com/migrate-unique/migrate-unique/layout"
)

// SlotStatus is one slot row of a group.
type SlotStatus struct {
	// Slot is the slot number.
	Slot int `json:"slot"`
	// Held is true while an unexpired lease holds the slot.
	Held bool `json:"held"`
	// Expired is true when a lease holds the row but has expired: its
	// holder crashed or stalled, and the next acquirer or sweep reclaims it.
	Expired bool `json:"expired"`
	// OverLimit is true for a held slot at or above the group's current
	// limit: a holder from before the limit was lowered, finishing its job.
	OverLimit bool `json:"over_limit"`
	// JobID and WorkerID are the holder ("" when free).
	JobID    string `json:"job_id,omitempty"`
	WorkerID string `json:"worker_id,omitempty"`
	// Token is the current fencing token.
	Token int64 `json:"token"`
	// AcquiredAt is when the slot was last acquired; ExpiresAt is nil when
	// the slot is free.
	AcquiredAt *time.Time `json:"acquired_at,omitempty"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
}

// WaitingJob is a job that was rescheduled because its group was busy and
// has not had a slot since.
type WaitingJob struct {
	// JobID is the id the job was rescheduled and acquires with.
	JobID string `json:"job_id"`
	// Reschedules counts its busy reschedules since it last had a slot.
	Reschedules int64 `json:"reschedules"`
	// FirstAt and LastAt are its first and latest busy reschedule.
	FirstAt time.Time `json:"first_at"`
	LastAt  time.Time `json:"last_at"`
}

// GroupStatus is what Status reports for one group.
type GroupStatus struct {
	// Group is the group name.
	Group string `json:"group"`
	// Limit is the effective limit; HasLimit is false when neither an
	// override nor a holder says what it is.
	Limit    int  `json:"limit"`
	HasLimit bool `json:"has_limit"`
	// Override is true when Limit comes from concurrency_limits;
	// OverrideReason is the operator's note.
	Override       bool   `json:"override"`
	OverrideReason string `json:"override_reason,omitempty"`
	// Paused is true while the group's class is paused (Overrides.PauseClass):
	// Limit is then 0, whatever the group's own override; PauseReason is the
	// operator's note.
	Paused      bool   `json:"paused"`
	PauseReason string `json:"pause_reason,omitempty"`
	// Active counts unexpired leases; OverLimit counts those at or above
	// Limit.
	Active    int `json:"active"`
	OverLimit int `json:"over_limit"`
	// Slots lists every slot row, by slot number.
	Slots []SlotStatus `json:"slots"`
	// Waiting lists the jobs most often rescheduled for this group (at
	// most 10), most reschedules first.
	Waiting []WaitingJob `json:"waiting,omitempty"`
	// LockHolders are the sessions that hold the group's admission lock
	// now (an enqueue in flight, or a caller's transaction that enqueued
	// into the group and has not committed): what an enqueue that timed out
	// (ErrLockTimeout) waited for.
	LockHolders []LockHolder `json:"lock_holders,omitempty"`
}

// LockHolder is a session that holds a group's advisory lock.
type LockHolder struct {
	// PID is the backend's process id (pg_terminate_backend ends it).
	PID int `json:"pid"`
	// Mode is ExclusiveLock or ShareLock (every enqueue into a class holds
	// the class's lock shared).
	Mode string `json:"mode"`
	// State is pg_stat_activity's state: active, idle in transaction, ...
	State string `json:"state"`
	// XactStart and QueryStart are when its transaction and its latest
	// statement began; Age is how long the transaction has been open.
	XactStart  *time.Time    `json:"xact_start,omitempty"`
	QueryStart *time.Time    `json:"query_start,omitempty"`
	Age        time.Duration `json:"age"`
}

// Status reports one group: its effective limit (an override wins over the
// limit its holders asked for), every slot with holder, worker and expiry,
// the over-limit holders and the most rescheduled waiting jobs.
func (s *Slots) Status(ctx context.Context, group string) (GroupStatus, error) {
	if err := checkGroup(group); err != nil {
		return GroupStatus{}, err
	}
	all, err := s.status(ctx, []string{group})
	if err != nil {
		return GroupStatus{}, err
	}
	if len(all) == 0 {
		return GroupStatus{Group: group, Slots: []SlotStatus{}}, nil
	}
	return all[0], nil
}

// StatusAll reports every group that has a slot row, an override or a
// waiting job, ordered by name.
func (s *Slots) StatusAll(ctx context.Context) ([]GroupStatus, error) {
	return s.status(ctx, nil)
}

// status reports the given groups, or every group when groups is nil.
func (s *Slots) status(ctx context.Context, groups []string) ([]GroupStatus, error) {
	byName := map[string]*GroupStatus{}
	get := func(g string) *GroupStatus {
		st := byName[g]
		if st == nil {
			st = &GroupStatus{Group: g, Slots: []SlotStatus{}}
			byName[g] = st
		}
		return st
	}
	filter := `($1::text[] IS NULL OR group_name = ANY ($1))`
	var groupsArg any
	if groups != nil {
		groupsArg = groups
	}
	// The overrides, and the pauses of the groups' classes.
	var limitsArg any
	if groups != nil {
		names := append([]string(nil), groups...)
		for _, g := range groups {
			class, _ := layout.SplitGroupName(g)
			names = append(names, PauseName(class))
		}
		limitsArg = names
	}
	pauses := map[string]string{}
	rows, err := s.db.Query(ctx, qualify.Must(`SELECT group_name, concurrency_limit, reason FROM `+s.l.Table(layout.LimitsTable)+` WHERE `+filter), limitsArg)
	if err != nil {
		return nil, fmt.Errorf("read limit overrides: %w", s.explain(err))
	}
	for rows.Next() {
		var g, reason string
		var limit int
		if err := rows.Scan(&g, &limit, &reason); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read limit overrides: %w", err)
		}
		if class, ok := isPauseName(g); ok {
			pauses[class] = reason
			continue
		}
		st := get(g)
		st.Limit, st.HasLimit, st.Override, st.OverrideReason = limit, true, true, reason
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read limit overrides: %w", err)
	}

	rows, err = s.db.Query(ctx, qualify.Must(`SELECT group_name, slot, token, job_id, worker_id, acquired_at, expires_at,
    expires_at > clock_timestamp(), concurrency_limit
FROM `+s.l.Table(layout.SlotsTable)+` WHERE `+filter+` ORDER BY group_name, slot`), groupsArg)
	if err != nil {
		return nil, fmt.Errorf("read slots: %w", err)
	}
	codeLimit := map[string]int{}
	for rows.Next() {
		var (
			g               string
			sl              SlotStatus
			jobID, workerID *string
			unexpired       *bool
			limit           *int
		)
		if err := rows.Scan(&g, &sl.Slot, &sl.Token, &jobID, &workerID, &sl.AcquiredAt, &sl.ExpiresAt, &unexpired, &limit); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read slots: %w", err)
		}
		sl.JobID, sl.WorkerID = deref(jobID), deref(workerID)
		sl.Held = unexpired != nil && *unexpired
		sl.Expired = unexpired != nil && !*unexpired
		if limit != nil && sl.ExpiresAt != nil && *limit > codeLimit[g] {
			codeLimit[g] = *limit
		}
		st := get(g)
		st.Slots = append(st.Slots, sl)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read slots: %w", err)
	}

	rows, err = s.db.Query(ctx, qualify.Must(`SELECT group_name, job_id, reschedules, first_at, last_at FROM (
    SELECT *, row_number() OVER (PARTITION BY group_name ORDER BY reschedules DESC, first_at) AS n
    FROM `+s.l.Table(layout.ReschedulesTable)+` WHERE `+filter+`
) r WHERE n <= 10 ORDER BY group_name, n`), groupsArg)
	if err != nil {
		return nil, fmt.Errorf("read reschedule counters: %w", err)
	}
	for rows.Next() {
		var g string
		var w WaitingJob
		if err := rows.Scan(&g, &w.JobID, &w.Reschedules, &w.FirstAt, &w.LastAt); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read reschedule counters: %w", err)
		}
		st := get(g)
		st.Waiting = append(st.Waiting, w)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read reschedule counters: %w", err)
	}

	if groups != nil {
		for _, g := range groups {
			get(g)
		}
	} else {
		for class := range pauses {
			get(class) // a paused class shows even with nothing else
		}
	}
	if err := s.lockHolders(ctx, byName); err != nil {
		return nil, err
	}
	out := make([]GroupStatus, 0, len(byName))
	for g, st := range byName {
		if !st.Override {
			if n, ok := codeLimit[g]; ok {
				st.Limit, st.HasLimit = n, true
			}
		}
		class, _ := layout.SplitGroupName(g)
		if reason, ok := pauses[class]; ok {
			st.Paused, st.PauseReason, st.Limit, st.HasLimit = true, reason, 0, true
		}
		for i := range st.Slots {
			sl := &st.Slots[i]
			if !sl.Held {
				continue
			}
			st.Active++
			if st.HasLimit && sl.Slot >= st.Limit {
				sl.OverLimit = true
				st.OverLimit++
			}
		}
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}

// lockHolders fills in the sessions that hold each group's advisory lock
// (plain-jobs' lock id, as admission takes it).
func (s *Slots) lockHolders(ctx context.Context, byName map[string]*GroupStatus) error {
	if len(byName) == 0 {
		return nil
	}
	ids := make([]int64, 0, len(byName))
	byID := map[int64][]*GroupStatus{}
	for g, st := range byName {
		id := lockid.For(layout.SplitGroupName(g))
		ids = append(ids, id)
		byID[id] = append(byID[id], st)
	}
	// A bigint advisory key is (classid, objid) = (high, low) 32 bits.
	rows, err := s.db.Query(ctx, qualify.Must(`SELECT (l.classid::bigint << 32) | l.objid::bigint, l.pid, l.mode, coalesce(a.state, ''), a.xact_start, a.query_start,
    coalesce(extract(epoch FROM clock_timestamp() - a.xact_start), 0)::float8
FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((l.classid::bigint << 32) | l.objid::bigint) = ANY ($1)
ORDER BY a.xact_start, l.pid`), ids)
	if err != nil {
		return fmt.Errorf("read the groups' lock holders: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var h LockHolder
		var age float64
		if err := rows.Scan(&id, &h.PID, &h.Mode, &h.State, &h.XactStart, &h.QueryStart, &age); err != nil {
			return fmt.Errorf("read the groups' lock holders: %w", err)
		}
		h.Age = time.Duration(age * float64(time.Second)).Round(time.Millisecond)
		for _, st := range byID[id] {
			st.LockHolders = append(st.LockHolders, h)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the groups' lock holders: %w", err)
	}
	return nil
}
