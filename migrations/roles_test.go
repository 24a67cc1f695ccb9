package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// emailJob is a legacy job type: one job per key.
type emailJob struct{ to string }

func (j emailJob) UniqueKey() string { return "email-" + j.to }

// chargeJob asks for a skip record when its limit blocks it.
type chargeJob struct{}

func (chargeJob) ConcurrencyKey() string        { return "customer-7" }
func (chargeJob) ConcurrencyLimit() (int, bool) { return 1, true }
func (chargeJob) ConcurrencySkipRecord() bool   { return true }

// appRuntime is the compat runtime as the application's DML-only role uses
// it: one client made before the migration and kept across it.
type appRuntime struct {
	t      *testing.T
	client *compat.Client
	slots  *compat.Slots
	n      int
}

func newAppRuntime(t *testing.T, url string, l layout.Layout) *appRuntime {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c, err := compat.NewClient(compat.Pgx(pool), l)
	if err != nil {
		t.Fatal(err)
	}
	s, err := compat.NewSlots(compat.Pgx(pool), l, compat.SlotsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &appRuntime{t: t, client: c, slots: s}
}

// enqueue enqueues a new keyed job and fails the test unless it was
// inserted.
func (a *appRuntime) enqueue(when string) {
	a.t.Helper()
	a.n++
	res, err := a.client.Enqueue(context.Background(), compat.Job{Class: "app.jobs.Email", Value: emailJob{to: when + "-" + strings.Repeat("x", a.n)}})
	if err != nil {
		a.t.Fatalf("the application role's enqueue %s: %v", when, err)
	}
	if !res.Inserted() {
		a.t.Fatalf("the application role's enqueue %s was skipped: %+v", when, res.Skipped)
	}
}

// migrated uses what up created: an override, a slot lease, a skip record.
func (a *appRuntime) migrated(when string) {
	a.t.Helper()
	ctx := context.Background()
	o := a.slots.Overrides()
	if err := o.SetLimit(ctx, "app.jobs.Email::email-override", 2, "test"); err != nil {
		a.t.Fatalf("the application role sets an override %s: %v", when, err)
	}
	if _, ok, err := o.Get(ctx, "app.jobs.Email::email-override"); err != nil || !ok {
		a.t.Fatalf("the application role reads its override %s: ok %v, %v", when, ok, err)
	}
	if _, err := o.ClearLimit(ctx, "app.jobs.Email::email-override"); err != nil {
		a.t.Fatalf("the application role clears its override %s: %v", when, err)
	}
	lease, ok, err := a.slots.Acquire(ctx, "app.jobs.Charge::customer-7", 1, "job-1", "worker-1", time.Minute)
	if err != nil || !ok {
		a.t.Fatalf("the application role takes a slot %s: acquired %v, %v", when, ok, err)
	}
	if _, err := a.slots.Extend(ctx, lease, time.Minute); err != nil {
		a.t.Fatalf("the application role extends its slot %s: %v", when, err)
	}
	if err := a.slots.Release(ctx, lease); err != nil {
		a.t.Fatalf("the application role releases its slot %s: %v", when, err)
	}
	if _, err := a.slots.CleanupExpired(ctx); err != nil {
		a.t.Fatalf("the application role sweeps the slots %s: %v", when, err)
	}
	if a.client.Layout().ResultsTable == "" || a.client.Layout().SingleTable() {
		return // no skip records: no results table, or the jobs table's CHECK on its states has no 'skipped'
	}
	for i := range 2 {
		res, err := a.client.Enqueue(ctx, compat.Job{Class: "app.jobs.Charge", Value: chargeJob{}})
		if err != nil {
			a.t.Fatalf("the application role's enqueue %d of a job with skip records %s: %v", i, when, err)
		}
		if i == 1 && (res.Skipped == nil || res.Skipped.RecordID == 0) {
			a.t.Fatalf("the second charge %s left no skip record: %+v", when, res)
		}
	}
}

// On a managed server (no superuser; the tables belong to a NOLOGIN role;
// the migration runs as a member of it; the application has DML only),
// the application's enqueues, overrides and slots work before up, after
// it, and after down, with one client made before the migration: up grants
// the application what it needs on what it creates.
func TestApplicationRoleWorksAcrossUpAndDown(t *testing.T) {
	for _, s := range legacy.All {
		t.Run(s.Name, func(t *testing.T) {
			ctx := context.Background()
			url := legacyDB(t, s)
			roles := testdb.ManagedRoles(t, url, s.Resolved.Schema)
			app := newAppRuntime(t, roles.AppURL, s.Layout)
			app.enqueue("before up")

			p, err := migrations.Plan(ctx, roles.MigratorURL, s.Layout)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range p.Findings {
				if f.Fatal {
					t.Fatalf("plan refuses as the owner's member: %s", f)
				}
			}
			grants := plannedSQL(p)
			want := "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE " + s.Resolved.Table(layout.LimitsTable) + " TO " + roles.App + ";"
			if !strings.Contains(grants, want) {
				t.Fatalf("plan lacks %q:\n%s", want, grants)
			}
			files, err := migrations.FilesFor(ctx, roles.MigratorURL, s.Layout)
			if err != nil {
				t.Fatal(err)
			}
			if !filesContain(files, want) {
				t.Fatalf("sql --database writes no file with %q", want)
			}

			if _, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{}); err != nil {
				t.Fatal(err)
			}
			app.enqueue("after up")
			app.migrated("after up")
			conn := testdb.Connect(t, url)
			var owner string
			if err := conn.QueryRow(ctx, "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = $1::regclass", s.Resolved.Table(layout.LimitsTable)).Scan(&owner); err != nil {
				t.Fatal(err)
			}
			if owner != roles.Owner {
				t.Errorf("%s belongs to %s, not to the queue's owner %s", layout.LimitsTable, owner, roles.Owner)
			}
			st, err := migrations.Status(ctx, roles.MigratorURL, s.Layout)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != migrations.Migrated || len(st.Drift) > 0 {
				t.Fatalf("status after up: %s, drift %q", st.State, st.Drift)
			}

			if _, err := migrations.Down(ctx, roles.MigratorURL, s.Layout, migrations.Options{}); err != nil {
				t.Fatal(err)
			}
			app.enqueue("after down")

			// Up again, and down with an override in place: the table that
			// holds it stays, and so do the grants the runtime reads it by.
			if _, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{}); err != nil {
				t.Fatal(err)
			}
			app.enqueue("after the second up")
			if err := app.slots.Overrides().SetLimit(ctx, "app.jobs.Other", 5, "kept"); err != nil {
				t.Fatal(err)
			}
			rep, err := migrations.Down(ctx, roles.MigratorURL, s.Layout, migrations.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Kept) == 0 {
				t.Fatalf("down kept nothing, but an override was set")
			}
			app.enqueue("after a down that kept the overrides")
		})
	}
}

