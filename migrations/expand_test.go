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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/compat"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// enqueueSQL is, per legacy schema, an INSERT of one pending job naming the
// key column %s, with the class $1 and the key $2, the table unqualified
// (resolved through the session's search_path, as applications write it).
var enqueueSQL = map[string]string{
	"plainjobs": `INSERT INTO plainjobs_jobrequest (created_at, uuid, job_class, parameters, priority, source, queue, retries, retry_attempt, %s, start_at)
VALUES (now(), gen_random_uuid(), $1, '{}', 0, '', 'default', 0, 0, $2, NULL)`,
	"teamqueue":   `INSERT INTO "JobRequests" (kind, %s) VALUES ($1, $2)`,
	"singletable": `INSERT INTO jobs (job_type, %s) VALUES ($1, $2)`,
}

// selectSQL reads the key of the pending jobs of class $1 naming the key
// column %s.
var selectSQL = map[string]string{
	"plainjobs":   `SELECT count(*) FROM plainjobs_jobrequest WHERE job_class = $1 AND %[1]s = $2 AND %[1]s IS NOT NULL`,
	"teamqueue":   `SELECT count(*) FROM "JobRequests" WHERE kind = $1 AND %[1]s = $2 AND %[1]s IS NOT NULL`,
	"singletable": `SELECT count(*) FROM jobs WHERE job_type = $1 AND %[1]s = $2 AND %[1]s IS NOT NULL`,
}

