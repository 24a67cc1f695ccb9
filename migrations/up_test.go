package migrations_test

import (
	"context"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestUpMigratesEveryLegacyLayout(t *testing.T) {
	for _, s := range legacy.All {
		t.Run(s.Name, func(t *testing.T) {
			url := legacyDB(t, s)
			before := takeSnapshot(t, url, s.Layout)
			var out strings.Builder
			rep, err := migrations.Up(context.Background(), url, s.Layout, migrations.Options{Out: &out})
			if err != nil {
				t.Fatalf("up: %v\n%s", err, out.String())
			}
			t.Log(out.String())
			if rep.Before != migrations.Legacy || rep.After != migrations.Migrated {
				t.Fatalf("states %s -> %s, want legacy -> migrated", rep.Before, rep.After)
			}
			if len(rep.Saved) != 1 {
				t.Fatalf("saved %d unique rules, want 1: %+v", len(rep.Saved), rep.Saved)
			}
			after := takeSnapshot(t, url, s.Layout)
			for tb, d := range before.digest {
				if after.digest[tb] != d {
					t.Errorf("rows of %s changed", tb)
				}
			}
			for _, c := range after.columns {
				if strings.Contains(c, layout.LegacyKeyColumn) {
					t.Errorf("column %s left after up", c)
				}
			}
		})
	}
}
