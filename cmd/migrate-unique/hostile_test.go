package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
)

// indexDefinitions reads every index definition of the queue's tables
// under a pinned search_path (so that every schema but pg_catalog shows).
func indexDefinitions(t *testing.T, db string) map[string]string {
	t.Helper()
	conn := testdb.Connect(t, db)
	if _, err := conn.Exec(t.Context(), "SET search_path = pg_catalog, pg_temp"); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(t.Context(), `SELECT i.relname::text, pg_get_indexdef(i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = 'public' AND t.relname LIKE 'plainjobs\_%'`)
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]string{}
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		defs[name] = def
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return defs
}

// sameIndexes fails t for each index of before that after defines
// otherwise or lacks, and each index after adds.
func sameIndexes(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for name, def := range before {
		if after[name] != def {
			t.Errorf("index %s after %s:\n got %s\nwant %s", name, what, after[name], def)
		}
	}
	for name, def := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("index %s is new after %s: %s", name, what, def)
		}
	}
}

// setDatabaseSearchPath makes searchPath the search path of every new
// session of the database at db (ALTER DATABASE ... SET).
func setDatabaseSearchPath(t *testing.T, db, searchPath string) {
	t.Helper()
	admin := testdb.Connect(t, db)
	var dbname string
	if err := admin.QueryRow(t.Context(), "SELECT pg_catalog.current_database()").Scan(&dbname); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(t.Context(), "ALTER DATABASE "+pgx.Identifier{dbname}.Sanitize()+" SET search_path = "+searchPath); err != nil {
		t.Fatal(err)
	}
}

// onEachSearchPath runs f in a subtest per search path a hostile
// neighbour can exploit, each on a plain-jobs database of its own with the
// shadows planted in public: the default search path, on which the better
// matching shadows win, and one that puts public before pg_catalog, on which
// the exact copies win too.
func onEachSearchPath(t *testing.T, f func(t *testing.T, db string, shadows *testdb.Shadows)) {
	for _, searchPath := range []string{"", "public, pg_catalog"} {
		name := "default"
		if searchPath != "" {
			name = "public first"
		}
		t.Run(name, func(t *testing.T) {
			db := plainJobsDB(t)
			shadows := testdb.PlantShadows(t, db)
			if searchPath != "" {
				setDatabaseSearchPath(t, db, searchPath)
			}
			f(t, db, shadows)
		})
	}
}

// TestAHostileNeighbourNeverRuns runs every command of the CLI and the
// runtime's enqueue, batch, retry, slot and status paths on a database where
// another role planted shadowing functions and operators in public: with
// the default search path, and with the role's search path public first.
// No shadow ever runs, every command works, and up then down gives back
// every index exactly.
func TestAHostileNeighbourNeverRuns(t *testing.T) {
	onEachSearchPath(t, func(t *testing.T, db string, shadows *testdb.Shadows) {
		admin := testdb.Connect(t, db)
		ctx := t.Context()
		check := func(what string) {
			t.Helper()
			shadows.Check(t, what)
		}
		before := indexDefinitions(t, db)
		cli := func(code int, args ...string) string {
			t.Helper()
			got, out, errOut := runCLI(t, append(args, "--database", db)...)
			if got != code {
				t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, out, errOut)
			}
			check(strings.Join(args, " "))
			return out
		}
		cli(0, "status")
		cli(0, "plan")
		cli(0, "sql", "--dir", filepath.Join(t.TempDir(), "before"))
		cli(0, "up")
		cli(0, "status")
		cli(0, "plan", "--down")
		dir := filepath.Join(t.TempDir(), "after")
		cli(0, "sql", "--dir", dir)
		files, _ := os.ReadDir(dir)
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(dir, f.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "CREATE UNIQUE INDEX") && !strings.Contains(string(b), "OPERATOR(pg_catalog.=)") {
				t.Errorf("%s rebuilds the saved rule with bare operators:\n%s", f.Name(), b)
			}
		}

		// The runtime, on a pool whose sessions use the database's
		// search path.
		pool, err := pgxpool.New(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		runtimeOn(t, pool)
		check("the runtime")

		cli(0, "concurrency", "set", "app.Mail::acct-7", "--limit", "2", "--reason", "quota")
		cli(0, "concurrency", "status")
		cli(0, "concurrency", "status", "app.Mail::acct-7")
		cli(0, "concurrency", "pause", "app.Export", "--reason", "maintenance")
		cli(0, "concurrency", "resume", "app.Export")
		cli(0, "concurrency", "release", "app.Mail::acct-7", "0", "--force")
		cli(0, "concurrency", "set", "app.Mail::acct-7", "--clear")
		// Down refuses while the runtime's rows break the old rule; clear
		// what the runtime test enqueued.
		if _, err := admin.Exec(ctx, "DELETE FROM public.plainjobs_jobrequest WHERE job_class OPERATOR(pg_catalog.~~) 'app.%'"); err != nil {
			t.Fatal(err)
		}
		shadows.Hits(t)
		cli(0, "down", "--drop-operator-data")
		cli(0, "status")
		sameIndexes(t, "up and down", before, indexDefinitions(t, db))
	})
}

