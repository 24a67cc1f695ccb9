package testdb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
)

// TestPgBouncerPoolsByTransaction checks that the pooler reaches the test's
// own database and shares server connections between clients transaction by
// transaction, which is what the pooler tests rely on.
func TestPgBouncerPoolsByTransaction(t *testing.T) {
	direct := testdb.New(t)
	ctx := t.Context()
	if _, err := testdb.Connect(t, direct).Exec(ctx, "CREATE TABLE marker (v text); INSERT INTO marker VALUES ('direct')"); err != nil {
		t.Fatal(err)
	}
	pooled := testdb.PgBouncer(t, direct)
	if strings.Contains(pooled, "5432") {
		t.Fatalf("PgBouncer URL %q still points at the server's port", pooled)
	}
	cfg, err := pgx.ParseConfig(pooled)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	pids := map[int32]bool{}
	const clients = 6
	for i := 0; i < clients; i++ {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatalf("connect through pgbouncer: %v", err)
		}
		defer conn.Close(context.Background())
		var v string
		var pid int32
		if err := conn.QueryRow(ctx, "SELECT v, pg_backend_pid() FROM marker").Scan(&v, &pid); err != nil {
			t.Fatalf("client %d through pgbouncer: %v", i, err)
		}
		if v != "direct" {
			t.Fatalf("client %d read %q through pgbouncer, want the row written directly", i, v)
		}
		pids[pid] = true
	}
	if len(pids) >= clients {
		t.Fatalf("%d idle clients ran on %d server connections; a transaction-mode pooler shares them", clients, len(pids))
	}
}
