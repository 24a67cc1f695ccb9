package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
)

// TestAHostileNeighbourNeverRunsInARollingDeploy: the rolling deploy's
// commands (plan --expand, up --expand, complete, down --to-expanded, down,
// sql --expand), the expanded layout's enqueue-lock trigger and the new
// version's runtime on the version schema, on a database whose search path
// puts public, where another role planted shadowing functions and
// operators, before pg_catalog. No shadow ever runs, plan on the expanded
// layout speaks of no stopped run, and expand, complete, down to expanded
// and down give back every index exactly.
func TestAHostileNeighbourNeverRunsInARollingDeploy(t *testing.T) {
	db := plainJobsDB(t)
	shadows := testdb.PlantShadows(t, db)
	admin := testdb.Connect(t, db)
	ctx := t.Context()
	setDatabaseSearchPath(t, db, "public, pg_catalog")
	before := indexDefinitions(t, db)

	cli := func(url string, code int, args ...string) string {
		t.Helper()
		got, out, errOut := runCLI(t, append(args, "--database", url)...)
		if got != code {
			t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, out, errOut)
		}
		shadows.Check(t, strings.Join(args, " "))
		return out
	}
	state := func(url, want string) {
		t.Helper()
		out := cli(url, 0, "status")
		if !strings.Contains(out, "state:    "+want) {
			t.Fatalf("status: want state %s:\n%s", want, out)
		}
	}
	state(db, "legacy")
	cli(db, 0, "plan", "--expand")
	cli(db, 0, "up", "--expand")
	state(db, "expanded")
	dir := filepath.Join(t.TempDir(), "expand")
	cli(db, 0, "sql", "--expand", "--dir", dir)
	if files, err := os.ReadDir(dir); err != nil || len(files) == 0 {
		t.Fatalf("sql --expand wrote no file: %v", err)
	}

	// The old version's insert, as plain-jobs 0.37 writes it (its own
	// functions qualified here, so that only the trigger could meet a
	// shadow): the enqueue-lock trigger runs on the database's search path.
	oldInsert := `INSERT INTO plainjobs_jobrequest (created_at, uuid, job_class, parameters, priority, source, queue, retries, retry_attempt, unique_key, start_at)
VALUES (pg_catalog.now(), pg_catalog.gen_random_uuid(), $1, '{}', 0, '', 'default', 0, 0, $2, NULL)`
	// Its session is closed before complete, which refuses while the old
	// version is seen.
	oldVersion := func(what, key string, duplicate bool) {
		t.Helper()
		conn := testdb.Connect(t, db)
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, oldInsert, "app.Old", key); err != nil {
			t.Fatalf("%s: the old version's insert: %v", what, err)
		}
		shadows.Check(t, what+": the old version's insert (the enqueue-lock trigger)")
		if !duplicate {
			return
		}
		if _, err := conn.Exec(ctx, oldInsert, "app.Old", key); err == nil || !strings.Contains(err.Error(), "23505") {
			t.Fatalf("%s: the old version's duplicate: %v, want its 23505", what, err)
		}
		shadows.Check(t, what+": the old version's duplicate")
	}
	oldVersion("expanded", "acct-1", true)

	// The new version: its sessions put the version schema first.
	cfg, err := pgxpool.ParseConfig(db)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = "public_concurrency, public, pg_catalog"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	newInsert := strings.Replace(oldInsert, "unique_key", "concurrency_key", 1)
	if _, err := pool.Exec(ctx, newInsert, "app.New", "acct-2"); err != nil {
		t.Fatalf("the new version's insert through the view: %v", err)
	}
	shadows.Check(t, "the new version's insert through the view")
	expandedRuntime(t, pool)
	shadows.Check(t, "the runtime on the expanded layout")

	if out := cli(db, 0, "plan"); strings.Contains(out, "stopped") {
		t.Errorf("plan on an expanded layout speaks of a stopped run:\n%s", out)
	}
	cli(db, 0, "up")
	state(db, "migrated")
	cli(db, 0, "concurrency", "status")
	if _, err := pool.Exec(ctx, newInsert, "app.New", "acct-3"); err != nil {
		t.Fatalf("the new version's insert after complete: %v", err)
	}
	shadows.Check(t, "the new version's insert after complete")

	// Back: down to expanded, then down. Down refuses while the rows break
	// the old rule; clear the runtime's.
	if _, err := admin.Exec(ctx, "DELETE FROM public.plainjobs_jobrequest WHERE job_class OPERATOR(pg_catalog.~~) 'app.%'"); err != nil {
		t.Fatal(err)
	}
	shadows.Hits(t)
	cli(db, 0, "plan", "--down")
	cli(db, 0, "down", "--to-expanded")
	state(db, "expanded")
	oldVersion("after down --to-expanded (the trigger made again)", "acct-4", true)
	if _, err := admin.Exec(ctx, "DELETE FROM public.plainjobs_jobrequest WHERE job_class OPERATOR(pg_catalog.~~) 'app.%'"); err != nil {
		t.Fatal(err)
	}
	shadows.Hits(t)
	cli(db, 0, "down", "--drop-operator-data")
	state(db, "legacy")

	sameIndexes(t, "the rolling deploy and down", before, indexDefinitions(t, db))
}

// expandedRuntime runs compat's enqueue, batch and slot paths on the
// expanded layout, where the unique rule still stands: a limit of 1 admits
// one job per group and skips the next.
func expandedRuntime(t *testing.T, pool *pgxpool.Pool) {
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
	if err != nil || res.Inserted() || res.Skipped == nil {
		t.Fatalf("second enqueue at limit 1: %+v, %v; want skipped", res, err)
	}
	many, err := c.EnqueueMany(ctx, []compat.Job{job("app.Batch", "b", 1), job("app.Batch", "b", 1), job("app.Batch", "", 0)})
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	if !many[0].Inserted() || many[1].Inserted() || many[2].Inserted() {
		t.Fatalf("batch at limit 1, then limit 0: %+v", many)
	}
	slots, err := compat.NewSlots(compat.Pgx(pool), layout.PlainJobs(), compat.SlotsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease, ok, err := slots.Acquire(ctx, "app.Mail::acct-7", 1, "job-1", "worker-1", time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire: %v, %v", ok, err)
	}
	if sums, err := slots.Summaries(ctx); err != nil || len(sums) == 0 {
		t.Fatalf("summaries: %+v, %v", sums, err)
	}
	if err := slots.Release(ctx, lease); err != nil {
		t.Fatalf("release: %v", err)
	}
}
