package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// openTransaction opens, as the role of url, a transaction that holds a
// lock on the requests table, and waits (as the superuser of admin) until
// it is older than age. It returns the session's pid and its transaction.
func openTransaction(t *testing.T, url string, admin *pgx.Conn, age time.Duration) (int, pgx.Tx) {
	t.Helper()
	ctx := context.Background()
	conn := testdb.Connect(t, url)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) }) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SELECT 1 FROM plainjobs_jobrequest LIMIT 1"); err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	for {
		var old bool
		if err := admin.QueryRow(ctx, "SELECT now() - xact_start > make_interval(secs => $2) FROM pg_stat_activity WHERE pid = $1", pid, age.Seconds()).Scan(&old); err != nil {
			t.Fatal(err)
		}
		if old {
			return pid, tx
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Another role's long transaction holds a lock on the queue. As a
// superuser, up refuses naming the session. As the tables' owner's member
// on a managed server, which cannot see other roles' transactions in
// pg_stat_activity, up refuses too, from pg_locks, naming the session, what
// it cannot see and the grant that lets it; plan says the same. Nothing is
// changed. With pg_read_all_stats the member's check is the superuser's.
func TestAnotherRolesLongTransactionIsRefusedWhateverTheRole(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	roles := testdb.ManagedRoles(t, url, s.Resolved.Schema)
	admin := testdb.Connect(t, url)
	before := takeSnapshot(t, url, s.Layout)
	const long = 300 * time.Millisecond
	pid, tx := openTransaction(t, roles.AppURL, admin, long)
	session := fmt.Sprintf("session pid %d", pid)

	_, err := migrations.Up(ctx, url, s.Layout, migrations.Options{LongTransaction: long})
	var pe *migrations.PreflightError
	if !errors.As(err, &pe) || !contains(err.Error(), session, "idle in a transaction", "plainjobs_jobrequest") {
		t.Fatalf("up as the superuser: %v", err)
	}

	p, err := migrations.Plan(ctx, roles.MigratorURL, s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	var fatal, notes string
	for _, f := range p.Findings {
		if f.Fatal {
			fatal += f.Message + "\n"
		} else {
			notes += f.Message + "\n"
		}
	}
	// plan runs with the default --long-transaction: the watch is 5s.
	if !contains(fatal, session, roles.App, "plainjobs_jobrequest", "seen in pg_locks", "GRANT pg_read_all_stats TO "+roles.Migrator) {
		t.Fatalf("plan as the owner's member does not refuse the session from pg_locks:\nfatal: %s\nnotes: %s", fatal, notes)
	}
	if !contains(notes, "cannot see other roles' sessions", "GRANT pg_read_all_stats TO "+roles.Migrator) {
		t.Fatalf("plan does not say what the role cannot see:\n%s", notes)
	}

	_, err = migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{LongTransaction: long})
	if !errors.As(err, &pe) || !contains(err.Error(), session, "seen in pg_locks", "pg_read_all_stats") {
		t.Fatalf("up as the owner's member: %v, want a refusal naming the session", err)
	}
	if d := before.diff(takeSnapshot(t, url, s.Layout)); d != "" {
		t.Fatalf("a refused up changed the database:\n%s", d)
	}

	if _, err := admin.Exec(ctx, "GRANT pg_read_all_stats TO "+roles.Migrator); err != nil {
		t.Fatal(err)
	}
	_, err = migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{LongTransaction: long})
	if !errors.As(err, &pe) || !contains(err.Error(), session, "idle in a transaction") || strings.Contains(err.Error(), "pg_locks") {
		t.Fatalf("up as a member of pg_read_all_stats: %v, want the superuser's refusal", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{LongTransaction: long}); err != nil {
		t.Fatalf("up once the transaction ended: %v", err)
	}
}

// A session the role cannot see whose transaction ends while it is watched
// does not stop up: short transactions of a busy queue pass.
func TestAHiddenShortTransactionPasses(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	roles := testdb.ManagedRoles(t, url, s.Resolved.Schema)
	admin := testdb.Connect(t, url)
	pid, tx := openTransaction(t, roles.AppURL, admin, 0)
	done := make(chan error, 1)
	go func() {
		// End the transaction once up is watching it in pg_locks.
		conn, err := testdb.Dial(ctx, url)
		if err != nil {
			done <- err
			return
		}
		defer conn.Close(ctx)
		for {
			var watching bool
			if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE application_name LIKE 'migrate-unique up%' AND query LIKE 'SELECT DISTINCT lk.pid, lk.virtualtransaction FROM pg_locks%')").Scan(&watching); err != nil {
				done <- err
				return
			}
			if watching {
				done <- tx.Commit(ctx)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	rep, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{})
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var notes string
	for _, f := range rep.Findings {
		notes += f.String() + "\n"
	}
	if !contains(notes, fmt.Sprintf("session pid %d of role %s held", pid, roles.App), "ended while it was watched") {
		t.Fatalf("up's findings do not show the watched session:\n%s", notes)
	}
}

// A run of another role holds the run lock: a role that cannot see it says
// so, rather than report its state as empty and its age as 0s.
func TestBusyErrorSaysWhatTheRoleCannotSee(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	roles := testdb.ManagedRoles(t, url, s.Resolved.Schema)
	finish := upHeldAtFirstStep(t, url, s.Layout)
	_, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{})
	var busy *migrations.BusyError
	if !errors.As(err, &busy) || !busy.Hidden || !contains(err.Error(), "hidden from this role without pg_read_all_stats") || strings.Contains(err.Error(), "for 0s") {
		t.Errorf("up as the owner's member during the superuser's run: %v", err)
	}
	if err := finish(); err != nil {
		t.Fatalf("the superuser's up: %v", err)
	}
}

