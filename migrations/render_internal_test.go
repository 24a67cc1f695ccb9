package migrations

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
)

// mustResolve resolves l or fails the test.
func mustResolve(t *testing.T, l layout.Layout) layout.Resolved {
	t.Helper()
	r, err := l.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The exact statement texts the engine sends for a layout whose names need
// quoting.
func TestStatementTextIsPinned(t *testing.T) {
	l := mustResolve(t, layout.Layout{Schema: "Billing Queue", ClassColumn: "kind", RequestsTable: "JobRequests", ProcessesTable: "job_processes"})
	cis := countingIndexes(l)
	if len(cis) != 2 {
		t.Fatalf("%d counting indexes, want 2", len(cis))
	}
	got, err := cis[0].createSQL(l, layout.LegacyKeyColumn)
	if err != nil {
		t.Fatal(err)
	}
	if want := `CREATE INDEX CONCURRENTLY "JobRequests_concurrency_key_idx" ON "Billing Queue"."JobRequests" ("kind", "unique_key");` + "\n"; got != want {
		t.Errorf("create:\n got %q\nwant %q", got, want)
	}
	got, err = dropIndexSQL(l, cis[1].name)
	if err != nil {
		t.Fatal(err)
	}
	if want := `DROP INDEX CONCURRENTLY IF EXISTS "Billing Queue"."job_processes_concurrency_key_idx";` + "\n"; got != want {
		t.Errorf("drop:\n got %q\nwant %q", got, want)
	}
	st := mustResolve(t, layout.Layout{JobsTable: "jobs", ClassColumn: "job_type", StateColumn: "status", ActiveStates: []string{"pending", "it's running"}})
	got, err = countingIndexes(st)[0].createSQL(st, layout.LegacyKeyColumn)
	if err != nil {
		t.Fatal(err)
	}
	if want := `CREATE INDEX CONCURRENTLY "jobs_concurrency_key_idx" ON "public"."jobs" ("job_type", "unique_key") WHERE "status" OPERATOR(pg_catalog.=) ANY ('{"pending","it''s running"}');` + "\n"; got != want {
		t.Errorf("partial create:\n got %q\nwant %q", got, want)
	}
	cut, err := render("cutover.up.sql.tmpl", newTmplData(l, 1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`PERFORM set_config('lock_timeout', '1500ms', true);`,
		`LOCK TABLE "Billing Queue"."JobRequests", "Billing Queue"."job_processes" IN ACCESS EXCLUSIVE MODE;`,
		`ARRAY['"Billing Queue"."JobRequests"', '"Billing Queue"."job_processes"']::regclass[]`,
		`UPDATE "Billing Queue"."migrate_unique_version" v SET saved = v.saved || coalesce((`,
	} {
		if !strings.Contains(cut, want) {
			t.Errorf("the cutover lacks %q:\n%s", want, cut)
		}
	}
}

func TestCountingIndexNamesFitPostgres(t *testing.T) {
	long := strings.Repeat("t", 63)
	a, b := countingIndexName(long), countingIndexName(long[:62]+"u")
	if len(a) > 63 || len(b) > 63 || a == b {
		t.Fatalf("names %q (%d) and %q (%d): want distinct, at most 63 bytes", a, len(a), b, len(b))
	}
	// A long name of multi-byte characters is never cut inside one.
	for _, table := range []string{"a" + strings.Repeat("é", 31), strings.Repeat("日", 21), "ab" + strings.Repeat("🙂", 15)} {
		if got := countingIndexName(table); len(got) > 63 || !utf8.ValidString(got) {
			t.Errorf("countingIndexName(%q) = %q (%d bytes): want valid UTF-8, at most 63 bytes", table, got, len(got))
		}
	}
	if got := countingIndexName("jobs"); got != "jobs_concurrency_key_idx" {
		t.Fatalf("short name %q", got)
	}
}

func TestBackoffIsJitteredAndBounded(t *testing.T) {
	for n := 1; n <= 12; n++ {
		d := min(100*time.Millisecond<<min(n-1, 6), 5*time.Second)
		seen := map[time.Duration]bool{}
		for range 200 {
			b := backoff(n)
			if b < d/2 || b > d {
				t.Fatalf("backoff(%d) = %s, want within [%s, %s]", n, b, d/2, d)
			}
			seen[b] = true
		}
		if len(seen) < 10 {
			t.Fatalf("backoff(%d) drew only %d distinct waits in 200: not jittered", n, len(seen))
		}
	}
}

func TestProgressRendering(t *testing.T) {
	p := Progress{Phase: "building index: scanning table", BlocksTotal: 200, BlocksDone: 50}
	p.Fraction = p.fraction()
	if got := progressBar(p.Fraction, 10) + " " + p.describe(); got != "[##        ]  25% building index: scanning table (50/200 blocks)" {
		t.Fatalf("got %q", got)
	}
	w := Progress{Phase: "waiting for old snapshots", LockersTotal: 3, LockersDone: 1,
		WaitingFor: &Blocker{PID: 4242, State: "idle in transaction", TransactionAge: 7 * time.Second, Query: "SELECT 1"}}
	want := `waiting for 2/3 older transactions): waiting for pid 4242, idle in transaction, in a transaction for 7s, last query "SELECT 1"; the build goes on when it ends (SELECT pg_terminate_backend(4242) ends it)`
	if got := w.describe(); !strings.Contains(got, want) {
		t.Fatalf("got %q", got)
	}
}

func TestLockWaitStartsShortAndGrowsToTheLockTimeout(t *testing.T) {
	r := &runner{opts: Options{LockTimeout: 2 * time.Second}.withDefaults()}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 2 * time.Second}
	for i, w := range want {
		if got := r.lockWait(i + 1); got != w {
			t.Errorf("lockWait(%d) = %s, want %s", i+1, got, w)
		}
	}
	if got := r.lockWait(100); got != 2*time.Second {
		t.Errorf("lockWait(100) = %s", got)
	}
}

// Down must know every table RuntimeDDL creates, or it would leave one
// behind (or drop one that holds operator data).
func TestRuntimeTablesCoverRuntimeDDL(t *testing.T) {
	l := mustResolve(t, layout.PlainJobs())
	known := map[string]bool{}
	for _, rt := range runtimeTables {
		known[l.Table(rt.name)] = true
	}
	for _, stmt := range l.RuntimeDDL() {
		rest, ok := strings.CutPrefix(stmt, "CREATE TABLE IF NOT EXISTS ")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, " (")
		if !known[name] {
			t.Errorf("RuntimeDDL creates %s, which runtimeTables does not list: add it with the rows that make it hold operator data", name)
		}
	}
}

// When the tables cannot be listed, the not-found message says so instead
// of claiming that the database has no candidate table.
func TestNotFoundSaysWhenCandidatesCannotBeListed(t *testing.T) {
	ctx := context.Background()
	conn := testdb.Connect(t, testdb.New(t))
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	missing := []string{`table "public"."plainjobs_jobrequest" does not exist`}
	nf := &NotFoundError{Missing: missing}
	nf.Candidates, nf.Missing, nf.listErr = findCandidates(ctx, conn, mustResolve(t, layout.PlainJobs()), true, missing)
	if nf.listErr == nil {
		t.Fatal("findCandidates on a closed connection reported no error")
	}
	if msg := nf.Error(); strings.Contains(msg, "no table of this database") || !strings.Contains(msg, "could not list the tables") {
		t.Fatalf("message hides the failure:\n%s", msg)
	}
}
