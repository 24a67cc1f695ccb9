package compat

import (
	"errors"
	"testing"
	"time"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// TestClassPauseStopsEveryGroupOfTheClass: one PauseClass blocks the
// class's keyless jobs (unlimited and class-limited), its keyed jobs
// (limited in code, with no limit, and under a group override of their
// own), single and batched, with the typed limit result at limit 0, and
// refuses their slots; another class goes on. ResumeClass lifts it and the
// group's own override is as it was.
func TestClassPauseStopsEveryGroupOfTheClass(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	ctx := t.Context()
	ov, err := NewOverrides(Pgx(q.pool), q.l.Layout)
	if err != nil {
		t.Fatal(err)
	}
	slots, err := NewSlots(Pgx(q.pool), q.l.Layout, SlotsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const class, other = "pause.Charge", "pause.Email"
	if err := ov.SetLimit(ctx, GroupName(class, "own"), 3, "its own override"); err != nil {
		t.Fatal(err)
	}
	jobs := []Job{
		{Class: class, Value: struct{}{}},                                                      // keyless, no limit
		{Class: class, Value: Limit("", 5)},                                                    // keyless, class-wide limit
		{Class: class, Value: Limit("customer-8", 2)},                                          // keyed, limited in code
		{Class: class, Value: Identity{Key: "customer-9"}},                                     // keyed, no limit in code
		{Class: class, Value: Identity{Key: "own"}},                                            // keyed, its own override
		{Class: class, Value: Scheduled(struct{}{}, time.Unix(1_700_000_040, 0), NoOverlap())}, // a schedule
	}
	already, err := ov.PauseClass(ctx, class, "incident 42")
	if err != nil || already {
		t.Fatalf("PauseClass: already %v, %v", already, err)
	}
	if already, err := ov.PauseClass(ctx, class, "incident 42, still"); err != nil || !already {
		t.Fatalf("a second PauseClass: already %v, %v", already, err)
	}
	for _, j := range jobs {
		res, err := q.c.Enqueue(ctx, j)
		if err != nil {
			t.Fatalf("Enqueue %+v while paused: %v", j.Value, err)
		}
		if res.Inserted() || res.Skipped.Limit != 0 || res.Skipped.Active != 0 || res.Skipped.Class != class {
			t.Errorf("Enqueue %+v while paused: %+v, want skipped at limit 0", j.Value, res.Skipped)
		}
	}
	res, err := q.c.EnqueueMany(ctx, append(jobs[:len(jobs):len(jobs)], Job{Class: other, Value: Limit("k", 1)}))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res[:len(jobs)] {
		if r.Inserted() || r.Skipped.Limit != 0 {
			t.Errorf("EnqueueMany job %d while paused: %+v", i, r.Skipped)
		}
	}
	if !res[len(jobs)].Inserted() {
		t.Errorf("a job of another class was refused: %+v", res[len(jobs)].Skipped)
	}
	for _, g := range []string{class, GroupName(class, "customer-8"), GroupName(class, "own")} {
		if _, ok, err := slots.Acquire(ctx, g, 4, "job-"+g, "w1", time.Minute); err != nil || ok {
			t.Errorf("Acquire %s while paused: acquired %v, %v", g, ok, err)
		}
		st, err := slots.Status(ctx, g)
		if err != nil || !st.Paused || st.PauseReason != "incident 42, still" || st.Limit != 0 || !st.HasLimit {
			t.Errorf("Status %s while paused: %+v, %v", g, st, err)
		}
	}
	if l, ok, err := slots.Acquire(ctx, GroupName(other, "k"), 1, "job-other", "w1", time.Minute); err != nil || !ok {
		t.Errorf("Acquire of another class: %+v %v %v", l, ok, err)
	}
	all, err := slots.StatusAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string]bool{}
	for _, g := range all {
		shown[g.Group] = g.Paused
		if g.Group == PauseName(class) {
			t.Errorf("StatusAll shows the pause row as a group: %+v", g)
		}
	}
	if !shown[class] || !shown[GroupName(class, "own")] || shown[GroupName(other, "k")] {
		t.Errorf("StatusAll paused flags: %v", shown)
	}
	if ps, err := ov.Pauses(ctx); err != nil || len(ps) != 1 || ps[0].Class != class || ps[0].Reason != "incident 42, still" {
		t.Errorf("Pauses: %+v, %v", ps, err)
	}

	if had, err := ov.ResumeClass(ctx, class); err != nil || !had {
		t.Fatalf("ResumeClass: had %v, %v", had, err)
	}
	if had, err := ov.ResumeClass(ctx, class); err != nil || had {
		t.Fatalf("a second ResumeClass: had %v, %v", had, err)
	}
	for _, j := range jobs {
		res, err := q.c.Enqueue(ctx, j)
		if err != nil || !res.Inserted() {
			t.Errorf("Enqueue %+v after resume: %+v, %v", j.Value, res.Skipped, err)
		}
	}
	if _, ok, err := slots.Acquire(ctx, GroupName(class, "customer-8"), 2, "job-8", "w1", time.Minute); err != nil || !ok {
		t.Errorf("Acquire after resume: acquired %v, %v", ok, err)
	}
	if got, ok, err := ov.Get(ctx, GroupName(class, "own")); err != nil || !ok || got.Limit != 3 {
		t.Errorf("the group's own override after resume: %+v %v %v", got, ok, err)
	}
	if ps, err := ov.Pauses(ctx); err != nil || len(ps) != 0 {
		t.Errorf("Pauses after resume: %+v, %v", ps, err)
	}
}

// TestClassPauseBadInput: a group name is not a class, and the pause's row
// cannot be written as an override.
func TestClassPauseBadInput(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	ov, err := NewOverrides(Pgx(q.pool), q.l.Layout)
	if err != nil {
		t.Fatal(err)
	}
	for _, class := range []string{"", "a::b", "a\x00"} {
		if _, err := ov.PauseClass(t.Context(), class, ""); !errors.Is(err, ErrSlotArgument) {
			t.Errorf("PauseClass(%q): %v", class, err)
		}
	}
	if err := ov.SetLimit(t.Context(), PauseName("a"), 2, ""); !errors.Is(err, ErrSlotArgument) {
		t.Errorf("SetLimit on the pause row: %v", err)
	}
}