// plannedSQL is every statement of a plan.
func plannedSQL(p *migrations.PlanResult) string {
	var b strings.Builder
	for _, st := range p.Steps {
		b.WriteString(st.SQL + "\n")
	}
	return b.String()
}

func filesContain(files map[string]string, s string) bool {
	for _, f := range files {
		if strings.Contains(f, s) {
			return true
		}
	}
	return false
}

// A migrated layout whose runtime tables lack the application's grants
// (migrated by an earlier version of the tool) shows it as drift, and up
// repairs it.
func TestMissingGrantsAreDriftThatUpRepairs(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	roles := testdb.ManagedRoles(t, url, s.Resolved.Schema)
	if _, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	conn := testdb.Connect(t, url)
	if _, err := conn.Exec(ctx, "REVOKE ALL ON "+s.Resolved.Table(layout.LimitsTable)+" FROM "+roles.App); err != nil {
		t.Fatal(err)
	}
	st, err := migrations.Status(ctx, roles.MigratorURL, s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Drift) != 1 || !contains(st.Drift[0], roles.App, "SELECT, INSERT, UPDATE, DELETE", layout.LimitsTable) {
		t.Fatalf("drift: %q", st.Drift)
	}
	if _, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	app := newAppRuntime(t, roles.AppURL, s.Layout)
	app.enqueue("after the repair")
	if st, err = migrations.Status(ctx, roles.MigratorURL, s.Layout); err != nil || len(st.Drift) > 0 {
		t.Fatalf("status after the repair: %v, drift %q", err, st.Drift)
	}
}

