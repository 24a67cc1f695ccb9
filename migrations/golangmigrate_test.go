package migrations_test

import (
	"context"
	"strings"
	"testing"

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
