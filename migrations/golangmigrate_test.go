package migrations_test

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// Teams that apply migrations with golang-migrate get the same result from
// the committed files: up migrates (Status agrees) into the schema
// plain-jobs' own 0007 leaves (as Up does), down restores the original
// schema and rows exactly.
func TestPlainJobsFilesApplyWithGolangMigrate(t *testing.T) {
	dbURL := legacyDB(t, legacy.PlainJobs)
	before := takeSnapshot(t, dbURL, legacy.PlainJobs.Layout)
	src, err := migrations.PlainJobsSource()
	if err != nil {
		t.Fatal(err)
	}
	m := golangMigrateSource(t, dbURL, src)
	if err := m.Up(); err != nil {
		t.Fatalf("golang-migrate up: %v", err)
	}
	st, err := migrations.Status(context.Background(), dbURL, legacy.PlainJobs.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != migrations.Migrated || len(st.Saved) != 1 {
		t.Fatalf("after golang-migrate up: state %s, %d saved rules; want migrated, 1", st.State, len(st.Saved))
	}
	if got := "CREATE UNIQUE INDEX CONCURRENTLY " + strings.TrimPrefix(st.Saved[0].Rebuild, "CREATE UNIQUE INDEX "); got != migrations.PlainJobsRebuildForTest {
		t.Fatalf("the files rebuild\n  %s\nbut the cutover saved\n  %s", migrations.PlainJobsRebuildForTest, got)
	}
	want, keyCollation, _ := plainJobs0007Reference(t)
	if diffs := diffFrom0007(t, want, readPlainShape(t, testdb.Connect(t, dbURL)), keyCollation); len(diffs) > 0 {
		t.Errorf("the golang-migrate files differ from plain-jobs 0007:\n%s", strings.Join(diffs, "\n"))
	}
	downRestores(t, m, dbURL, legacy.PlainJobs.Layout, before)
}

// The golang-migrate files run on the application's session, whose
// search_path the tool does not set: with another role's shadowing
// functions and operators in public and the session's search path public
// first, the files (each sent whole, as golang-migrate sends it) run none of
// them, up and down, and down restores the database exactly (every index
// definition included). golang-migrate's own statements are not the tool's
// (its version table's count(1) is ambiguous next to a count(bigint)), so
// the files are applied here as it applies them.
func TestPlainJobsFilesApplyUnderAHostileSearchPath(t *testing.T) {
	dbURL := legacyDB(t, legacy.PlainJobs)
	shadows := testdb.PlantShadows(t, dbURL)
	before := takeSnapshot(t, dbURL, legacy.PlainJobs.Layout)
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = "public, pg_catalog"
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	entries, err := fs.ReadDir(migrations.PlainJobsFiles, "plainjobs")
	if err != nil {
		t.Fatal(err)
	}
	var ups, downs []string
	for _, e := range entries {
		switch name := e.Name(); {
		case strings.HasSuffix(name, ".up.sql"):
			ups = append(ups, name)
		case strings.HasSuffix(name, ".down.sql"):
			downs = append([]string{name}, downs...)
		}
	}
	sort.Strings(ups)
	sort.Sort(sort.Reverse(sort.StringSlice(downs)))
	shadows.Hits(t)
	for _, names := range [][]string{ups, downs} {
		for _, name := range names {
			b, err := fs.ReadFile(migrations.PlainJobsFiles, "plainjobs/"+name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(t.Context(), string(b)); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			shadows.Check(t, name)
		}
	}
	if d := before.diff(takeSnapshot(t, dbURL, legacy.PlainJobs.Layout)); d != "" {
		t.Fatalf("the files up then down under a hostile search path did not restore the database:\n%s", d)
	}
}

// TestExpandFilesApplyInTwoPhases: the rolling deploy's golang-migrate
// files (sql --expand), on every legacy layout, written with and without
// --database: goto the expanded file's version leaves the layout expanded
// (status says so, with its version schema and no drift: the views, their
// grants and the enqueue lock are there); up completes it (migrated); goto the expanded version
// again is the reverse of complete (expanded, no drift); down restores the
// original database exactly.
func TestExpandFilesApplyInTwoPhases(t *testing.T) {
	ctx := context.Background()
	for _, s := range legacy.All {
		for _, withDB := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/database=%v", s.Name, withDB), func(t *testing.T) {
				dbURL := legacyDB(t, s)
				before := takeSnapshot(t, dbURL, s.Layout)
				files, err := migrations.ExpandFiles(s.Layout)
				if withDB {
					files, err = migrations.ExpandFilesFor(ctx, dbURL, s.Layout)
				}
				if err != nil {
					t.Fatal(err)
				}
				expanded := uint(0)
				for name := range files {
					if strings.HasSuffix(name, "_expanded.up.sql") {
						n, err := strconv.Atoi(name[:6])
						if err != nil {
							t.Fatal(err)
						}
						expanded = uint(n)
					}
				}
				if expanded == 0 {
					t.Fatalf("no expanded file among %d files", len(files))
				}
				m := golangMigrate(t, dbURL, files)
				isExpanded := func(when string) {
					t.Helper()
					st, err := migrations.Status(ctx, dbURL, s.Layout)
					if err != nil {
						t.Fatal(err)
					}
					if st.State != migrations.Expanded || st.VersionSchema != migrations.DefaultVersionSchema(s.Resolved.Schema) || len(st.Drift) > 0 {
						t.Fatalf("%s: state %s, version schema %q, drift %v; want expanded, %q, none", when, st.State, st.VersionSchema, st.Drift, migrations.DefaultVersionSchema(s.Resolved.Schema))
					}
				}
				if err := m.Migrate(expanded); err != nil {
					t.Fatalf("golang-migrate goto %d (expanded): %v", expanded, err)
				}
				isExpanded("after goto the expanded file")
				if err := m.Up(); err != nil {
					t.Fatalf("golang-migrate up (complete): %v", err)
				}
				if st, err := migrations.Status(ctx, dbURL, s.Layout); err != nil || st.State != migrations.Migrated || len(st.Drift) > 0 {
					t.Fatalf("after up: %v %+v; want migrated, no drift", err, st)
				}
				if err := m.Migrate(expanded); err != nil {
					t.Fatalf("golang-migrate goto %d from migrated: %v", expanded, err)
				}
				isExpanded("after goto the expanded file from migrated")
				downRestores(t, m, dbURL, s.Layout, before)
			})
		}
	}
}
