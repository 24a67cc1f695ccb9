package migrations_test

import (
	"context"
	"strings"
	"testing"

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