// Privileges are mirrored as the queue's tables give them: to PUBLIC, by
// column, and from the owner's default privileges.
func TestGrantsMirrorPublicColumnAndDefaultPrivileges(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	roles := testdb.ManagedRoles(t, url, s.Resolved.Schema)
	conn := testdb.Connect(t, url)
	results := s.Resolved.Table(s.Resolved.ResultsTable)
	// A role whose name needs quoting (cluster-wide: named after the
	// database's roles, dropped with its privileges when the test ends).
	reader := layout.Ident(roles.App + " Report Reader")
	if _, err := conn.Exec(ctx, "CREATE ROLE "+reader+" NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if _, err := conn.Exec(ctx, "DROP OWNED BY "+reader); err != nil {
			t.Error(err)
		}
		if _, err := conn.Exec(ctx, "DROP ROLE "+reader); err != nil {
			t.Error(err)
		}
	})
	for _, stmt := range []string{
		"GRANT SELECT ON " + s.Resolved.Table(s.Resolved.ProcessesTable) + " TO " + reader,
		"GRANT SELECT ON " + s.Resolved.Table(s.Resolved.RequestsTable) + " TO PUBLIC",
		// The app reads and writes the results table by column only.
		"REVOKE ALL ON " + results + " FROM " + roles.App,
		"GRANT SELECT (id, job_class), INSERT (id, job_class, unique_key) ON " + results + " TO " + roles.App,
		"ALTER DEFAULT PRIVILEGES FOR ROLE " + roles.Owner + " IN SCHEMA public GRANT SELECT, TRUNCATE ON TABLES TO " + roles.Migrator,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	p, err := migrations.Plan(ctx, roles.MigratorURL, s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	grants := plannedSQL(p)
	limits := s.Resolved.Table(layout.LimitsTable)
	for _, want := range []string{
		"GRANT SELECT ON TABLE " + limits + " TO PUBLIC;",
		"GRANT SELECT ON TABLE " + limits + " TO " + reader + ";",
		"GRANT SELECT ON TABLE " + limits + " TO " + roles.Migrator + ";",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE " + limits + " TO " + roles.App + ";",
		`GRANT SELECT ("concurrency_skip"), INSERT ("concurrency_skip") ON TABLE ` + results + " TO " + roles.App + ";",
	} {
		if !strings.Contains(grants, want) {
			t.Errorf("grants lack %q:\n%s", want, grants)
		}
	}
	if strings.Contains(grants, "TRUNCATE") {
		t.Errorf("grants mirror TRUNCATE, which the runtime never uses:\n%s", grants)
	}
	if _, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT has_column_privilege($1, $2::regclass, 'concurrency_skip', 'INSERT')", roles.App, results).Scan(&ok); err != nil || !ok {
		t.Fatalf("the application cannot insert the skip-metadata column: %v %v", ok, err)
	}
}