// sessionOn connects with the given search_path and application_name.
func sessionOn(t *testing.T, url, app string, searchPath ...string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	var sp []string
	for _, s := range searchPath {
		sp = append(sp, layout.Ident(s))
	}
	cfg.RuntimeParams["search_path"] = strings.Join(sp, ", ")
	cfg.RuntimeParams["application_name"] = app
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// writer enqueues through conn with its key column name and checks that
// the old unique rule answers a duplicate with 23505 while it stands.
type writer struct {
	t      *testing.T
	s      legacy.Schema
	conn   *pgx.Conn
	column string
	n      int
}

// enqueueOne enqueues one job of a new group and reads it back.
func (w *writer) enqueueOne() {
	w.t.Helper()
	w.n++
	key := fmt.Sprintf("%s-%s-%d", w.conn.Config().RuntimeParams["application_name"], w.column, w.n)
	ctx := context.Background()
	if _, err := w.conn.Exec(ctx, fmt.Sprintf(enqueueSQL[w.s.Name], w.column), "rolling.deploy", key); err != nil {
		w.t.Fatalf("%s: enqueue naming %s: %v", w.conn.Config().RuntimeParams["application_name"], w.column, err)
	}
	var n int
	if err := w.conn.QueryRow(ctx, fmt.Sprintf(selectSQL[w.s.Name], w.column), "rolling.deploy", key).Scan(&n); err != nil || n != 1 {
		w.t.Fatalf("read back naming %s: %d rows, %v", w.column, n, err)
	}
}

func (w *writer) enqueue(unique bool) {
	w.t.Helper()
	w.n++
	key := fmt.Sprintf("%s-%s-%d", w.conn.Config().RuntimeParams["application_name"], w.column, w.n)
	ctx := context.Background()
	if _, err := w.conn.Exec(ctx, fmt.Sprintf(enqueueSQL[w.s.Name], w.column), "rolling.deploy", key); err != nil {
		w.t.Fatalf("%s: enqueue naming %s: %v", w.conn.Config().RuntimeParams["application_name"], w.column, err)
	}
	var n int
	if err := w.conn.QueryRow(ctx, fmt.Sprintf(selectSQL[w.s.Name], w.column), "rolling.deploy", key).Scan(&n); err != nil || n != 1 {
		w.t.Fatalf("read back naming %s: %d rows, %v", w.column, n, err)
	}
	_, err := w.conn.Exec(ctx, fmt.Sprintf(enqueueSQL[w.s.Name], w.column), "rolling.deploy", key)
	switch {
	case unique && sqlState(err) != "23505":
		w.t.Fatalf("a duplicate naming %s while the unique rule stands: %v, want 23505", w.column, err)
	case !unique && err != nil:
		w.t.Fatalf("a second job of a group naming %s after the cutover: %v", w.column, err)
	}
}

func TestExpandCompleteContractOnEveryLegacyLayout(t *testing.T) {
	ctx := context.Background()
	for _, s := range legacy.All {
		t.Run(s.Name, func(t *testing.T) {
			url := legacyDB(t, s)
			vs := migrations.DefaultVersionSchema(s.Resolved.Schema)
			before := takeSnapshot(t, url, s.Layout)
			var out strings.Builder
			rep, err := migrations.Up(ctx, url, s.Layout, migrations.Options{Expand: true, Out: &out})
			if err != nil {
				t.Fatalf("up --expand: %v\n%s", err, out.String())
			}
			if rep.Before != migrations.Legacy || rep.After != migrations.Expanded || len(rep.Saved) != 0 {
				t.Fatalf("up --expand: %s -> %s, saved %v; want legacy -> expanded, nothing saved\n%s", rep.Before, rep.After, rep.Saved, out.String())
			}
			// Only two moments: the skip-metadata column and the enqueue
			// lock's trigger.
			if rep.LongestLock > 0 && !strings.Contains(rep.LongestLockStep, "skip-metadata") && !strings.HasPrefix(rep.LongestLockStep, "enqueue lock") {
				t.Errorf("up --expand held an exclusive lock in step %q", rep.LongestLockStep)
			}
			st, err := migrations.Status(ctx, url, s.Layout)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != migrations.Expanded || st.VersionSchema != vs || !strings.Contains(st.Next, "search_path = "+layout.Ident(vs)) {
				t.Fatalf("status after expand: %s, version schema %q, next %q", st.State, st.VersionSchema, st.Next)
			}
			for _, ts := range st.Tables {
				if ts.KeyColumn != layout.LegacyKeyColumn {
					t.Fatalf("expand renamed %s's key column", ts.Table)
				}
			}
			mid := takeSnapshot(t, url, s.Layout)
			for tb, d := range before.digest {
				if mid.digest[tb] != d {
					t.Errorf("expand changed the rows of %s", tb)
				}
			}

			// The old version: its own SQL on its own search_path, the
			// unique rule answering as before. The new version's SQL names
			// concurrency_key through the version schema.
			old := &writer{t: t, s: s, conn: sessionOn(t, url, "plain-jobs 0.37", s.Resolved.Schema), column: layout.LegacyKeyColumn}
			neu := &writer{t: t, s: s, conn: sessionOn(t, url, "plain-jobs 0.38", vs, s.Resolved.Schema), column: layout.KeyColumn}
			old.enqueue(true)
			neu.enqueue(true)
			if s.Name == "teamqueue" {
				// ON CONFLICT infers the unique rule through the view.
				var ids []int64
				for range 2 {
					rows, err := neu.conn.Query(ctx, `INSERT INTO "JobRequests" (kind, concurrency_key) VALUES ('upsert', 'k') ON CONFLICT (kind, concurrency_key) DO NOTHING RETURNING id`)
					if err != nil {
						t.Fatal(err)
					}
					for rows.Next() {
						var id int64
						if err := rows.Scan(&id); err != nil {
							t.Fatal(err)
						}
						ids = append(ids, id)
					}
					if rows.Close(); rows.Err() != nil {
						t.Fatalf("INSERT ... ON CONFLICT through the view: %v", rows.Err())
					}
				}
				if len(ids) != 1 {
					t.Fatalf("INSERT ... ON CONFLICT DO NOTHING through the view twice returned %v, want one id", ids)
				}
			}

			again, err := migrations.Up(ctx, url, s.Layout, migrations.Options{Expand: true})
			if err != nil || again.After != migrations.Expanded || len(again.Steps) != 0 {
				t.Fatalf("up --expand again: %v, %+v", err, again)
			}

			// Complete refuses, before any change, while the old version's
			// session is there, and names it.
			_, err = migrations.Up(ctx, url, s.Layout, migrations.Options{})
			var pe *migrations.PreflightError
			if !errors.As(err, &pe) {
				t.Fatalf("complete with an old-version session: %v, want a refusal", err)
			}
			found := false
			for _, f := range pe.Findings {
				found = found || f.Fatal && f.Kind == "old_version_writing" && f.Object == fmt.Sprintf("pid %d", old.conn.PgConn().PID()) && contains(f.Message, `"plain-jobs 0.37"`, layout.LegacyKeyColumn)
				if f.Fatal && f.Object == fmt.Sprintf("pid %d", neu.conn.PgConn().PID()) {
					t.Errorf("complete counted the new version's session as the old one: %s", f.Message)
				}
			}
			if !found {
				t.Fatalf("the refusal does not name the old session (pid %d): %v", old.conn.PgConn().PID(), err)
			}
			if st, _ := migrations.Status(ctx, url, s.Layout); st.State != migrations.Expanded {
				t.Fatalf("the refused complete changed the state to %s", st.State)
			}
			// The old version stops; complete goes on.
			old.conn.Close(ctx)
			out.Reset()
			rep, err = migrations.Up(ctx, url, s.Layout, migrations.Options{Out: &out})
			if err != nil || rep.Before != migrations.Expanded || rep.After != migrations.Migrated || len(rep.Saved) != 1 {
				t.Fatalf("complete: %v, %+v\n%s", err, rep, out.String())
			}
			// The new version goes on through the views (bound to the
			// renamed column by number), its statements cached before.
			neu.enqueue(false)
			direct := &writer{t: t, s: s, conn: sessionOn(t, url, "direct", s.Resolved.Schema), column: layout.KeyColumn}
			direct.enqueue(false)
			st, err = migrations.Status(ctx, url, s.Layout)
			if err != nil || st.State != migrations.Migrated || st.VersionSchema != vs || !strings.Contains(st.Next, "up --contract") {
				t.Fatalf("status after complete: %v %+v", err, st)
			}

			rep, err = migrations.Up(ctx, url, s.Layout, migrations.Options{Contract: true})
			if err != nil || rep.After != migrations.Migrated {
				t.Fatalf("up --contract: %v %+v", err, rep)
			}
			// Its cached statements now resolve to the tables themselves.
			neu.enqueue(false)
			var n int
			if err := neu.conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", vs).Scan(&n); err != nil || n != 0 {
				t.Fatalf("the version schema is still there after contract: %d, %v", n, err)
			}
			if st, err := migrations.Status(ctx, url, s.Layout); err != nil || st.VersionSchema != "" || st.State != migrations.Migrated {
				t.Fatalf("status after contract: %v %+v", err, st)
			}
		})
	}
}