// runtimeOn runs compat's enqueue, batch, retry, slot and status paths
// and checks their results.
func runtimeOn(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := t.Context()
	c, err := compat.NewClient(compat.Pgx(pool), layout.PlainJobs())
	if err != nil {
		t.Fatal(err)
	}
	job := func(class, key string, limit int) compat.Job {
		return compat.Job{Class: class, Value: compat.Limit(key, limit)}
	}
	res, err := c.Enqueue(ctx, job("app.Mail", "acct-7", 1))
	if err != nil || !res.Inserted() {
		t.Fatalf("enqueue: %+v, %v", res, err)
	}
	res, err = c.Enqueue(ctx, job("app.Mail", "acct-7", 1))
	if err != nil || res.Inserted() || res.Skipped == nil || res.Skipped.Active != 1 {
		t.Fatalf("second enqueue at limit 1: %+v, %v; want skipped with 1 active", res, err)
	}
	res, err = c.Enqueue(ctx, job("app.Export", "", 2))
	if err != nil || !res.Inserted() {
		t.Fatalf("keyless enqueue: %+v, %v", res, err)
	}
	many, err := c.EnqueueMany(ctx, []compat.Job{job("app.Batch", "b", 2), job("app.Batch", "b", 2), job("app.Batch", "b", 2), job("app.Batch", "", 0)})
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	if !many[0].Inserted() || !many[1].Inserted() || many[2].Inserted() || many[3].Inserted() {
		t.Fatalf("batch at limit 2 then limit 0: %+v", many)
	}
	// A failed result to retry.
	var resultID int64
	if err := pool.QueryRow(ctx, `INSERT INTO public.plainjobs_jobresult (created_at, uuid, job_class, parameters, priority, source, queue, retries, retry_attempt,
  concurrency_key, started_at, job_request_uuid, job_process_uuid, ended_at, error, status)
VALUES (pg_catalog.now(), pg_catalog.gen_random_uuid(), 'app.Retry', '{}', 0, 'test', 'default', 3, 0, 'r-1', pg_catalog.now(), pg_catalog.gen_random_uuid(),
  pg_catalog.gen_random_uuid(), pg_catalog.now(), 'boom', 'ERRORED') RETURNING id`).Scan(&resultID); err != nil {
		t.Fatalf("seed a failed result: %v", err)
	}
	r, err := c.Retry(ctx, resultID, compat.RetryOptions{})
	if err != nil || !r.Inserted() {
		t.Fatalf("retry: %+v, %v", r, err)
	}
	if _, err := c.RetrySweep(ctx, compat.RetryOptions{AllClasses: true, BatchSize: 10}); err != nil {
		t.Fatalf("retry sweep: %v", err)
	}
	slots, err := compat.NewSlots(compat.Pgx(pool), layout.PlainJobs(), compat.SlotsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease, ok, err := slots.Acquire(ctx, "app.Mail::acct-7", 1, "job-1", "worker-1", time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire: %v, %v", ok, err)
	}
	if _, ok, err := slots.Acquire(ctx, "app.Mail::acct-7", 1, "job-2", "worker-1", time.Minute); err != nil || ok {
		t.Fatalf("second acquire at limit 1: %v, %v; want busy", ok, err)
	}
	if lease, err = slots.Extend(ctx, lease, time.Minute); err != nil {
		t.Fatalf("extend: %v", err)
	}
	if st, err := slots.Status(ctx, "app.Mail::acct-7"); err != nil || len(st.Slots) == 0 {
		t.Fatalf("status: %+v, %v", st, err)
	}
	if _, err := slots.StatusAll(ctx); err != nil {
		t.Fatalf("status of every group: %v", err)
	}
	if sums, err := slots.Summaries(ctx); err != nil || len(sums) == 0 || sums[len(sums)-1].Group != "app.Mail::acct-7" || sums[len(sums)-1].Active != 1 {
		t.Fatalf("summaries of every group: %+v, %v", sums, err)
	}
	if err := slots.Release(ctx, lease); err != nil {
		t.Fatalf("release: %v", err)
	}
	ov, err := compat.NewOverrides(compat.Pgx(pool), layout.PlainJobs())
	if err != nil {
		t.Fatal(err)
	}
	if err := ov.SetLimit(ctx, "app.Other", 3, "test"); err != nil {
		t.Fatalf("set limit: %v", err)
	}
	if _, ok, err := ov.Get(ctx, "app.Other"); err != nil || !ok {
		t.Fatalf("get limit: %v, %v", ok, err)
	}
	if _, err := ov.PauseClass(ctx, "app.Paused", "test"); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if _, err := ov.ClearLimit(ctx, "app.Other"); err != nil {
		t.Fatalf("clear limit: %v", err)
	}
}

// TestAReadOnlyTargetIsRefusedBeforeAnyChange: with
// default_transaction_read_only on (as on a hot standby), plan and plan
// --down exit 1 naming the setting, and up and down refuse with a finding
// of kind read_only before any change.
func TestAReadOnlyTargetIsRefusedBeforeAnyChange(t *testing.T) {
	db := plainJobsDB(t)
	admin := testdb.Connect(t, db)
	ctx := t.Context()
	var dbname string
	if err := admin.QueryRow(ctx, "SELECT current_database()").Scan(&dbname); err != nil {
		t.Fatal(err)
	}
	before := indexDefinitions(t, db)
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{dbname}.Sanitize()+" SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"plan"}, {"plan", "--down"}, {"up"}, {"down"}, {"plan", "--json"}} {
		code, out, errOut := runCLI(t, append(args, "--database", db)...)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
		}
		if !strings.Contains(out+errOut, "default_transaction_read_only") {
			t.Errorf("%s does not name default_transaction_read_only:\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), out, errOut)
		}
		if args[len(args)-1] == "--json" && !strings.Contains(out, `"kind": "read_only"`) && !strings.Contains(out, `"kind":"read_only"`) {
			t.Errorf("plan --json has no finding of kind read_only:\n%s", out)
		}
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{dbname}.Sanitize()+" RESET default_transaction_read_only"); err != nil {
		t.Fatal(err)
	}
	var version *string
	if err := admin.QueryRow(ctx, "SELECT to_regclass('public.migrate_unique_version')::text").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != nil {
		t.Errorf("the refused runs created %s", *version)
	}
	sameIndexes(t, "the refused runs", before, indexDefinitions(t, db))
	code, out, errOut := runCLI(t, "status", "--database", db)
	if code != 0 || !strings.Contains(out, "state:    legacy") {
		t.Errorf("status after the refusals: exit %d\n%s%s", code, out, errOut)
	}
}