// A runtime table the migration's role cannot grant on (an administrator
// created it) is refused in plan and before any change, naming the
// statements an administrator must run; once they ran, up goes on.
func TestUpRefusesGrantsItCannotMakeAndNamesThem(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	roles := testdb.ManagedRoles(t, url, s.Resolved.Schema)
	conn := testdb.Connect(t, url)
	l, err := s.Layout.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range l.RuntimeDDL()[:1] { // concurrency_limits, owned by the superuser
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	before := takeSnapshot(t, url, s.Layout)
	limits := l.Table(layout.LimitsTable)
	statements := []string{
		"GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE " + limits + " TO " + roles.App + ";",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE " + limits + " TO " + roles.Owner + ";",
	}
	p, err := migrations.Plan(ctx, roles.MigratorURL, s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	refused := ""
	for _, f := range p.Findings {
		if f.Fatal {
			refused += f.Message
		}
	}
	if !contains(refused, statements...) || !contains(refused, "cannot grant on "+limits) {
		t.Fatalf("plan does not refuse with the statements %q: %q", statements, refused)
	}
	_, err = migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{})
	var pe *migrations.PreflightError
	if !errors.As(err, &pe) || !contains(err.Error(), statements...) {
		t.Fatalf("up: %v", err)
	}
	if d := before.diff(takeSnapshot(t, url, s.Layout)); d != "" {
		t.Fatalf("the refused up changed the database:\n%s", d)
	}
	for _, stmt := range statements {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{}); err != nil {
		t.Fatalf("up after the administrator's grants: %v", err)
	}
	newAppRuntime(t, roles.AppURL, s.Layout).enqueue("after up")

	// down would drop the administrator's table: it refuses before any
	// change rather than fail half-way.
	migrated := takeSnapshot(t, url, s.Layout)
	_, err = migrations.Down(ctx, roles.MigratorURL, s.Layout, migrations.Options{})
	if !errors.As(err, &pe) || !contains(err.Error(), "does not own "+limits+" (owner ", "down drops") {
		t.Fatalf("down: %v", err)
	}
	if d := migrated.diff(takeSnapshot(t, url, s.Layout)); d != "" {
		t.Fatalf("the refused down changed the database:\n%s", d)
	}
}

// A role that does not own the queue's tables (the application's) is
// refused before any change, told which grant would let it run.
func TestUpRefusesARoleThatDoesNotOwnTheTables(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	roles := testdb.ManagedRoles(t, url, s.Resolved.Schema)
	before := takeSnapshot(t, url, s.Layout)
	_, err := migrations.Up(ctx, roles.AppURL, s.Layout, migrations.Options{})
	var pe *migrations.PreflightError
	if !errors.As(err, &pe) {
		t.Fatalf("up as the application's role: %v, want a *PreflightError", err)
	}
	wants := []string{
		"does not own table " + s.Resolved.Table(s.Resolved.RequestsTable) + " (its owner is " + roles.Owner + ")",
		"GRANT " + roles.Owner + " TO " + roles.App,
		`GRANT CREATE ON SCHEMA "public" TO ` + roles.App,
	}
	if testdb.Major(t) < 15 {
		// Every role may create in schema public before 15: there is only
		// the ownership to refuse.
		testdb.Adapted(t, "PUBLIC may create in schema public before PostgreSQL 15: the refusal names the ownership, and no GRANT CREATE")
		if strings.Contains(err.Error(), "GRANT CREATE ON SCHEMA") {
			t.Errorf("the refusal asks for CREATE on a schema where every role has it:\n%v", err)
		}
		wants = wants[:2]
	}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q:\n%v", want, err)
		}
	}
	if d := before.diff(takeSnapshot(t, url, s.Layout)); d != "" {
		t.Fatalf("a refused up changed the database:\n%s", d)
	}
}