// TestDownFromExpandedRestoresTheLegacySchema: down from the expanded
// state drops what expand added, the version schema with it, and the
// layout is exactly as before.
func TestDownFromExpandedRestoresTheLegacySchema(t *testing.T) {
	ctx := context.Background()
	for _, s := range legacy.All {
		t.Run(s.Name, func(t *testing.T) {
			url := legacyDB(t, s)
			before := takeSnapshot(t, url, s.Layout)
			if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{Expand: true, VersionSchema: "v2 app"}); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			rep, err := migrations.Down(ctx, url, s.Layout, migrations.Options{Out: &out})
			if err != nil || rep.Before != migrations.Expanded || rep.After != migrations.Legacy {
				t.Fatalf("down from expanded: %v %+v\n%s", err, rep, out.String())
			}
			if d := before.diff(takeSnapshot(t, url, s.Layout)); d != "" {
				t.Fatalf("down from expanded left a difference:\n%s\n%s", d, out.String())
			}
			var n int
			if err := testdb.Connect(t, url).QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = 'v2 app'").Scan(&n); err != nil || n != 0 {
				t.Fatalf("the version schema is still there after down: %d, %v", n, err)
			}
		})
	}
}

// TestDownFromMigratedWithVersionSchema: down after complete rolls back to
// the legacy schema exactly, the version schema included; the views keep
// working until down drops them.
func TestDownFromMigratedWithVersionSchema(t *testing.T) {
	ctx := context.Background()
	s := legacy.TeamQueue
	url := legacyDB(t, s)
	before := takeSnapshot(t, url, s.Layout)
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{Expand: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep, err := migrations.Down(ctx, url, s.Layout, migrations.Options{Out: &out})
	if err != nil || rep.Before != migrations.Migrated || rep.After != migrations.Legacy {
		t.Fatalf("down: %v %+v\n%s", err, rep, out.String())
	}
	if d := before.diff(takeSnapshot(t, url, s.Layout)); d != "" {
		t.Fatalf("down left a difference:\n%s\n%s", d, out.String())
	}
}

// TestCompleteTellsCompatFromTheOldVersion: a session whose statements
// carry compat's marker is the new version even though they name
// unique_key; one named by --old-app-name is the old version whatever it
// ran; --force completes anyway.
func TestCompleteTellsCompatFromTheOldVersion(t *testing.T) {
	ctx := context.Background()
	s := legacy.SingleTable
	url := legacyDB(t, s)
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{Expand: true}); err != nil {
		t.Fatal(err)
	}
	compat := sessionOn(t, url, "new version", s.Resolved.Schema)
	if _, err := compat.Exec(ctx, layout.CompatMarker+" SELECT count(*) FROM jobs WHERE unique_key = $1", "x"); err != nil {
		t.Fatal(err)
	}
	other := sessionOn(t, url, "reporting", s.Resolved.Schema)
	if _, err := other.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	plan, err := migrations.PlanWith(ctx, url, s.Layout, migrations.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range plan.Findings {
		if f.Fatal {
			t.Fatalf("plan of complete refused with only compat and an unrelated session: %s", f)
		}
	}
	plan, err = migrations.PlanWith(ctx, url, s.Layout, migrations.Options{OldAppName: "reporting"})
	if err != nil {
		t.Fatal(err)
	}
	named := false
	for _, f := range plan.Findings {
		named = named || f.Fatal && f.Kind == "old_version_writing" && f.Object == fmt.Sprintf("pid %d", other.PgConn().PID()) && strings.Contains(f.Message, "--old-app-name")
	}
	if !named {
		t.Fatalf("--old-app-name did not name the session: %+v", plan.Findings)
	}
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{OldAppName: "reporting"}); err == nil {
		t.Fatal("complete went ahead with an --old-app-name session connected")
	}
	rep, err := migrations.Up(ctx, url, s.Layout, migrations.Options{OldAppName: "reporting", Force: true})
	if err != nil || rep.After != migrations.Migrated {
		t.Fatalf("complete --force: %v %+v", err, rep)
	}
}

