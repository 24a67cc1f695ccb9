package migrations_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// A library caller that cancels the context of Up while its index build
// waits for a transaction holding an old snapshot gets context.Canceled,
// wrapping the server's cancellation of the build (57014), and when Up
// returns the build has ended on the server and the run lock is free
// (Status shows no holder); soon no session of the run is left (the
// snapshot is still held), and the next Up finishes.
func TestCancelledUpLeavesNothingOnTheServer(t *testing.T) {
	s := legacy.TeamQueue
	url := legacyDB(t, s)
	probe := testdb.Connect(t, url)
	ctx := context.Background()
	holder := testdb.Connect(t, url)
	tx, err := holder.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SELECT count(*) FROM pg_class"); err != nil {
		t.Fatal(err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := migrations.Up(runCtx, url, s.Layout, migrations.Options{})
		done <- err
	}()
	runSessions := func() (n int, waiting bool, err error) {
		err = probe.QueryRow(ctx, `SELECT count(*), coalesce(bool_or(wait_event = 'virtualxid' AND query LIKE 'CREATE INDEX CONCURRENTLY%'), false)
FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'migrate-unique up %'`).Scan(&n, &waiting)
		return n, waiting, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, waiting, err := runSessions()
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Up returned before its index build waited for the old snapshot: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the index build never waited for the old snapshot")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	err = <-done
	var pgErr *pgconn.PgError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Fatalf("Up after its context was cancelled: %v, want context.Canceled wrapping the server's 57014", err)
	}
	// Up has waited for the server: at once, its statement is over and its
	// run lock free.
	var active int
	if err := probe.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
  AND application_name LIKE 'migrate-unique up %' AND state = 'active'`).Scan(&active); err != nil {
		t.Fatal(err)
	}
	if active > 0 {
		t.Fatalf("%d statements of the cancelled run still run on the server when Up returns", active)
	}
	st, err := migrations.Status(ctx, url, s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if st.Run != nil {
		t.Fatalf("the run lock is still held when the cancelled Up returns: %v", st.Run)
	}
	for {
		n, _, err := runSessions()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions of the cancelled run are left on the server", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := migrations.Up(ctx, url, s.Layout, migrations.Options{})
	if err != nil || rep.After != migrations.Migrated {
		t.Fatalf("Up after the cancelled one: %v %v", rep, err)
	}
}