// TestAUniqueRuleThatCannotReplayExactlyIsRefused: a unique rule whose
// predicate looks an operator up by name (NULLIF) cannot be rebuilt exactly
// on every search path, so plan and up refuse with a finding of kind
// saved_rule before any change.
func TestAUniqueRuleThatCannotReplayExactlyIsRefused(t *testing.T) {
	db := plainJobsDB(t)
	admin := testdb.Connect(t, db)
	ctx := t.Context()
	if _, err := admin.Exec(ctx, `DROP INDEX IF EXISTS plainjobs_jobrequest_unique_job_class_key;
CREATE UNIQUE INDEX nullif_rule ON plainjobs_jobrequest (job_class, unique_key) WHERE NULLIF(unique_key, '') IS NOT NULL AND retry_attempt = 0`); err != nil {
		t.Fatal(err)
	}
	before := indexDefinitions(t, db)
	for _, args := range [][]string{{"plan", "--json"}, {"up"}} {
		code, out, errOut := runCLI(t, append(args, "--database", db)...)
		if code != 1 || !strings.Contains(out+errOut, "nullif_rule") || !strings.Contains(out+errOut, "NULLIF") {
			t.Errorf("%s: exit %d, want 1 naming nullif_rule and NULLIF\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
		}
		if args[0] == "plan" && !strings.Contains(out, `"saved_rule"`) {
			t.Errorf("plan --json has no finding of kind saved_rule:\n%s", out)
		}
	}
	sameIndexes(t, "the refused run", before, indexDefinitions(t, db))
}