// TestInterruptedExpandFinishes stops up --expand after every step in turn;
// a second up --expand finishes it (or down removes what it made: the
// layout is exactly as before), and status says where it stopped.
func TestInterruptedExpandFinishes(t *testing.T) {
	ctx := context.Background()
	s := legacy.TeamQueue
	url := legacyDB(t, s)
	plan, err := migrations.PlanWith(ctx, url, s.Layout, migrations.Options{Expand: true})
	if err != nil {
		t.Fatal(err)
	}
	before := takeSnapshot(t, url, s.Layout)
	for k := 1; k < len(plan.Steps); k++ {
		url := legacyDB(t, s)
		_, err := migrations.Up(ctx, url, s.Layout, migrations.Options{Expand: true, StopAfterStep: k})
		if !errors.Is(err, migrations.ErrStopped) {
			t.Fatalf("stop after step %d: %v", k, err)
		}
		st, err := migrations.Status(ctx, url, s.Layout)
		if err != nil {
			t.Fatal(err)
		}
		if k > 1 && (st.State != migrations.PartlyMigrated || !strings.Contains(st.Next, "up --expand again")) {
			t.Errorf("after step %d: status %s, next %q", k, st.State, st.Next)
		}
		if k%2 == 0 {
			// down removes what the stopped expand made.
			rep, err := migrations.Down(ctx, url, s.Layout, migrations.Options{})
			if err != nil || rep.After != migrations.Legacy {
				t.Fatalf("down after a stop after step %d: %v %+v", k, err, rep)
			}
			if d := before.diff(takeSnapshot(t, url, s.Layout)); d != "" {
				t.Fatalf("down after a stop of up --expand after step %d left a difference:\n%s", k, d)
			}
			continue
		}
		rep, err := migrations.Up(ctx, url, s.Layout, migrations.Options{Expand: true})
		if err != nil || rep.After != migrations.Expanded {
			t.Fatalf("up --expand after a stop after step %d: %v %+v", k, err, rep)
		}
	}
}

