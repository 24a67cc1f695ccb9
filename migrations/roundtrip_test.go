package migrations_test

import (
	"context"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// Up then down restores the original schema exactly and every row; up twice
// and down twice change nothing the second time.
func TestRoundTripRestoresEveryLegacyLayout(t *testing.T) {
	ctx := context.Background()
	for _, s := range legacy.All {
		t.Run(s.Name, func(t *testing.T) {
			url := legacyDB(t, s)
			before := takeSnapshot(t, url, s.Layout)
			if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); err != nil {
				t.Fatalf("up: %v", err)
			}
			migrated := takeSnapshot(t, url, s.Layout)
			rep, err := migrations.Up(ctx, url, s.Layout, migrations.Options{})
			if err != nil {
				t.Fatalf("second up: %v", err)
			}
			if rep.Before != migrations.Migrated || len(rep.Steps) != 0 {
				t.Fatalf("second up: before %s, %d steps; want migrated, no step", rep.Before, len(rep.Steps))
			}
			if d := migrated.diff(takeSnapshot(t, url, s.Layout)); d != "" {
				t.Fatalf("second up changed the database:\n%s", d)
			}
			var out strings.Builder
			rep, err = migrations.Down(ctx, url, s.Layout, migrations.Options{Out: &out})
			if err != nil {
				t.Fatalf("down: %v\n%s", err, out.String())
			}
			if rep.After != migrations.Legacy {
				t.Fatalf("down ended %s, want legacy\n%s", rep.After, out.String())
			}
			if d := before.diff(takeSnapshot(t, url, s.Layout)); d != "" {
				t.Fatalf("up then down did not restore the database:\n%s\n%s", d, out.String())
			}
			rep, err = migrations.Down(ctx, url, s.Layout, migrations.Options{})
			if err != nil || rep.Before != migrations.Legacy || len(rep.Steps) != 0 {
				t.Fatalf("second down: %v, %+v", err, rep)
			}
			if d := before.diff(takeSnapshot(t, url, s.Layout)); d != "" {
				t.Fatalf("second down changed the database:\n%s", d)
			}
		})
	}
}
