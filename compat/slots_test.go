package compat

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
)

// slotTestLayout is a two-table layout without a results table, so its
// RuntimeDDL is only the runtime's own tables (no skip column to add).
var slotTestLayout = layout.Layout{Schema: "public", RequestsTable: "slot_test_requests"}

// mustResolve resolves l or fails the test.
func mustResolve(t testing.TB, l layout.Layout) layout.Resolved {
	t.Helper()
	r, err := l.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// slotTestDB returns a fresh database holding the runtime's tables.
func slotTestDB(t *testing.T) string {
	t.Helper()
	ddl := mustResolve(t, slotTestLayout).RuntimeDDL()
	return testdb.New(t, testdb.FromTemplate("compat/slots/"+strings.Join(ddl, ";"), func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		for _, stmt := range ddl {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	}))
}

// slotTestPool opens a pool of up to n connections, closed when the test ends.
func slotTestPool(t *testing.T, url string, n int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = n
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// slotTestSlots returns a Slots on a fresh database and the database's URL.
func slotTestSlots(t *testing.T) (*Slots, *pgxpool.Pool, string) {
	t.Helper()
	url := slotTestDB(t)
	pool := slotTestPool(t, url, 4)
	s, err := NewSlots(Pgx(pool), slotTestLayout, SlotsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s, pool, url
}

func slotMustAcquire(t *testing.T, s *Slots, group string, limit int, job string, lease time.Duration) Lease {
	t.Helper()
	l, ok, err := s.Acquire(t.Context(), group, limit, job, "w-"+job, lease)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("acquire %s for %s: busy, want a slot", group, job)
	}
	return l
}

func slotMustBeBusy(t *testing.T, s *Slots, group string, limit int, job string) {
	t.Helper()
	l, ok, err := s.Acquire(t.Context(), group, limit, job, "w-"+job, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Fatalf("acquire %s for %s: got slot %d, want busy", group, job, l.Slot)
	}
}

// slotAwaitExpired waits until the database's clock is past the lease's
// expiry (the database decides expiry, so the test asks it).
func slotAwaitExpired(t *testing.T, pool *pgxpool.Pool, l Lease) {
	t.Helper()
	for {
		var expired bool
		if err := pool.QueryRow(t.Context(), "SELECT $1::timestamptz <= clock_timestamp()", l.ExpiresAt).Scan(&expired); err != nil {
			t.Fatal(err)
		}
		if expired {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSlotAcquireExtendRelease(t *testing.T) {
	t.Parallel()
	s, _, _ := slotTestSlots(t)
	ctx := t.Context()
	const g = "Mailer::acct-1"

	a := slotMustAcquire(t, s, g, 2, "j1", time.Minute)
	b := slotMustAcquire(t, s, g, 2, "j2", time.Minute)
	if a.Slot != 0 || b.Slot != 1 {
		t.Fatalf("slots %d and %d, want 0 and 1", a.Slot, b.Slot)
	}
	if a.Limit != 2 || a.JobID != "j1" || a.WorkerID != "w-j1" || !a.ExpiresAt.After(a.AcquiredAt) {
		t.Fatalf("lease %+v", a)
	}
	slotMustBeBusy(t, s, g, 2, "j3")
	// Another group is independent.
	slotMustAcquire(t, s, "Mailer::acct-2", 1, "j4", time.Minute)

	ext, err := s.Extend(ctx, a, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !ext.ExpiresAt.After(a.ExpiresAt) || ext.Token != a.Token {
		t.Fatalf("extended lease %+v from %+v", ext, a)
	}
	if err := s.Release(ctx, ext); err != nil {
		t.Fatal(err)
	}
	// A second release, or an extend after release, is a lost lease.
	if err := s.Release(ctx, ext); !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "released already") {
		t.Fatalf("second release: %v, want ErrLeaseLost saying released already", err)
	}
	if _, err := s.Extend(ctx, ext, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("extend after release: %v, want ErrLeaseLost", err)
	}
	c := slotMustAcquire(t, s, g, 2, "j3", time.Minute)
	if c.Slot != 0 || c.Token <= a.Token {
		t.Fatalf("reacquired slot %d token %d, want slot 0 and a token above %d", c.Slot, c.Token, a.Token)
	}
	// The old token cannot release the new holder's slot.
	if err := s.Release(ctx, a); !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), `job "j3"`) {
		t.Fatalf("stale release: %v, want ErrLeaseLost naming j3", err)
	}
	st, err := s.Status(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if st.Active != 2 || st.Limit != 2 || !st.HasLimit || st.Override || len(st.Slots) != 2 || st.Slots[0].JobID != "j3" || st.Slots[1].JobID != "j2" {
		t.Fatalf("status %+v", st)
	}
}

func TestSlotMaintenanceAndLoweredLimit(t *testing.T) {
	t.Parallel()
	s, _, _ := slotTestSlots(t)
	ctx := t.Context()
	const g = "Export"
	var held []Lease
	for i := range 4 {
		held = append(held, slotMustAcquire(t, s, g, 4, "j"+string(rune('a'+i)), time.Minute))
	}
	if err := s.SetLimit(ctx, g, 2, "db maintenance"); err != nil {
		t.Fatal(err)
	}
	st, err := s.Status(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if st.Limit != 2 || !st.Override || st.OverrideReason != "db maintenance" || st.Active != 4 || st.OverLimit != 2 ||
		st.Slots[1].OverLimit || !st.Slots[2].OverLimit || !st.Slots[3].OverLimit {
		t.Fatalf("status after lowering: %+v", st)
	}
	slotMustBeBusy(t, s, g, 4, "new1")
	// A freed slot at or above the new limit is not handed out.
	if err := s.Release(ctx, held[3]); err != nil {
		t.Fatal(err)
	}
	slotMustBeBusy(t, s, g, 4, "new1")
	// A freed slot below it is.
	if err := s.Release(ctx, held[0]); err != nil {
		t.Fatal(err)
	}
	if l := slotMustAcquire(t, s, g, 4, "new1", time.Minute); l.Slot != 0 || l.Limit != 2 {
		t.Fatalf("lease %+v, want slot 0 under limit 2", l)
	}
	// Limit 0 is the maintenance switch: nothing is handed out.
	if err := s.SetLimit(ctx, g, 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, held[1]); err != nil {
		t.Fatal(err)
	}
	slotMustBeBusy(t, s, g, 4, "new2")
	had, err := s.ClearLimit(ctx, g)
	if err != nil || !had {
		t.Fatalf("clear: %v %v", had, err)
	}
	if l := slotMustAcquire(t, s, g, 4, "new2", time.Minute); l.Slot != 1 || l.Limit != 4 {
		t.Fatalf("lease %+v, want slot 1 under limit 4", l)
	}
	if had, err := s.ClearLimit(ctx, g); err != nil || had {
		t.Fatalf("second clear: %v %v", had, err)
	}
}

func TestSlotFencingAfterExpiry(t *testing.T) {
	t.Parallel()
	s, pool, _ := slotTestSlots(t)
	ctx := t.Context()
	const g = "Report::limit-1"
	stale := slotMustAcquire(t, s, g, 1, "old", 20*time.Millisecond)
	slotAwaitExpired(t, pool, stale)
	fresh := slotMustAcquire(t, s, g, 1, "new", time.Minute)
	if fresh.Slot != stale.Slot || fresh.Token <= stale.Token {
		t.Fatalf("fresh %+v after stale %+v", fresh, stale)
	}
	if _, err := s.Extend(ctx, stale, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("stale extend: %v, want ErrLeaseLost", err)
	}
	if err := s.Release(ctx, stale); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("stale release: %v, want ErrLeaseLost", err)
	}
	st, err := s.Status(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if st.Active != 1 || st.Slots[0].JobID != "new" || st.Slots[0].Token != fresh.Token || !st.Slots[0].ExpiresAt.Equal(fresh.ExpiresAt) {
		t.Fatalf("status after stale calls: %+v", st)
	}
	// A swept lease is lost too, and its token is never handed out again.
	gone := slotMustAcquire(t, s, "Sweep", 1, "x", 20*time.Millisecond)
	slotAwaitExpired(t, pool, gone)
	n, err := s.CleanupExpired(ctx)
	if err != nil || n != 1 {
		t.Fatalf("cleanup: %d %v, want 1 row", n, err)
	}
	if err := s.Release(ctx, gone); !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "no such slot") {
		t.Fatalf("release after sweep: %v", err)
	}
	again := slotMustAcquire(t, s, "Sweep", 1, "y", time.Minute)
	if again.Token <= gone.Token {
		t.Fatalf("token %d reissued after sweep (old %d)", again.Token, gone.Token)
	}
	if _, err := s.Extend(ctx, gone, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("extend of swept lease: %v", err)
	}
}

func TestSlotForceRelease(t *testing.T) {
	t.Parallel()
	s, _, _ := slotTestSlots(t)
	ctx := t.Context()
	held := slotMustAcquire(t, s, "Stuck", 1, "j1", time.Hour)
	freed, err := s.ForceRelease(ctx, "Stuck", 0)
	if err != nil {
		t.Fatal(err)
	}
	if freed.JobID != "j1" || freed.Token != held.Token {
		t.Fatalf("freed %+v, want j1's lease", freed)
	}
	next := slotMustAcquire(t, s, "Stuck", 1, "j2", time.Hour)
	if err := s.Release(ctx, held); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("old holder's release after force: %v, want ErrLeaseLost", err)
	}
	if err := s.Release(ctx, next); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForceRelease(ctx, "Stuck", 7); !errors.Is(err, ErrSlotArgument) || !strings.Contains(err.Error(), `group "Stuck" has no slot 7`) {
		t.Fatalf("force release of unknown slot: %v", err)
	}
}

func TestSlotBadInput(t *testing.T) {
	t.Parallel()
	s, pool, _ := slotTestSlots(t)
	ctx := t.Context()
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"negative limit", func() error {
			_, _, err := s.Acquire(ctx, "G", -1, "j", "w", time.Minute)
			return err
		}, `group "G" has limit -1; a limit is 0 (run nothing) or more`},
		{"empty group", func() error {
			_, _, err := s.Acquire(ctx, "", 1, "j", "w", time.Minute)
			return err
		}, "the group name is empty"},
		{"NUL in group", func() error {
			_, _, err := s.Acquire(ctx, "G\x00", 1, "j", "w", time.Minute)
			return err
		}, "contains a NUL byte"},
		{"zero lease", func() error {
			_, _, err := s.Acquire(ctx, "G", 1, "j", "w", 0)
			return err
		}, "lease duration 0s; a lease must be positive"},
		{"negative lease", func() error {
			_, _, err := s.Acquire(ctx, "G", 1, "j", "w", -time.Second)
			return err
		}, "lease duration -1s"},
		{"extend by zero", func() error {
			_, err := s.Extend(ctx, Lease{Group: "G", Token: 1}, 0)
			return err
		}, "a lease must be positive"},
		{"release of zero lease", func() error {
			return s.Release(ctx, Lease{})
		}, "the group name is empty"},
		{"negative override", func() error {
			return s.SetLimit(ctx, "G", -3, "")
		}, `group "G" has limit -3`},
		{"override of empty group", func() error {
			return s.SetLimit(ctx, "", 3, "")
		}, "the group name is empty"},
	}
	for _, tt := range tests {
		err := tt.call()
		if !errors.Is(err, ErrSlotArgument) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want ErrSlotArgument containing %q", tt.name, err, tt.want)
		}
	}
	// Releasing a slot that was never acquired is a lost lease, named.
	err := s.Release(ctx, Lease{Group: "G", Slot: 3, Token: 99})
	if !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), `slot 3 of group "G" with token 99: the group has no such slot`) {
		t.Errorf("release of unknown slot: %v", err)
	}
	// Nothing was written by any of them.
	var n int
	if err := pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM concurrency_slots) + (SELECT count(*) FROM concurrency_limits)").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d rows written by bad calls", n)
	}
	if _, err := NewSlots(nil, slotTestLayout, SlotsOptions{}); !errors.Is(err, ErrSlotArgument) {
		t.Errorf("NewSlots(nil): %v", err)
	}
}
