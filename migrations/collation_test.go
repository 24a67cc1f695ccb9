package migrations_test

import (
	"context"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// TestPrefixIndexFollowsTheKeyCollation: in an ICU database the key column
// does not sort bytewise, so plan, sql --database and up build the prefix
// index (class, key COLLATE "C") that no-overlap counts need, and say why;
// status reports it missing as drift; down drops it. In a C database there
// is no such step (the counting index serves no-overlap counts), so its
// step numbers are plain-jobs' own.
func TestPrefixIndexFollowsTheKeyCollation(t *testing.T) {
	ctx := context.Background()
	l := legacy.PlainJobs.Layout
	for _, tc := range []struct {
		name  string
		opts  []testdb.Option
		build bool
	}{
		{"ICU-database", []testdb.Option{testdb.ICU("en-US")}, true},
		{"C", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := testdb.New(t, tc.opts...)
			if err := legacy.PlainJobs.LoadURL(ctx, url, 50); err != nil {
				t.Fatal(err)
			}
			plan, err := migrations.Plan(ctx, url, l)
			if err != nil {
				t.Fatal(err)
			}
			var prefix []migrations.PlannedStep
			for _, s := range plan.Steps {
				if strings.HasPrefix(s.Name, "prefix index on") {
					prefix = append(prefix, s)
				}
			}
			if want := map[bool]int{true: 2, false: 0}[tc.build]; len(prefix) != want {
				t.Fatalf("%d prefix index steps, want %d: %+v", len(prefix), want, plan.Steps)
			}
			for _, s := range prefix {
				if tc.build && (s.Skip != "" || !strings.Contains(s.SQL, `COLLATE "C"`) || !strings.Contains(s.Name, "not bytewise")) {
					t.Errorf("ICU: step %q skip %q sql %q; want the build, and why", s.Name, s.Skip, s.SQL)
				}
			}
			files, err := migrations.FilesFor(ctx, url, l)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for name := range files {
				if strings.Contains(name, "concurrency_key_c_idx") && strings.HasSuffix(name, ".up.sql") && strings.Contains(name, "create_") {
					n++
				}
			}
			if want := map[bool]int{true: 2, false: 0}[tc.build]; n != want {
				t.Errorf("sql --database wrote %d prefix index files, want %d", n, want)
			}
			if _, err := migrations.Up(ctx, url, l, migrations.Options{}); err != nil {
				t.Fatal(err)
			}
			conn := testdb.Connect(t, url)
			count := func() int {
				var n int
				if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE indexname LIKE '%concurrency_key_c_idx' AND indexdef LIKE '%COLLATE "C"%'`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			if want := map[bool]int{true: 2, false: 0}[tc.build]; count() != want {
				t.Fatalf("%d prefix indexes after up, want %d", count(), want)
			}
			if !tc.build {
				return
			}
			if _, err := conn.Exec(ctx, `DROP INDEX plainjobs_jobprocess_concurrency_key_c_idx`); err != nil {
				t.Fatal(err)
			}
			st, err := migrations.Status(ctx, url, l)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Drift) != 1 || !strings.Contains(st.Drift[0], "prefix index") {
				t.Fatalf("drift %q, want the missing prefix index", st.Drift)
			}
			if _, err := migrations.Up(ctx, url, l, migrations.Options{}); err != nil {
				t.Fatal(err)
			}
			if count() != 2 {
				t.Fatalf("%d prefix indexes after the repair, want 2", count())
			}
			if _, err := migrations.Down(ctx, url, l, migrations.Options{}); err != nil {
				t.Fatal(err)
			}
			if count() != 0 {
				t.Fatalf("%d prefix indexes after down, want 0", count())
			}
		})
	}
}