// When the queue's owner may not create in the schema, up asks for it;
// when only the migration's own role may, up creates as it and grants the
// queue's owner too, so the owner's other members (and the application)
// keep working.
func TestWithoutTheOwnersCreateUpCreatesAsItselfAndGrantsTheOwner(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	roles := testdb.ManagedRoles(t, url, s.Resolved.Schema)
	conn := testdb.Connect(t, url)
	revoke := "REVOKE CREATE ON SCHEMA public FROM " + roles.Owner
	if testdb.Major(t) < 15 {
		testdb.Adapted(t, "PUBLIC may create in schema public before PostgreSQL 15: revoked from PUBLIC too, as 15 does, so that the owner may not create there")
		revoke += ", PUBLIC"
	}
	if _, err := conn.Exec(ctx, revoke); err != nil {
		t.Fatal(err)
	}
	_, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{})
	if err == nil || !strings.Contains(err.Error(), `GRANT CREATE ON SCHEMA "public" TO `+roles.Owner) {
		t.Fatalf("up without CREATE: %v", err)
	}
	if _, err := conn.Exec(ctx, "GRANT CREATE ON SCHEMA public TO "+roles.Migrator); err != nil {
		t.Fatal(err)
	}
	limits := s.Resolved.Table(layout.LimitsTable)
	p, err := migrations.Plan(ctx, roles.MigratorURL, s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	grants := plannedSQL(p)
	if want := "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE " + limits + " TO " + roles.Owner + ";"; !strings.Contains(grants, want) {
		t.Fatalf("grants lack %q:\n%s", want, grants)
	}
	var notes string
	for _, f := range p.Findings {
		notes += f.String() + "\n"
	}
	if !contains(notes, "up creates its tables as "+roles.Migrator+", not as the queue's owner "+roles.Owner, `GRANT CREATE ON SCHEMA "public" TO `+roles.Owner) {
		t.Errorf("plan does not say whom the tables will belong to:\n%s", notes)
	}
	if _, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	newAppRuntime(t, roles.AppURL, s.Layout).enqueue("after up")
	var ownerReads bool
	if err := conn.QueryRow(ctx, "SELECT has_table_privilege($1, $2::regclass, 'SELECT, INSERT, UPDATE, DELETE')", roles.Owner, limits).Scan(&ownerReads); err != nil || !ownerReads {
		t.Fatalf("the queue's owner cannot use %s: %v %v", limits, ownerReads, err)
	}
}

// The application's role enqueues without pause while up and then down
// run as the owner's member. Through up, not one enqueue fails: the
// runtime's tables are granted in the transaction that creates them, so no
// enqueue finds concurrency_limits before its grants. Through down, none
// fails for want of a privilege.
func TestApplicationRoleEnqueuesThroughUpAndDown(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	roles := testdb.ManagedRoles(t, url, s.Resolved.Schema)
	pool, err := pgxpool.New(ctx, roles.AppURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	client, err := compat.NewClient(compat.Pgx(pool), s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	var total atomic.Int64
	// hammer enqueues from 8 goroutines while run runs, and returns the
	// enqueues' errors. Half of them use the client made before the
	// migration, half a new client for every enqueue (an application
	// process that starts meanwhile reads the catalog afresh).
	hammer := func(phase string, run func() error) []error {
		stop := make(chan struct{})
		var mu sync.Mutex
		var errs []error
		var wg sync.WaitGroup
		total.Store(0)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					job := compat.Job{Class: "app.jobs.Email", Value: emailJob{to: fmt.Sprintf("%s-%d-%d", phase, w, i)}}
					c := client
					if w%2 == 1 {
						fresh, err := compat.NewClient(compat.Pgx(pool), s.Layout)
						if err != nil {
							t.Error(err)
							return
						}
						c = fresh
					}
					if _, err := c.Enqueue(ctx, job); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
					total.Add(1)
				}
			}()
		}
		runErr := run()
		close(stop)
		wg.Wait()
		if runErr != nil {
			t.Fatalf("%s: %v", phase, runErr)
		}
		t.Logf("%s: %d enqueues, %d failed", phase, total.Load(), len(errs))
		return errs
	}
	// Right after the runtime's tables are created, up waits for 40 more
	// enqueues: they must find the tables usable.
	afterRuntimeTables := func(ctx context.Context, st migrations.StepResult) {
		if !strings.HasPrefix(st.Name, "skip-metadata column") {
			return
		}
		for start := total.Load(); total.Load() < start+40; {
			time.Sleep(5 * time.Millisecond)
		}
	}
	for _, err := range hammer("up", func() error {
		_, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{BeforeStep: afterRuntimeTables})
		return err
	}) {
		t.Errorf("an enqueue of the application's role failed during up: %v", err)
	}
	for _, err := range hammer("down", func() error {
		_, err := migrations.Down(ctx, roles.MigratorURL, s.Layout, migrations.Options{})
		return err
	}) {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" {
			t.Errorf("an enqueue of the application's role lacked a privilege during down: %v", err)
		} else {
			// A client that read the overrides table before down dropped
			// it (42P01): the runtime's stale-schema recovery, not a
			// privilege.
			t.Logf("during down: %v", err)
		}
	}
}

