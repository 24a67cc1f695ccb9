package migrations_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// Teams that apply migrations with golang-migrate get the same result from
// the committed files: up migrates (Status agrees), down restores the
// original schema and rows exactly.
func TestPlainJobsFilesApplyWithGolangMigrate(t *testing.T) {
	dbURL := legacyDB(t, legacy.PlainJobs)
	before := takeSnapshot(t, dbURL, legacy.PlainJobs.Layout)
	src, err := migrations.PlainJobsSource()
	if err != nil {
		t.Fatal(err)
	}
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
	defer m.Close()
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
	if err := m.Down(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		t.Fatalf("golang-migrate down: %v", err)
	}
	// golang-migrate's own version table is the only thing left behind.
	m.Close()
	if _, err := testdb.Connect(t, dbURL).Exec(context.Background(), "DROP TABLE migrate_unique_golang_migrate"); err != nil {
		t.Fatal(err)
	}
	after := takeSnapshot(t, dbURL, legacy.PlainJobs.Layout)
	if d := before.diff(after); d != "" {
		t.Fatalf("golang-migrate up then down did not restore the database:\n%s", d)
	}
}
