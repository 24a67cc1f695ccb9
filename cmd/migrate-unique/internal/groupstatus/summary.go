package groupstatus

import (
	"context"
	"fmt"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
)

// Summary is one group of Read's report reduced to counts: what a list of
// every group shows (the dashboard's groups page). Its fields mean what
// Group's of the same name mean.
type Summary struct {
	Group          string
	Class          string
	Key            string
	Limit          *int
	LimitSource    string
	Override       bool
	OverrideReason string
	Paused         bool
	PauseReason    string
	Queued         *int64
	Running        *int64
	SlotsHeld      int
	SlotsOverLimit int
	// SlotsExpired counts the slots whose lease has expired (Group's
	// Slots with Expired); Slots counts every slot row.
	SlotsExpired int
	Slots        int
	// RescheduledJobs counts the group's rescheduled jobs, at most 10 (as
	// many as Group's RescheduledJobs lists); Rescheduled counts them all.
	RescheduledJobs int
	Rescheduled     int
}

// SummaryReport is Read's report reduced to counts.
type SummaryReport struct {
	Groups        []Summary
	PausedClasses []compat.Pause
	QueueNote     string
}

// maxListedWaiting is how many rescheduled jobs Read lists per group
// (compat.GroupStatus.Waiting).
const maxListedWaiting = 10

// ReadSummaries reads every group Read reads, with the same limits,
// counts of slots and jobs, in a fixed number of statements whatever the
// number of groups: compat.Slots.Summaries (one row per group, counted by
// PostgreSQL), the class pauses, and one count per queue table
// (Counter.CountEach). It reads no slot row, waiting job or lock holder
// one by one: a group's own page reads those with Read.
func ReadSummaries(ctx context.Context, conn pgurl.Handle, slots *compat.Slots, ql layout.Resolved) (SummaryReport, error) {
	sums, err := slots.Summaries(ctx)
	if err != nil {
		return SummaryReport{}, err
	}
	pauses, err := slots.Overrides().Pauses(ctx)
	if err != nil {
		return SummaryReport{}, err
	}
	out := SummaryReport{Groups: make([]Summary, len(sums)), PausedClasses: pauses}
	if out.PausedClasses == nil {
		out.PausedClasses = []compat.Pause{}
	}
	classes, keys := make([]string, len(sums)), make([]string, len(sums))
	for i, g := range sums {
		s := Summary{Group: g.Group, Override: g.Override, OverrideReason: g.OverrideReason, Paused: g.Paused, PauseReason: g.PauseReason,
			SlotsHeld: g.Active, SlotsOverLimit: g.OverLimit, SlotsExpired: g.Expired, Slots: g.Slots,
			RescheduledJobs: min(g.Waiting, maxListedWaiting), Rescheduled: g.Waiting}
		s.Class, s.Key = layout.SplitGroupName(g.Group)
		s.Limit, s.LimitSource = limitOf(g.HasLimit, g.Limit, g.Paused, g.Override)
		out.Groups[i] = s
		classes[i], keys[i] = s.Class, s.Key
	}
	counter, note := NewCounter(ctx, conn, ql)
	out.QueueNote = note
	if counter == nil {
		return out, nil
	}
	counts, err := counter.CountEach(ctx, conn, classes, keys)
	if err != nil {
		return SummaryReport{}, fmt.Errorf("count the groups' jobs: %w", err)
	}
	for i := range out.Groups {
		out.Groups[i].Queued, out.Groups[i].Running = &counts[i].Queued, &counts[i].Running
	}
	return out, nil
}

// limitOf is a group's effective limit for output (nil without one) and
// where it comes from: "class_pause", "override", "code" or "".
func limitOf(hasLimit bool, limit int, paused, override bool) (*int, string) {
	if !hasLimit {
		return nil, ""
	}
	switch {
	case paused:
		return &limit, "class_pause"
	case override:
		return &limit, "override"
	}
	return &limit, "code"
}

// SummaryOf reduces a group of Read's report to its summary. Rescheduled
// is what Read lists (at most 10): Read does not count beyond.
func SummaryOf(g Group) Summary {
	s := Summary{Group: g.Group, Class: g.Class, Key: g.Key, Limit: g.Limit, LimitSource: g.LimitSource,
		Override: g.Override, OverrideReason: g.OverrideReason, Paused: g.Paused, PauseReason: g.PauseReason,
		Queued: g.Queued, Running: g.Running, SlotsHeld: g.SlotsHeld, SlotsOverLimit: g.SlotsOverLimit,
		Slots: len(g.Slots), RescheduledJobs: len(g.RescheduledJobs), Rescheduled: len(g.RescheduledJobs)}
	for _, sl := range g.Slots {
		if sl.Expired {
			s.SlotsExpired++
		}
	}
	return s
}
