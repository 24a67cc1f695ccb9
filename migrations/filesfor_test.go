package migrations_test

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// golangMigrate returns a golang-migrate instance that applies files to the
// database at dbURL.
func golangMigrate(t *testing.T, dbURL string, files map[string]string) *migrate.Migrate {
	t.Helper()
	mfs := fstest.MapFS{}
	for name, sql := range files {
		mfs[name] = &fstest.MapFile{Data: []byte(sql)}
	}
	src, err := iofs.New(fs.FS(mfs), ".")
	if err != nil {
		t.Fatal(err)
	}
	return golangMigrateSource(t, dbURL, src)
}

// golangMigrateSource returns a golang-migrate instance that applies src to
// the database at dbURL through the pgx v5 driver, with its own version
// table (migrate_unique_golang_migrate).
func golangMigrateSource(t *testing.T, dbURL string, src source.Driver) *migrate.Migrate {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Scheme = "pgx5"
	q := u.Query()
	q.Set("x-migrations-table", "migrate_unique_golang_migrate")
	u.RawQuery = q.Encode()
	m, err := migrate.NewWithSourceInstance("iofs", src, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// downRestores runs golang-migrate's down, drops its version table (the
// only thing it leaves behind) and checks that the database is exactly as
// before.
func downRestores(t *testing.T, m *migrate.Migrate, dbURL string, l layout.Layout, before snapshot) {
	t.Helper()
	if err := m.Down(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		t.Fatalf("golang-migrate down: %v", err)
	}
	m.Close()
	if _, err := testdb.Connect(t, dbURL).Exec(context.Background(), "DROP TABLE migrate_unique_golang_migrate"); err != nil {
		t.Fatal(err)
	}
	if d := before.diff(takeSnapshot(t, dbURL, l)); d != "" {
		t.Fatalf("golang-migrate up then down did not restore the database:\n%s", d)
	}
}

// Every layout's files, written with or without the database, apply with
// golang-migrate up and down and restore the database exactly. With the
// database, the down files rebuild every unique rule CONCURRENTLY, one
// file each, and they are the same whether written before the migration
// (from the catalog) or after it (from what the cutover saved).
func TestFilesApplyWithGolangMigrateForEveryLayout(t *testing.T) {
	for _, s := range legacy.All {
		for _, fromDB := range []bool{false, true} {
			name := s.Name + "/without the database"
			if fromDB {
				name = s.Name + "/from the database"
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				dbURL := legacyDB(t, s)
				before := takeSnapshot(t, dbURL, s.Layout)
				files, err := migrations.Files(s.Layout)
				if fromDB {
					files, err = migrations.FilesFor(ctx, dbURL, s.Layout)
				}
				if err != nil {
					t.Fatal(err)
				}
				var rebuilds int
				for name, sql := range files {
					if strings.Contains(name, "_unique_rule") && strings.HasSuffix(name, ".down.sql") && strings.Contains(sql, "CREATE UNIQUE INDEX CONCURRENTLY") {
						rebuilds++
					}
				}
				if fromDB && rebuilds == 0 {
					t.Fatalf("no down file rebuilds a unique rule CONCURRENTLY:\n%v", files)
				}
				m := golangMigrate(t, dbURL, files)
				if err := m.Up(); err != nil {
					t.Fatalf("golang-migrate up: %v", err)
				}
				st, err := migrations.Status(ctx, dbURL, s.Layout)
				if err != nil {
					t.Fatal(err)
				}
				if st.State != migrations.Migrated || len(st.Saved) == 0 {
					t.Fatalf("after golang-migrate up: state %s, %d saved rules", st.State, len(st.Saved))
				}
				if fromDB {
					if len(st.Saved) != rebuilds {
						t.Fatalf("the cutover saved %d rules, the files rebuild %d", len(st.Saved), rebuilds)
					}
					after, err := migrations.FilesFor(ctx, dbURL, s.Layout)
					if err != nil {
						t.Fatal(err)
					}
					for name, sql := range files {
						if strings.Contains(name, "_unique_rule") && stripComments(after[name]) != stripComments(sql) {
							t.Errorf("%s written before the migration:\n%s\nafter it:\n%s", name, sql, after[name])
						}
					}
				}
				downRestores(t, m, dbURL, s.Layout, before)
			})
		}
	}
}

// Two unique rules on the key (one with a predicate that names the key):
// two down files, one per rule, the same before and after the migration,
// and golang-migrate's round trip restores both.
func TestFilesForRebuildsEachRuleInItsOwnFile(t *testing.T) {
	ctx := context.Background()
	s := legacy.TeamQueue
	dbURL := legacyDB(t, s)
	l := s.Resolved
	if _, err := testdb.Connect(t, dbURL).Exec(ctx, "CREATE UNIQUE INDEX a_second_rule ON "+l.Table(l.ProcessesTable)+
		" (unique_key) WHERE unique_key <> 'unique_key'"); err != nil {
		t.Fatal(err)
	}
	before := takeSnapshot(t, dbURL, s.Layout)
	files, err := migrations.FilesFor(ctx, dbURL, s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for name := range files {
		if strings.Contains(name, "_unique_rule_") && strings.HasSuffix(name, ".down.sql") {
			rules = append(rules, name)
		}
	}
	if len(rules) != 2 {
		t.Fatalf("rebuild files %v, want one per rule (2)", rules)
	}
	m := golangMigrate(t, dbURL, files)
	if err := m.Up(); err != nil {
		t.Fatalf("golang-migrate up: %v", err)
	}
	after, err := migrations.FilesFor(ctx, dbURL, s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range rules {
		if stripComments(after[name]) != stripComments(files[name]) {
			t.Errorf("%s written before the migration:\n%s\nafter it:\n%s", name, files[name], after[name])
		}
	}
	downRestores(t, m, dbURL, s.Layout, before)
}

// Files written before a unique rule on the key was added: the cutover
// saves the new rule too, and the cutover back refuses to finish without
// it, naming it, rather than lose it; the layout stays migrated.
func TestCutoverBackRefusesAnUnrebuiltRule(t *testing.T) {
	ctx := context.Background()
	s := legacy.TeamQueue
	dbURL := legacyDB(t, s)
	files, err := migrations.FilesFor(ctx, dbURL, s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	l := s.Resolved
	conn := testdb.Connect(t, dbURL)
	if _, err := conn.Exec(ctx, "CREATE UNIQUE INDEX late_rule ON "+l.Table(l.ProcessesTable)+" (unique_key)"); err != nil {
		t.Fatal(err)
	}
	m := golangMigrate(t, dbURL, files)
	if err := m.Up(); err != nil {
		t.Fatalf("golang-migrate up: %v", err)
	}
	err = m.Down()
	if err == nil || !strings.Contains(err.Error(), "late_rule") || !strings.Contains(err.Error(), "has not been rebuilt") {
		t.Fatalf("golang-migrate down: %v; want the cutover back to refuse, naming late_rule", err)
	}
	st, err := migrations.Status(ctx, dbURL, s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != migrations.Migrated {
		t.Fatalf("after the refused cutover back: state %s, want migrated", st.State)
	}
	var saved []string
	for _, r := range st.Saved {
		saved = append(saved, r.Index)
	}
	if !strings.Contains(strings.Join(saved, ","), "late_rule") {
		t.Fatalf("saved rules %v lost late_rule", saved)
	}
}
