package migrations_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// Drift after up (a counting index dropped or invalid, the unique rule back
// on the key, a runtime table gone) is reported by status and plan, and up
// repairs it to exactly what one clean run leaves.
func TestDriftIsReportedAndRepaired(t *testing.T) {
	ctx := context.Background()
	s := legacy.TeamQueue
	ref := legacyDB(t, s)
	if _, err := migrations.Up(ctx, ref, s.Layout, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	want := takeSnapshot(t, ref, s.Layout)
	cases := []struct {
		name, sql, drift string
	}{
		{"counting index dropped", `DROP INDEX "Billing Queue"."JobRequests_concurrency_key_idx"`, `counting index "JobRequests_concurrency_key_idx" on "Billing Queue"."JobRequests" is missing`},
		{"counting index invalid", `UPDATE pg_index SET indisvalid = false WHERE indexrelid = '"Billing Queue"."job_processes_concurrency_key_idx"'::regclass`, `counting index "job_processes_concurrency_key_idx" on "Billing Queue"."job_processes" is INVALID`},
		{"unique rule back", `CREATE UNIQUE INDEX "JobRequests_Kind_UniqueKey_uniq" ON "Billing Queue"."JobRequests" (kind, concurrency_key)`, `unique index "JobRequests_Kind_UniqueKey_uniq" on "Billing Queue"."JobRequests" covers the key again`},
		{"runtime table dropped", `DROP TABLE "Billing Queue".concurrency_slots`, `runtime table "Billing Queue"."concurrency_slots" is missing`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := legacyDB(t, s)
			if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); err != nil {
				t.Fatal(err)
			}
			if _, err := testdb.Connect(t, url).Exec(ctx, c.sql); err != nil {
				t.Fatal(err)
			}
			st, err := migrations.Status(ctx, url, s.Layout)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != migrations.Migrated || len(st.Drift) != 1 || !strings.Contains(st.Drift[0], c.drift) || !strings.Contains(st.Next, "run up to repair") {
				t.Fatalf("status: %s, drift %q, next %q; want migrated with %q", st.State, st.Drift, st.Next, c.drift)
			}
			p, err := migrations.Plan(ctx, url, s.Layout)
			if err != nil {
				t.Fatal(err)
			}
			noted, work := false, 0
			for _, f := range p.Findings {
				noted = noted || strings.Contains(f.Message, c.drift) && strings.Contains(f.Message, "up repairs it")
			}
			for _, st := range p.Steps {
				if st.Skip == "" {
					work++
				}
			}
			if !noted || work == 0 {
				t.Fatalf("plan does not show the drift and its repair: findings %v, %d steps with work", p.Findings, work)
			}
			rep, err := migrations.Up(ctx, url, s.Layout, migrations.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Before != migrations.Migrated || rep.After != migrations.Migrated {
				t.Fatalf("up repaired %s -> %s", rep.Before, rep.After)
			}
			if d := want.diff(takeSnapshot(t, url, s.Layout)); d != "" {
				t.Fatalf("after the repair the database differs from one clean run:\n%s", d)
			}
			if st, err = migrations.Status(ctx, url, s.Layout); err != nil || len(st.Drift) != 0 {
				t.Fatalf("status after the repair: %v, %v", st.Drift, err)
			}
			// And down from the repaired state restores the legacy schema.
			if _, err := migrations.Down(ctx, url, s.Layout, migrations.Options{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A version table written by an older version of the tool (no step
// columns) is read, and a run adds the columns before it records its
// first intent.
func TestVersionTableWithoutStepColumns(t *testing.T) {
	ctx := context.Background()
	s := legacy.TeamQueue
	url := legacyDB(t, s)
	want := takeSnapshot(t, url, s.Layout)
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := testdb.Connect(t, url).Exec(ctx, `ALTER TABLE "Billing Queue".migrate_unique_version DROP COLUMN step, DROP COLUMN step_started_at`); err != nil {
		t.Fatal(err)
	}
	if st, err := migrations.Status(ctx, url, s.Layout); err != nil || st.State != migrations.Migrated {
		t.Fatalf("status: %+v, %v", st, err)
	}
	if _, err := migrations.Down(ctx, url, s.Layout, migrations.Options{StopAfterStep: 1}); !errors.Is(err, migrations.ErrStopped) {
		t.Fatalf("down stopped after its first step: %v", err)
	}
	st, err := migrations.Status(ctx, url, s.Layout)
	if err != nil || st.Direction != "down" || !strings.Contains(st.Stopped, "down 1/") {
		t.Fatalf("status after a stopped down: %+v, %v", st, err)
	}
	if _, err := migrations.Down(ctx, url, s.Layout, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	if d := want.diff(takeSnapshot(t, url, s.Layout)); d != "" {
		t.Fatalf("down did not restore the legacy schema:\n%s", d)
	}
}

// Ctrl-C during down's rebuild of the unique rule cancels the build; the
// INVALID unique index it leaves (which would reject duplicates of new
// rows) is dropped at once, waiting at most the lock timeout; status still
// says the down stopped there, and a re-run finishes it.
func TestCancelledUniqueRebuildIsDropped(t *testing.T) {
	ctx := context.Background()
	s := legacy.TeamQueue
	url := legacyDB(t, s)
	want := takeSnapshot(t, url, s.Layout)
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	conn := testdb.Connect(t, url)
	holder, err := testdb.Connect(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx) //nolint:errcheck
	if _, err := holder.Exec(ctx, `UPDATE "Billing Queue"."JobRequests" SET priority = priority WHERE false`); err != nil {
		t.Fatal(err)
	}
	waitFor := func(query string) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; {
			var n int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`, query).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no session waits in %q", query)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := migrations.Down(runCtx, url, s.Layout, migrations.Options{LockTimeout: time.Minute})
		done <- err
	}()
	waitFor("CREATE UNIQUE INDEX CONCURRENTLY%")
	cancel()
	waitFor("DROP INDEX CONCURRENTLY%") // the cleanup waits for the holder too
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled down: %v", err)
	}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('"Billing Queue"."JobRequests_Kind_UniqueKey_uniq"') IS NOT NULL`).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatal("the cancelled rebuild's INVALID unique index is still there")
	}
	st, err := migrations.Status(ctx, url, s.Layout)
	if err != nil || st.Direction != "down" || len(st.InvalidIndexes) != 0 {
		t.Fatalf("status after the cancelled down: %+v, %v", st, err)
	}
	if _, err := migrations.Down(ctx, url, s.Layout, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	if d := want.diff(takeSnapshot(t, url, s.Layout)); d != "" {
		t.Fatalf("down did not restore the legacy schema:\n%s", d)
	}
}