// A transaction of a role the migration cannot see that starts holding a
// lock after the preflight is not queued behind at the cutover once it has
// been seen holding it longer than the first attempt's wait: the writers
// behind the migration do not stall for a whole attempt.
func TestCutoverDoesNotQueueBehindAHiddenLongHolder(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	roles := testdb.ManagedRoles(t, url, s.Resolved.Schema)
	app := testdb.Connect(t, roles.AppURL)
	var pid int
	var tx pgx.Tx
	var holders []*migrations.HolderError
	_, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{
		LockTimeout: 400 * time.Millisecond, MaxAttempts: 4,
		BeforeStep: func(ctx context.Context, st migrations.StepResult) {
			if !strings.HasPrefix(st.Name, "cutover") {
				return
			}
			var err error
			if tx, err = app.Begin(ctx); err != nil {
				t.Error(err)
				return
			}
			if _, err := tx.Exec(ctx, "SELECT 1 FROM plainjobs_jobrequest LIMIT 1"); err != nil {
				t.Error(err)
			}
			if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				t.Error(err)
			}
		},
		OnRetry: func(step string, attempt int, wait time.Duration, err error) {
			var h *migrations.HolderError
			if errors.As(err, &h) {
				holders = append(holders, h)
			}
		},
	})
	var le *migrations.LockError
	if !errors.As(err, &le) {
		t.Fatalf("up: %v, want a *LockError after the attempts", err)
	}
	if len(holders) == 0 || holders[0].PID != pid || !strings.Contains(holders[0].Error(), "hidden from this role") {
		t.Fatalf("no attempt saw the hidden holder pid %d: %v (last error %v)", pid, holders, le.Err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{}); err != nil {
		t.Fatalf("up once the transaction ended: %v", err)
	}
}

// pg_locks shows every database's locks, and databases copied from one
// template share their tables' OIDs: a long transaction on the same table
// of another database is not one on this queue.
func TestLocksInAnotherDatabaseAreNotThisQueues(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	other := legacyDB(t, s)
	url := legacyDB(t, s)
	var a, b uint32
	if err := testdb.Connect(t, other).QueryRow(ctx, "SELECT 'plainjobs_jobrequest'::regclass::oid").Scan(&a); err != nil {
		t.Fatal(err)
	}
	if err := testdb.Connect(t, url).QueryRow(ctx, "SELECT 'plainjobs_jobrequest'::regclass::oid").Scan(&b); err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("two copies of one template should share the table's OID (%d, %d): the test would prove nothing", a, b)
	}
	openTransaction(t, other, testdb.Connect(t, other), 300*time.Millisecond)
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{LongTransaction: 300 * time.Millisecond}); err != nil {
		t.Fatalf("up refused over another database's transaction: %v", err)
	}
}
