package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// Plan reads only: the database is identical afterwards.
func TestPlanChangesNothing(t *testing.T) {
	for _, s := range legacy.All {
		t.Run(s.Name, func(t *testing.T) {
			url := legacyDB(t, s)
			before := takeSnapshot(t, url, s.Layout)
			p, err := migrations.Plan(context.Background(), url, s.Layout)
			if err != nil {
				t.Fatal(err)
			}
			if p.State != migrations.Legacy || len(p.Steps) < 5 {
				t.Fatalf("plan: state %s, %d steps", p.State, len(p.Steps))
			}
			for _, st := range p.Steps {
				if st.SQL == "" || st.Lock == "" || st.Table == "" {
					t.Errorf("step %d %q lacks its SQL, lock or table: %+v", st.Number, st.Name, st)
				}
			}
			if d := before.diff(takeSnapshot(t, url, s.Layout)); d != "" {
				t.Fatalf("plan changed the database:\n%s", d)
			}
		})
	}
}

// Killed between any two steps (the StopAfterStep hook), a re-run ends
// migrated, exactly as one uninterrupted run, with no invalid index.
func TestUpResumesAfterAKillBetweenAnyTwoSteps(t *testing.T) {
	ctx := context.Background()
	for _, s := range legacy.All {
		t.Run(s.Name, func(t *testing.T) {
			ref := legacyDB(t, s)
			p, err := migrations.Plan(ctx, ref, s.Layout)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := migrations.Up(ctx, ref, s.Layout, migrations.Options{}); err != nil {
				t.Fatal(err)
			}
			want := takeSnapshot(t, ref, s.Layout)
			for k := 1; k < len(p.Steps); k++ {
				t.Run(fmt.Sprintf("after step %d", k), func(t *testing.T) {
					url := legacyDB(t, s)
					_, err := migrations.Up(ctx, url, s.Layout, migrations.Options{StopAfterStep: k})
					if !errors.Is(err, migrations.ErrStopped) {
						t.Fatalf("up stopped after step %d: %v, want ErrStopped", k, err)
					}
					st, err := migrations.Status(ctx, url, s.Layout)
					if err != nil {
						t.Fatal(err)
					}
					if st.State != migrations.PartlyMigrated {
						t.Fatalf("status after a kill: %s, want partly migrated", st.State)
					}
					rep, err := migrations.Up(ctx, url, s.Layout, migrations.Options{})
					if err != nil {
						t.Fatalf("re-run: %v", err)
					}
					if rep.After != migrations.Migrated {
						t.Fatalf("re-run ended %s", rep.After)
					}
					if d := want.diff(takeSnapshot(t, url, s.Layout)); d != "" {
						t.Fatalf("re-run after a kill differs from one clean run:\n%s", d)
					}
				})
			}
		})
	}
}

// A build killed half-way leaves an INVALID index of ours; up drops it and
// builds it again, and status reports it meanwhile.
func TestUpRebuildsAnInvalidLeftoverIndex(t *testing.T) {
	ctx := context.Background()
	s := legacy.TeamQueue
	url := legacyDB(t, s)
	conn := testdb.Connect(t, url)
	// A unique build over duplicate kinds fails and leaves its index INVALID,
	// exactly as a build interrupted by a kill does.
	_, err := conn.Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY "JobRequests_concurrency_key_idx" ON "Billing Queue"."JobRequests" (kind)`)
	if err == nil {
		t.Fatal("the unique build over duplicate kinds succeeded")
	}
	st, err := migrations.Status(ctx, url, s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.InvalidIndexes) != 1 || st.State != migrations.PartlyMigrated {
		t.Fatalf("status: %s, invalid %v; want partly migrated with one invalid index", st.State, st.InvalidIndexes)
	}
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	var def string
	var valid bool
	if err := conn.QueryRow(ctx, `SELECT pg_get_indexdef(x.indexrelid), x.indisvalid FROM pg_index x WHERE x.indexrelid = '"Billing Queue"."JobRequests_concurrency_key_idx"'::regclass`).Scan(&def, &valid); err != nil {
		t.Fatal(err)
	}
	if !valid || def != `CREATE INDEX "JobRequests_concurrency_key_idx" ON "Billing Queue"."JobRequests" USING btree (kind, concurrency_key)` {
		t.Fatalf("after up: valid=%v %s", valid, def)
	}
	if st, err = migrations.Status(ctx, url, s.Layout); err != nil || len(st.InvalidIndexes) != 0 || st.State != migrations.Migrated {
		t.Fatalf("status after up: %+v, %v", st, err)
	}
}

// Down, killed between any two of its steps, finishes when run again and
// restores the original schema exactly.
func TestDownResumesAfterAKillBetweenAnyTwoSteps(t *testing.T) {
	ctx := context.Background()
	for _, s := range legacy.All {
		t.Run(s.Name, func(t *testing.T) {
			for k := 1; ; k++ {
				url := legacyDB(t, s)
				want := takeSnapshot(t, url, s.Layout)
				if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); err != nil {
					t.Fatal(err)
				}
				rep, err := migrations.Down(ctx, url, s.Layout, migrations.Options{StopAfterStep: k})
				if err == nil {
					if k < 3 {
						t.Fatalf("down has only %d steps", len(rep.Steps))
					}
					break // k is past the last step
				}
				if !errors.Is(err, migrations.ErrStopped) {
					t.Fatalf("down stopped after step %d: %v", k, err)
				}
				if rep, err = migrations.Down(ctx, url, s.Layout, migrations.Options{}); err != nil {
					t.Fatalf("re-run after step %d: %v", k, err)
				}
				if rep.After != migrations.Legacy {
					t.Fatalf("re-run after step %d ended %s", k, rep.After)
				}
				if d := want.diff(takeSnapshot(t, url, s.Layout)); d != "" {
					t.Fatalf("down killed after step %d then re-run did not restore the database:\n%s", k, d)
				}
			}
		})
	}
}