// TestPlanShowsBothPhases: plan on a legacy layout labels each step with
// its phase; plan --expand lists the version schema and no cutover.
func TestPlanShowsBothPhases(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	full, err := migrations.Plan(ctx, url, s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	phases := map[string]int{}
	for _, st := range full.Steps {
		phases[st.Phase]++
		if strings.HasPrefix(st.Name, "cutover") && st.Phase != "complete" {
			t.Errorf("the cutover's phase is %q", st.Phase)
		}
	}
	if phases["expand"] == 0 || phases["complete"] == 0 || phases[""] != 0 {
		t.Fatalf("plan phases %v", phases)
	}
	exp, err := migrations.PlanWith(ctx, url, s.Layout, migrations.Options{Expand: true})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range exp.Steps {
		names = append(names, st.Name)
		if st.Phase != "expand" || strings.HasPrefix(st.Name, "cutover") {
			t.Errorf("plan --expand step %q phase %q", st.Name, st.Phase)
		}
	}
	if !strings.Contains(strings.Join(names, "\n"), "version schema") || names[len(names)-1] != "record expanded" {
		t.Fatalf("plan --expand steps:\n%s", strings.Join(names, "\n"))
	}
}

// drainSetup migrates the team queue and backs up limit-3 groups: k1 and
// k2 hold three pending jobs each, k3 one; an operator's override gives k2
// limit 3.
func drainSetup(t *testing.T) (string, legacy.Schema, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	s := legacy.TeamQueue
	url := legacyDB(t, s)
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	conn := sessionOn(t, url, "workers", s.Resolved.Schema)
	if _, err := conn.Exec(ctx, `INSERT INTO "JobRequests" (kind, concurrency_key) SELECT 'drain.test', k FROM unnest(ARRAY['k1', 'k1', 'k1', 'k2', 'k2', 'k2', 'k3']) AS k;
INSERT INTO concurrency_limits (group_name, concurrency_limit, reason) VALUES ('drain.test::k2', 3, 'ops: three at a time')`); err != nil {
		t.Fatal(err)
	}
	return url, s, conn
}

func overrides(t *testing.T, conn *pgx.Conn) map[string]string {
	t.Helper()
	out := map[string]string{}
	var exists bool
	if err := conn.QueryRow(context.Background(), "SELECT to_regclass('concurrency_limits') IS NOT NULL").Scan(&exists); err != nil || !exists {
		return out
	}
	rows, err := conn.Query(context.Background(), "SELECT group_name, concurrency_limit || ' ' || reason FROM concurrency_limits")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var g, v string
		if err := rows.Scan(&g, &v); err != nil {
			t.Fatal(err)
		}
		out[g] = v
	}
	return out
}

