package compat

import (
	"errors"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// TestOverridesOnTheirOwn: a service that only enqueues steers a group's
// limit with an Overrides, no Slots built: Enqueue obeys the override, Get
// reads it back, and after ClearLimit the code's limit applies again. Slots
// sees the same override through its own calls.
func TestOverridesOnTheirOwn(t *testing.T) {
	q := newQueue(t, legacy.PlainJobs, true)
	ctx := t.Context()
	ov, err := NewOverrides(Pgx(q.pool), q.l.Layout)
	if err != nil {
		t.Fatal(err)
	}
	const class, key = "overrides.Export", "acct-7"
	group := GroupName(class, key)
	if _, ok, err := ov.Get(ctx, group); err != nil || ok {
		t.Fatalf("Get before any override: ok %v, %v", ok, err)
	}
	if err := ov.SetLimit(ctx, group, 1, "db maintenance"); err != nil {
		t.Fatal(err)
	}
	got, ok, err := ov.Get(ctx, group)
	if err != nil || !ok || got.Group != group || got.Limit != 1 || got.Reason != "db maintenance" || got.UpdatedAt.IsZero() {
		t.Fatalf("Get: %+v, ok %v, %v", got, ok, err)
	}
	enqueue := func() Result {
		t.Helper()
		res, err := q.c.Enqueue(ctx, Job{Class: class, Value: Limit(key, 5)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if !enqueue().Inserted() {
		t.Fatal("the first job was refused under an override of 1")
	}
	if res := enqueue(); res.Inserted() || res.Skipped.Limit != 1 || res.Skipped.Active != 1 {
		t.Fatalf("the second job under an override of 1: %+v", res.Skipped)
	}
	s, err := NewSlots(Pgx(q.pool), q.l.Layout, SlotsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := s.Status(ctx, group); err != nil || !st.Override || st.Limit != 1 || st.OverrideReason != "db maintenance" {
		t.Fatalf("Slots.Status: %+v, %v", st, err)
	}
	had, err := ov.ClearLimit(ctx, group)
	if err != nil || !had {
		t.Fatalf("ClearLimit: had %v, %v", had, err)
	}
	if !enqueue().Inserted() {
		t.Fatal("after ClearLimit the code's limit 5 does not apply")
	}
	if had, err := s.ClearLimit(ctx, group); err != nil || had {
		t.Fatalf("a second ClearLimit, through Slots: had %v, %v", had, err)
	}
	if _, ok, err := ov.Get(ctx, group); err != nil || ok {
		t.Fatalf("Get after ClearLimit: ok %v, %v", ok, err)
	}
}

// TestOverridesBadInput: bad arguments are refused before any statement,
// and a database without the runtime tables says to run the migration.
func TestOverridesBadInput(t *testing.T) {
	if _, err := NewOverrides(nil, layout.PlainJobs()); !errors.Is(err, ErrSlotArgument) {
		t.Errorf("NewOverrides(nil): %v", err)
	}
	if _, err := NewOverrides(Pgx(nil), layout.Layout{}); !errors.Is(err, layout.ErrInvalid) {
		t.Errorf("NewOverrides(empty layout): %v", err)
	}
	url := slotTestDB(t)
	pool := slotTestPool(t, url, 2)
	ov, err := NewOverrides(Pgx(pool), layout.Layout{Schema: "elsewhere", RequestsTable: "r"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for name, err := range map[string]error{
		"negative limit": ov.SetLimit(ctx, "G", -1, ""),
		"empty group":    ov.SetLimit(ctx, "", 1, ""),
		"NUL reason":     ov.SetLimit(ctx, "G", 1, "a\x00b"),
	} {
		if !errors.Is(err, ErrSlotArgument) {
			t.Errorf("%s: %v, want ErrSlotArgument", name, err)
		}
	}
	if _, _, err := ov.Get(ctx, ""); !errors.Is(err, ErrSlotArgument) {
		t.Errorf("Get(\"\"): %v, want ErrSlotArgument", err)
	}
	if err := ov.SetLimit(ctx, "G", 1, ""); err == nil || !strings.Contains(err.Error(), "run 'migrate-unique up' first") {
		t.Errorf("SetLimit without the runtime tables: %v", err)
	}
	if _, _, err := ov.Get(ctx, "G"); err == nil || !strings.Contains(err.Error(), "run 'migrate-unique up' first") {
		t.Errorf("Get without the runtime tables: %v", err)
	}
}
