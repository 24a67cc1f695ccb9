package scratch

import (
	"os"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }

// TestNewMigratesTheRealTablesAndDropRemovesThem: a scratch queue is
// plain-jobs' real tables, migrated, in its own schema and nowhere else;
// Drop leaves nothing behind.
func TestNewMigratesTheRealTablesAndDropRemovesThem(t *testing.T) {
	ctx := t.Context()
	url := testdb.New(t)
	q, err := New(ctx, url, "bench scratch", legacy.PlainJobs)
	if err != nil {
		t.Fatal(err)
	}
	if q.Layout.Schema != "bench scratch" || q.Layout.RequestsTable != legacy.PlainJobs.Layout.RequestsTable {
		t.Fatalf("layout %+v", q.Layout)
	}
	st, err := migrations.Status(ctx, url, q.Layout.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != migrations.Migrated {
		t.Fatalf("state %s, want %s", st.State, migrations.Migrated)
	}
	conn := testdb.Connect(t, url)
	var inSchema, elsewhere int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE table_schema = 'bench scratch'), count(*) FILTER (WHERE table_schema <> 'bench scratch')
FROM information_schema.columns WHERE table_name = 'plainjobs_jobrequest' AND column_name = 'concurrency_key'`).Scan(&inSchema, &elsewhere); err != nil {
		t.Fatal(err)
	}
	if inSchema != 1 || elsewhere != 0 {
		t.Fatalf("concurrency_key on the requests table: %d in the scratch schema, %d elsewhere", inSchema, elsewhere)
	}
	if err := q.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = 'bench scratch'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatal("the scratch schema is still there after Drop")
	}
}
