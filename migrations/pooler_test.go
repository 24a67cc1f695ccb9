package migrations_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// Through PgBouncer in transaction mode, up and down refuse before any
// change with a message that says to connect directly; plan and status,
// which hold no session state, work and say why up would refuse; nothing
// is left on the pooled server connections (no advisory lock, no setting,
// no prepared statement).
func TestPoolerIsRefusedAndLeavesNothingBehind(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	// Database defaults that a leaked "SET lock_timeout = 0" would differ from.
	admin := testdb.Connect(t, url)
	if _, err := admin.Exec(ctx, `DO $$ BEGIN
EXECUTE format('ALTER DATABASE %I SET lock_timeout = ''7s''', current_database());
EXECUTE format('ALTER DATABASE %I SET statement_timeout = ''1h''', current_database());
END $$`); err != nil {
		t.Fatal(err)
	}
	pooled := testdb.PgBouncer(t, url)
	before := takeSnapshot(t, url, s.Layout)
	for name, run := range map[string]func(context.Context, string, layout.Layout, migrations.Options) (*migrations.Report, error){
		"up": migrations.Up, "down": migrations.Down,
	} {
		_, err := run(ctx, pooled, s.Layout, migrations.Options{})
		var pe *migrations.PoolerError
		if !errors.Is(err, migrations.ErrPooler) || !errors.As(err, &pe) || !contains(err.Error(), "Connect directly to PostgreSQL", "nothing was changed") {
			t.Errorf("%s through PgBouncer: %v, want a *PoolerError saying to connect directly", name, err)
		}
	}
	p, err := migrations.Plan(ctx, pooled, s.Layout)
	if err != nil {
		t.Fatalf("plan through PgBouncer: %v", err)
	}
	refused := false
	for _, f := range p.Findings {
		refused = refused || f.Fatal && strings.Contains(f.Message, "connection pooler")
	}
	if !refused || p.State != migrations.Legacy {
		t.Errorf("plan through PgBouncer: state %s, findings %v; want legacy and a fatal pooler finding", p.State, p.Findings)
	}
	st, err := migrations.Status(ctx, pooled, s.Layout)
	if err != nil || st.Pooler == nil || st.State != migrations.Legacy {
		t.Errorf("status through PgBouncer: %+v, %v; want legacy with the pooler noted", st, err)
	}
	if _, err := migrations.FilesFor(ctx, pooled, s.Layout); err != nil {
		t.Errorf("FilesFor through PgBouncer: %v", err)
	}
	if d := before.diff(takeSnapshot(t, url, s.Layout)); d != "" {
		t.Fatalf("a refused run through the pooler changed the database:\n%s", d)
	}
	// Nothing outlives the commands on the server connections.
	direct := testdb.Connect(t, url)
	var locks int
	if err := direct.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&locks); err != nil {
		t.Fatal(err)
	}
	if locks != 0 {
		t.Errorf("%d advisory lock(s) left on the server after the pooled runs", locks)
	}
	var wantLock, wantStmt string
	if err := direct.QueryRow(ctx, "SELECT current_setting('lock_timeout'), current_setting('statement_timeout')").Scan(&wantLock, &wantStmt); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		c := testdb.Connect(t, pooled)
		var lock, stmt string
		var prepared int
		// The simple protocol, so that the probe prepares nothing itself.
		if err := c.QueryRow(ctx, "SELECT current_setting('lock_timeout'), current_setting('statement_timeout'), (SELECT count(*) FROM pg_prepared_statements)::int", pgx.QueryExecModeSimpleProtocol).Scan(&lock, &stmt, &prepared); err != nil {
			t.Fatal(err)
		}
		if wantLock != "7s" || wantStmt != "1h" {
			t.Fatalf("the database defaults did not apply: %s, %s", wantLock, wantStmt)
		}
		if lock != wantLock || stmt != wantStmt {
			t.Errorf("a pooled server connection has lock_timeout %s, statement_timeout %s; the server's are %s, %s", lock, stmt, wantLock, wantStmt)
		}
		if prepared != 0 {
			t.Errorf("a pooled server connection holds %d prepared statement(s)", prepared)
		}
	}
}
