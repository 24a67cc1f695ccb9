package compat

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lib/pq"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// TestRollingDeployThroughPgBouncer: the rolling deploy with the new
// version behind PgBouncer in transaction pool mode (Debian's pgbouncer, as
// docs/runtime.md "PgBouncer and the version schema" says to run it):
// plain-jobs 0.38.0's writers and workers log in as the new version's own
// role, whose search_path is the version schema by a role setting (ALTER
// ROLE ... IN DATABASE ... SET search_path): a startup parameter
// (search_path, or options=-c search_path=...) is refused by the pooler, and
// a session's SET would stay on a server connection another client gets
// next. compat writes through the pooler with pgx (exec mode) and with
// database/sql over lib/pq, and the old version (plain-jobs 0.37.6) through
// it too, as a role of its own, across up --expand, up (complete) and up
// --contract. Once the old version has gone, complete names the pooler's
// idle server connection that last ran its insert, with the
// pg_terminate_backend that ends it; ended, complete goes ahead. No write
// fails, no compat group is ever over its limit, every job is finished.
func TestRollingDeployThroughPgBouncer(t *testing.T) {
	d := newDeploy(t)
	ctx := t.Context()
	l := legacy.PlainJobs.Layout
	roles := testdb.ManagedRoles(t, d.url, "public")
	viaPooler := testdb.PgBouncer(t, d.url)

	// A startup parameter that selects the version schema does not get
	// through the pooler: PgBouncer refuses it at login.
	for _, param := range []struct{ name, value string }{
		{"search_path", layout.Ident(d.vsName) + ", public"},
		{"options", "-c search_path=" + d.vsName + ",public"},
	} {
		cfg, err := pgx.ParseConfig(viaPooler)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams[param.name] = param.value
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			conn.Close(ctx)
			t.Logf("the pooler took the startup parameter %s: the role setting below still selects the version schema", param.name)
		} else if !strings.Contains(err.Error(), "unsupported startup parameter: "+param.name) {
			t.Fatalf("startup parameter %s through the pooler: %v; want PgBouncer's refusal", param.name, err)
		}
	}

	mon := d.monitor(d.pool("monitor", "", 1))
	defer mon.stop()
	// The old version through the pooler too, as a role of its own (the
	// managed roles' migrator: its own pool of server connections).
	oldVersion := testdb.PgBouncerAs(t, roles.MigratorURL)
	oldApp := d.poolOn(oldVersion, "old-version", "", 4, pgx.QueryExecModeExec)
	oldWorkerPool := d.poolOn(oldVersion, "old-version-worker", "", 3, pgx.QueryExecModeExec)
	oldW := d.oldWriters(oldApp, 2)
	oldK := d.workers(pj037, oldWorkerPool, 2)
	// compat through the pooler: pgx in exec mode, and lib/pq.
	compatPool := d.poolOn(viaPooler, "new-version-compat-pooler", "", 4, pgx.QueryExecModeExec)
	viaPoolerCompat, err := NewClient(Pgx(compatPool), l)
	if err != nil {
		t.Fatal(err)
	}
	cw := d.compatWritersWith(viaPoolerCompat, compatPool, 2)
	defer cw.stop()
	// lib/pq sends a statement with parameters outside a transaction as
	// two messages (a Parse, then a Bind), which a transaction pooler may
	// hand to two server connections (26000, "unnamed prepared statement
	// does not exist"); binary_parameters=yes sends them in one.
	connector, err := pq.NewConnector(viaPooler + "&binary_parameters=yes")
	if err != nil {
		t.Fatal(err)
	}
	pqDB := sql.OpenDB(connector)
	pqDB.SetMaxOpenConns(3)
	t.Cleanup(func() { pqDB.Close() })
	cs := d.compatSQLWritersOn(pqDB, "compat writer (lib/pq through PgBouncer)", 1)
	defer cs.stop()

	d.phase("up --expand", func() error {
		_, err := migrations.Up(ctx, d.url, l, d.migrating(migrations.Options{Expand: true}))
		return err
	})
	// The new version's role reads the version schema first, on every
	// server connection the pooler opens for it from now on (it has opened
	// none yet: a server connection opened before keeps the search_path it
	// started with).
	var db string
	admin := d.pool("admin", "", 1)
	if err := admin.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER ROLE %s IN DATABASE %s SET search_path = %s, public", layout.Ident(roles.App), layout.Ident(db), layout.Ident(d.vsName))); err != nil {
		t.Fatal(err)
	}
	newVersion := testdb.PgBouncerAs(t, roles.AppURL)
	newApp := d.poolOn(newVersion, "new-version", "", 4, pgx.QueryExecModeExec)
	newWorkerPool := d.poolOn(newVersion, "new-version-worker", "", 3, pgx.QueryExecModeExec)
	var requests string
	if err := newApp.QueryRow(ctx, "SELECT n.nspname::pg_catalog.text FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace WHERE c.oid OPERATOR(pg_catalog.=) 'plainjobs_jobrequest'::pg_catalog.regclass").Scan(&requests); err != nil || requests != d.vsName {
		var who, sp, dbn string
		_ = newApp.QueryRow(ctx, "SELECT current_user::text, current_setting('search_path'), current_database()::text").Scan(&who, &sp, &dbn)
		t.Fatalf("the new version's plainjobs_jobrequest through the pooler is in schema %q (%v); want the version schema's view (%s %s %s)", requests, err, who, sp, dbn)
	}
	nw := d.newWriters(newApp, 2)
	defer nw.stop()
	nk := d.workers(pj038, newWorkerPool, 3)
	defer nk.stop()
	time.Sleep(300 * time.Millisecond)
	d.check("expanded, both versions, the new one through PgBouncer")

	oldK.stop()
	oldW.stop()
	// Its last enqueue (a server connection's last statement then names
	// unique_key: a worker's last one is a COMMIT).
	if ok, err := enqueue037(ctx, oldApp, "app.jobs.Report", "", "default"); err != nil || !ok {
		t.Fatalf("the old version's last enqueue: %v %v", ok, err)
	}
	d.inserted.Add(1)
	oldApp.Close()
	oldWorkerPool.Close()
	// Every instance of the old version has gone, but the pooler keeps the
	// server connections that ran its statements: complete names them, and
	// says to end them.
	_, err = migrations.Up(ctx, d.url, l, migrations.Options{})
	var pe *migrations.PreflightError
	if !errors.As(err, &pe) {
		t.Fatalf("complete with the pooler's server connections of the old version still there: %v; want a refusal naming them", err)
	}
	for _, f := range pe.Findings {
		if !f.Fatal {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(f.Object, "pid %d", &pid); err != nil || f.Kind != "old_version_writing" || !strings.Contains(f.Message, fmt.Sprintf("end it with SELECT pg_terminate_backend(%d)", pid)) {
			t.Fatalf("complete's refusal: %+v; want each old-version session named, with the pg_terminate_backend that ends it", f)
		}
		if _, err := admin.Exec(ctx, "SELECT pg_catalog.pg_terminate_backend($1)", pid); err != nil {
			t.Fatal(err)
		}
	}
	d.phase("up (complete)", func() error {
		_, err := migrations.Up(ctx, d.url, l, d.migrating(migrations.Options{}))
		return err
	})
	time.Sleep(300 * time.Millisecond)
	d.check("migrated, the new version through PgBouncer")
	d.phase("up --contract", func() error {
		_, err := migrations.Up(ctx, d.url, l, d.migrating(migrations.Options{Contract: true}))
		return err
	})
	time.Sleep(300 * time.Millisecond)
	nw.stop()
	cw.stop()
	cs.stop()
	nk.stop()
	mon.stop()
	d.check("contracted, the new version through PgBouncer")
	d.finishAll(pj038, d.poolOn(newVersion, "new-version-final-worker", "", 2, pgx.QueryExecModeExec))
	t.Logf("compat: %d jobs skipped by the unique rule, %d at the limit; %d caller transactions run again after ErrLayoutChanged; %d jobs inserted in all",
		d.skips(SkipUniqueRule), d.skips(SkipLimit), d.layoutChanged.Load(), d.inserted.Load())
}