// The files `sql --database` writes as the owner's member apply with
// golang-migrate as that member: the runtime's tables belong to the
// queue's owner, the application role enqueues and uses them, and down
// takes the layout back to legacy.
func TestFilesForAManagedServerApplyAsTheOwnersMember(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	roles := testdb.ManagedRoles(t, url, s.Resolved.Schema)
	app := newAppRuntime(t, roles.AppURL, s.Layout)
	files, err := migrations.FilesFor(ctx, roles.MigratorURL, s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	m := golangMigrate(t, roles.MigratorURL, files)
	if err := m.Up(); err != nil {
		t.Fatalf("golang-migrate up as the owner's member: %v", err)
	}
	app.enqueue("after golang-migrate up")
	app.migrated("after golang-migrate up")
	var owner string
	if err := testdb.Connect(t, url).QueryRow(ctx, "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = $1::regclass", s.Resolved.Table(layout.LimitsTable)).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	if owner != roles.Owner {
		t.Errorf("%s belongs to %s, not to the queue's owner %s", layout.LimitsTable, owner, roles.Owner)
	}
	if err := m.Down(); err != nil {
		t.Fatalf("golang-migrate down as the owner's member: %v", err)
	}
	st, err := migrations.Status(ctx, roles.MigratorURL, s.Layout)
	if err != nil || st.State != migrations.Legacy {
		t.Fatalf("status after golang-migrate down: %v, %+v", err, st)
	}
	app.enqueue("after golang-migrate down")
}

// A version table and runtime tables that an older version of the tool
// created as the migration's own role (not as the queue's owner) are used
// as they are: a stopped run resumes, a missing grant is repaired, and
// down drops them.
func TestTablesAnOlderRunMadeAsTheMemberAreUsedAsTheyAre(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	roles := testdb.ManagedRoles(t, url, s.Resolved.Schema)
	conn := testdb.Connect(t, url)
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if _, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{StopAfterStep: 1}); !errors.Is(err, migrations.ErrStopped) {
		t.Fatalf("up stopped after step 1: %v", err)
	}
	exec("ALTER TABLE " + s.Resolved.Table(layout.VersionTable) + " OWNER TO " + roles.Migrator)
	if _, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{}); err != nil {
		t.Fatalf("up resuming with the member's version table: %v", err)
	}
	limits := s.Resolved.Table(layout.LimitsTable)
	exec("ALTER TABLE " + limits + " OWNER TO " + roles.Migrator)
	exec("REVOKE ALL ON " + limits + " FROM " + roles.App)
	st, err := migrations.Status(ctx, roles.MigratorURL, s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if !contains(strings.Join(st.Drift, "\n"), roles.App, roles.Owner) {
		t.Fatalf("drift does not name the application's and the owner's missing grants: %q", st.Drift)
	}
	if _, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{}); err != nil {
		t.Fatalf("up repairing the grants: %v", err)
	}
	newAppRuntime(t, roles.AppURL, s.Layout).enqueue("after the repair")
	if _, err := migrations.Down(ctx, roles.MigratorURL, s.Layout, migrations.Options{}); err != nil {
		t.Fatalf("down: %v", err)
	}
}
