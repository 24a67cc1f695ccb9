package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
)

// TestAHostileNeighbourNeverRunsThroughAPooler: through PgBouncer in
// transaction mode, which refuses the search_path startup parameter the
// tool pins (1.18; later versions unless search_path is in
// track_extra_parameters), the read-only commands (status, plan, plan
// --expand, sql --database) and the concurrency commands run in the legacy,
// expanded and migrated states (the concurrency commands refuse such a
// session) on a database where another role planted
// shadowing functions and operators in public, with the default search path
// and with one that puts public before pg_catalog. No shadow ever runs and
// every command gives its usual exit code.
func TestAHostileNeighbourNeverRunsThroughAPooler(t *testing.T) {
	for _, searchPath := range []string{"", "public, pg_catalog"} {
		name := "default"
		if searchPath != "" {
			name = "public first"
		}
		t.Run(name, func(t *testing.T) {
			db := plainJobsDB(t)
			shadows := testdb.PlantShadows(t, db)
			admin := testdb.Connect(t, db)
			ctx := t.Context()
			if searchPath != "" {
				var dbname string
				if err := admin.QueryRow(ctx, "SELECT pg_catalog.current_database()").Scan(&dbname); err != nil {
					t.Fatal(err)
				}
				if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{dbname}.Sanitize()+" SET search_path = "+searchPath); err != nil {
					t.Fatal(err)
				}
			}
			pooled := testdb.PgBouncer(t, db)
			cli := func(url string, code int, args ...string) string {
				t.Helper()
				got, out, errOut := runCLI(t, append(args, "--database", url)...)
				if got != code {
					t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, out, errOut)
				}
				shadows.Check(t, strings.Join(args, " ")+" through the pooler")
				return out
			}
			readOnly := func(state string) {
				t.Helper()
				out := cli(pooled, 0, "status")
				if !strings.Contains(out, "state:    "+state) || !strings.Contains(out, "pooler:") {
					t.Fatalf("status through the pooler: want state %s and a pooler line:\n%s", state, out)
				}
				cli(pooled, 0, "status", "--json")
				// plan lists the pooler as a finding (up would refuse it).
				if out := cli(pooled, 1, "plan"); !strings.Contains(out, "pooler") {
					t.Fatalf("plan through the pooler names no pooler:\n%s", out)
				}
				cli(pooled, 1, "plan", "--down")
				dir := filepath.Join(t.TempDir(), state)
				cli(pooled, 0, "sql", "--dir", dir)
				if files, err := os.ReadDir(dir); err != nil || len(files) == 0 {
					t.Fatalf("sql --database through the pooler wrote no file: %v", err)
				}
			}
			readOnly("legacy")
			cli(pooled, 1, "plan", "--expand")
			cli(db, 0, "up", "--expand")
			shadows.Hits(t) // the direct runs are another test's subject
			readOnly("expanded")
			cli(db, 0, "up")
			shadows.Hits(t)
			readOnly("migrated")
			// The concurrency commands refuse the unpinned session.
			cli(pooled, 1, "concurrency", "set", "app.Mail::acct-7", "--limit", "2", "--reason", "quota", "--force")
			cli(pooled, 1, "concurrency", "status")
		})
	}
}