// TestDownDrainRollsBackUnderTraffic: with limit-3 groups backed up, down
// --drain sets them to limit 1, waits while workers finish the extra jobs,
// rolls back, and puts the operator's override back.
func TestDownDrainRollsBackUnderTraffic(t *testing.T) {
	ctx := context.Background()
	url, s, conn := drainSetup(t)
	if _, err := migrations.Down(ctx, url, s.Layout, migrations.Options{}); !errors.As(err, new(*migrations.DuplicatesError)) {
		t.Fatalf("down without --drain: %v, want the duplicates refusal", err)
	}
	// Workers: once the drain has set its overrides, finish one job of
	// each backed-up group every 100ms, checking the limits as they go.
	workers := make(chan error, 1)
	go func() {
		w := sessionOn(t, url, "worker", s.Resolved.Schema)
		for {
			var left int
			if err := w.QueryRow(ctx, `SELECT count(*) FROM "JobRequests" WHERE kind = 'drain.test' AND concurrency_key IN ('k1', 'k2')`).Scan(&left); err != nil {
				workers <- err
				return
			}
			if left <= 2 {
				workers <- nil
				return
			}
			var limited int
			if err := w.QueryRow(ctx, `SELECT count(*) FROM concurrency_limits WHERE group_name IN ('drain.test::k1', 'drain.test::k2') AND concurrency_limit = 1`).Scan(&limited); err != nil {
				workers <- err
				return
			}
			if limited == 2 {
				// The last finish may let the rollback go on at once: stop
				// here rather than read the renamed column again.
				tag, err := w.Exec(ctx, `DELETE FROM "JobRequests" WHERE id IN (SELECT min(id) FROM "JobRequests" WHERE kind = 'drain.test' AND concurrency_key IN ('k1', 'k2') GROUP BY concurrency_key HAVING count(*) > 1)`)
				if err != nil {
					workers <- err
					return
				}
				if left-int(tag.RowsAffected()) <= 2 {
					workers <- nil
					return
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	var out strings.Builder
	rep, err := migrations.Down(ctx, url, s.Layout, migrations.Options{Drain: true, DrainTimeout: time.Minute, DrainPoll: 50 * time.Millisecond, Out: &out})
	if err != nil || rep.After != migrations.Legacy {
		t.Fatalf("down --drain: %v %+v\n%s", err, rep, out.String())
	}
	if err := <-workers; err != nil {
		t.Fatal(err)
	}
	if !contains(out.String(), "drain: 2 group(s) hold 4 more job(s)", "extra job(s) left", "drain: done in", "restore the limit overrides of the 2 group(s)") {
		t.Fatalf("down --drain's progress:\n%s", out.String())
	}
	if got := overrides(t, conn); len(got) != 1 || got["drain.test::k2"] != "3 ops: three at a time" {
		t.Fatalf("overrides after down --drain: %v, want only the operator's", got)
	}
}

// TestDownDrainLimitsGroupsThatGoOverWhileItWaits: while down --drain
// waits, a writer of the new version (compat, limit 3) fills new groups
// beyond the old unique rule; each scan of the drain limits them too,
// saying so, workers finish the extra jobs of every limited group, and the
// rollback ends legacy with the operator's override back and none of the
// drain's left.
func TestDownDrainLimitsGroupsThatGoOverWhileItWaits(t *testing.T) {
	ctx := context.Background()
	url, s, conn := drainSetup(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	client, err := compat.NewClient(compat.Pgx(pool), s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 10)
	stopWorker := make(chan struct{})
	var wg sync.WaitGroup
	var newGroups, limitedNew atomic.Int64
	// The writer: three jobs of each new group, until the drain has limited
	// two of the groups it made after the drain began.
	wg.Add(1)
	go func() {
		defer wg.Done()
		w := sessionOn(t, url, "writer", s.Resolved.Schema)
		for i := 0; ; i++ {
			for range 3 {
				if _, err := client.Enqueue(ctx, compat.Job{Class: "drain.test", Value: compat.Limit(fmt.Sprintf("n%d", i), 3)}); err != nil {
					errs <- fmt.Errorf("compat writer: %w", err)
					return
				}
			}
			newGroups.Add(1)
			var n int64
			if err := w.QueryRow(ctx, `SELECT count(*) FROM concurrency_limits WHERE group_name LIKE 'drain.test::n%' AND concurrency_limit = 1 AND reason LIKE 'migrate-unique down --drain%'`).Scan(&n); err != nil {
				errs <- err
				return
			}
			if limitedNew.Store(n); n >= 2 {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	// The workers: once a group is limited to 1, finish its oldest job
	// while it holds more than one, until down's first step.
	wg.Add(1)
	go func() {
		defer wg.Done()
		w := sessionOn(t, url, "worker", s.Resolved.Schema)
		for {
			select {
			case <-stopWorker:
				return
			case <-time.After(30 * time.Millisecond):
			}
			if _, err := w.Exec(ctx, `DELETE FROM "JobRequests" WHERE id IN (SELECT min(r.id) FROM "JobRequests" r JOIN concurrency_limits o ON o.group_name = r.kind || '::' || r.concurrency_key AND o.concurrency_limit = 1
WHERE r.kind = 'drain.test' GROUP BY r.concurrency_key HAVING count(*) > 1)`); err != nil {
				errs <- fmt.Errorf("worker: %w", err)
				return
			}
		}
	}()
	var out strings.Builder
	var once sync.Once
	rep, err := migrations.Down(ctx, url, s.Layout, migrations.Options{Drain: true, DrainTimeout: time.Minute, DrainPoll: 50 * time.Millisecond, Out: &out,
		BeforeStep: func(context.Context, migrations.StepResult) { once.Do(func() { close(stopWorker) }) }})
	once.Do(func() { close(stopWorker) })
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err != nil || rep.After != migrations.Legacy {
		t.Fatalf("down --drain while new groups go over the old rule: %v\n%s", err, out.String())
	}
	if limitedNew.Load() < 2 || !strings.Contains(out.String(), "more group(s) went over the old unique rule since the drain began; set them to limit 1 too") {
		t.Fatalf("the drain limited %d of the %d groups made while it waited; want 2 or more, and its progress saying so:\n%s", limitedNew.Load(), newGroups.Load(), out.String())
	}
	if got := overrides(t, conn); len(got) != 1 || got["drain.test::k2"] != "3 ops: three at a time" {
		t.Fatalf("overrides after down --drain: %v, want only the operator's", got)
	}
	t.Logf("%d new groups made while the drain waited, %d limited by it", newGroups.Load(), limitedNew.Load())
}

// TestDownDrainGivesUpAndRestores: nobody finishes the jobs: down --drain
// gives up after --drain-timeout, restores the overrides, and the layout
// stays migrated.
func TestDownDrainGivesUpAndRestores(t *testing.T) {
	ctx := context.Background()
	url, s, conn := drainSetup(t)
	before := overrides(t, conn)
	_, err := migrations.Down(ctx, url, s.Layout, migrations.Options{Drain: true, DrainTimeout: 300 * time.Millisecond, DrainPoll: 50 * time.Millisecond})
	var de *migrations.DrainError
	if !errors.As(err, &de) || len(de.Groups) != 2 || !strings.Contains(err.Error(), `key "k1": 3 jobs`) {
		t.Fatalf("down --drain with nobody working: %v", err)
	}
	if got := overrides(t, conn); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("overrides after giving up: %v, want %v", got, before)
	}
	if st, err := migrations.Status(ctx, url, s.Layout); err != nil || st.State != migrations.Migrated {
		t.Fatalf("status after giving up: %v %+v", err, st)
	}
	// Interrupted while waiting: restored too.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := migrations.Down(cctx, url, s.Layout, migrations.Options{Drain: true, DrainPoll: 50 * time.Millisecond}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("interrupted down --drain: %v", err)
	}
	if got := overrides(t, conn); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("overrides after an interrupt: %v, want %v", got, before)
	}
}

// TestDownToExpandedIsTheReverseOfComplete: down --to-expanded brings back
// the unique rule and unique_key and keeps what expand made, so that the
// old version and the new one (through the version schema) write side by
// side again; up completes again, and on a layout migrated in one run it
// makes the version schema.
func TestDownToExpandedIsTheReverseOfComplete(t *testing.T) {
	ctx := context.Background()
	s := legacy.PlainJobs
	url := legacyDB(t, s)
	vs := migrations.DefaultVersionSchema(s.Resolved.Schema)
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		neu := &writer{t: t, s: s, conn: sessionOn(t, url, fmt.Sprintf("new-%d", round), vs, s.Resolved.Schema), column: layout.KeyColumn}
		neu.enqueueOne()
		var out strings.Builder
		rep, err := migrations.Down(ctx, url, s.Layout, migrations.Options{ToExpanded: true, Out: &out})
		if err != nil || rep.Before != migrations.Migrated || rep.After != migrations.Expanded {
			t.Fatalf("round %d: down --to-expanded: %v %+v\n%s", round, err, rep, out.String())
		}
		old := &writer{t: t, s: s, conn: sessionOn(t, url, fmt.Sprintf("old-%d", round), s.Resolved.Schema), column: layout.LegacyKeyColumn}
		old.enqueue(true)
		neu.enqueue(true)
		st, err := migrations.Status(ctx, url, s.Layout)
		if err != nil || st.State != migrations.Expanded || st.VersionSchema != vs {
			t.Fatalf("round %d: status after down --to-expanded: %v %+v", round, err, st)
		}
		if rep, err := migrations.Down(ctx, url, s.Layout, migrations.Options{ToExpanded: true}); err != nil || rep.After != migrations.Expanded || len(rep.Steps) != 0 {
			t.Fatalf("round %d: down --to-expanded again: %v %+v", round, err, rep)
		}
		old.conn.Close(ctx)
		if rep, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); err != nil || rep.After != migrations.Migrated {
			t.Fatalf("round %d: complete again: %v %+v", round, err, rep)
		}
		neu.enqueueOne()
	}
}

// TestExpandedDriftIsRepairedByExpand: a view, a counting index and a
// view's grant lost after up --expand are drift: status lists them and
// says to run up --expand, which repairs them.
func TestExpandedDriftIsRepairedByExpand(t *testing.T) {
	ctx := context.Background()
	s := legacy.TeamQueue
	url := legacyDB(t, s)
	conn := testdb.Connect(t, url)
	role := fmt.Sprintf("drift_app_%d", time.Now().UnixNano()) // roles are the cluster's: one per run
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE ROLE %[1]s; GRANT SELECT, INSERT ON "Billing Queue"."JobRequests" TO %[1]s; GRANT USAGE ON SEQUENCE "Billing Queue"."JobRequests_id_seq" TO %[1]s`, role)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := testdb.Dial(context.Background(), url)
		if err != nil {
			t.Log(err)
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), fmt.Sprintf(`DROP OWNED BY %[1]s; DROP ROLE %[1]s`, role))
	})
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{Expand: true}); err != nil {
		t.Fatal(err)
	}
	vs := layout.Ident(migrations.DefaultVersionSchema(s.Resolved.Schema))
	if _, err := conn.Exec(ctx, `DROP VIEW `+vs+`.job_processes; DROP INDEX "Billing Queue"."JobRequests_concurrency_key_idx"; REVOKE INSERT ON `+vs+`."JobRequests" FROM `+role); err != nil {
		t.Fatal(err)
	}
	st, err := migrations.Status(ctx, url, s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	drift := strings.Join(st.Drift, "\n")
	if st.State != migrations.Expanded || st.Next != "run up --expand to repair the drift" || len(st.Drift) != 3 ||
		!contains(drift, `counting index "JobRequests_concurrency_key_idx"`, `view `+vs+`."job_processes" of "Billing Queue"."job_processes" is missing`, `GRANT INSERT ON TABLE `+vs+`."JobRequests" TO `+role) {
		t.Fatalf("status of a drifted expanded layout: %s, next %q, drift:\n%s", st.State, st.Next, drift)
	}
	if rep, err := migrations.Up(ctx, url, s.Layout, migrations.Options{Expand: true}); err != nil || rep.After != migrations.Expanded {
		t.Fatalf("up --expand repairing: %v %+v", err, rep)
	}
	if st, err := migrations.Status(ctx, url, s.Layout); err != nil || len(st.Drift) != 0 || st.State != migrations.Expanded {
		t.Fatalf("status after the repair: %v %+v", err, st)
	}
	app := sessionOn(t, url, "drift app", migrations.DefaultVersionSchema(s.Resolved.Schema), s.Resolved.Schema)
	if _, err := app.Exec(ctx, `SET ROLE `+role+`; INSERT INTO "JobRequests" (kind, concurrency_key) VALUES ('drift', 'k'); SELECT count(*) FROM "JobRequests" WHERE concurrency_key = 'k'`); err != nil {
		t.Fatalf("the application role through the repaired view: %v", err)
	}
}

// TestRollingDeployAsManagedRoles: on a managed server (the tables'
// owner NOLOGIN, the migration run by a member of it, the application a
// DML-only role), up --expand names the grant it needs to create the
// version schema, then makes it as the owner with the tables' grants
// mirrored; the application role writes through the views across
// complete, and the owner's member contracts and rolls back.
func TestRollingDeployAsManagedRoles(t *testing.T) {
	ctx := context.Background()
	s := legacy.TeamQueue
	url := legacyDB(t, s)
	roles := testdb.ManagedRoles(t, url, s.Resolved.Schema)
	vs := migrations.DefaultVersionSchema(s.Resolved.Schema)
	p, err := migrations.PlanWith(ctx, roles.MigratorURL, s.Layout, migrations.Options{Expand: true})
	if err != nil {
		t.Fatal(err)
	}
	refused := false
	for _, f := range p.Findings {
		refused = refused || f.Fatal && f.Kind == "schema_create" && strings.Contains(f.Message, "GRANT CREATE ON DATABASE")
	}
	if !refused {
		t.Fatalf("plan --expand as a role that cannot create schemas: %+v", p.Findings)
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testdb.Connect(t, url).Exec(ctx, "GRANT CREATE ON DATABASE "+layout.Ident(cfg.Database)+" TO "+layout.Ident(roles.Owner)); err != nil {
		t.Fatal(err)
	}
	if rep, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{Expand: true}); err != nil || rep.After != migrations.Expanded {
		t.Fatalf("up --expand as the owner's member: %v %+v", err, rep)
	}
	var owner string
	if err := testdb.Connect(t, url).QueryRow(ctx, "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = $1", vs).Scan(&owner); err != nil || owner != roles.Owner {
		t.Fatalf("the version schema belongs to %q (%v), want the tables' owner %q", owner, err, roles.Owner)
	}
	app := &writer{t: t, s: s, conn: sessionOn(t, roles.AppURL, "app", vs, s.Resolved.Schema), column: layout.KeyColumn}
	app.enqueue(true)
	if rep, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{}); err != nil || rep.After != migrations.Migrated {
		t.Fatalf("complete as the owner's member: %v %+v", err, rep)
	}
	app.enqueue(false)
	if rep, err := migrations.Up(ctx, roles.MigratorURL, s.Layout, migrations.Options{Contract: true}); err != nil || rep.After != migrations.Migrated {
		t.Fatalf("contract as the owner's member: %v %+v", err, rep)
	}
	app.enqueueOne()
}
