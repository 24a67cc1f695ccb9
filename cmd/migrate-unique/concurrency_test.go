package main

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/slots"
	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
)

// concurrencyTestDB returns a fresh database holding the runtime tables in
// schema public, and the slot API on it.
func concurrencyTestDB(t *testing.T) (string, *compat.Slots) {
	t.Helper()
	l, err := layout.Layout{Schema: "public", RequestsTable: "cli_test_requests"}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	ddl := l.RuntimeDDL()
	url := testdb.New(t, testdb.FromTemplate("cmd/concurrency/"+strings.Join(ddl, ";"), func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		for _, stmt := range ddl {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	}))
	s, err := compat.NewSlots(compat.Pgx(testdb.Connect(t, url)), l.Layout, compat.SlotsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return url, s
}

func TestConcurrencyCommands(t *testing.T) {
	t.Parallel()
	url, s := concurrencyTestDB(t)
	ctx := t.Context()
	const g = "Mailer::acct-1"
	var held []compat.Lease
	for _, job := range []string{"j1", "j2", "j3"} {
		l, ok, err := s.Acquire(ctx, g, 3, job, "host-a:41", time.Hour)
		if err != nil || !ok {
			t.Fatalf("acquire: %v %v", ok, err)
		}
		held = append(held, l)
	}

	code, out, errOut := runCLI(t, "concurrency", "set", g, "--limit", "1", "--reason", "smtp quota", "--database", url)
	if code != 0 || !strings.Contains(out, "group Mailer::acct-1: limit 1 (override); 2 holder(s) over the new limit finish their jobs") {
		t.Fatalf("set: %d %q %q", code, out, errOut)
	}
	// The flags may come after the group, too.
	code, out, errOut = runCLI(t, "concurrency", "status", "--database", url)
	if code != 0 {
		t.Fatalf("status: %d %q", code, errOut)
	}
	for _, want := range []string{
		"GROUP", "Mailer::acct-1  1 (override: smtp quota)  3           2           0",
		"0     held              j1   host-a:41",
		"1     held, over limit  j2",
		"2     held, over limit  j3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not show %q:\n%s", want, out)
		}
	}
	code, out, errOut = runCLI(t, "concurrency", "status", g, "--json", "--database", url)
	if code != 0 {
		t.Fatalf("status --json: %d %q", code, errOut)
	}
	var doc statusJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("status --json is not one JSON object: %v\n%s", err, out)
	}
	if len(doc.Groups) != 1 || *doc.Groups[0].Limit != 1 || doc.Groups[0].LimitSource != "override" || doc.Groups[0].SlotsHeld != 3 || doc.Groups[0].SlotsOverLimit != 2 || doc.Groups[0].Slots[2].JobID != "j3" {
		t.Fatalf("status --json: %+v", doc)
	}

	// release needs --force, then frees the slot and fences its holder.
	code, _, errOut = runCLI(t, "concurrency", "release", g, "2", "--database", url)
	if code != 2 || !strings.Contains(errOut, "without --force") {
		t.Fatalf("release without --force: %d %q", code, errOut)
	}
	code, out, errOut = runCLI(t, "concurrency", "release", g, "2", "--force", "--database", url)
	if code != 0 || !strings.Contains(out, "freed slot 2 of group Mailer::acct-1: job j3 on worker host-a:41") {
		t.Fatalf("release: %d %q %q", code, out, errOut)
	}
	if err := s.Release(ctx, held[2]); !errors.Is(err, compat.ErrLeaseLost) {
		t.Fatalf("the old holder's release after a forced release: %v, want ErrLeaseLost", err)
	}
	code, _, errOut = runCLI(t, "concurrency", "release", g, "9", "--force", "--database", url)
	if code != 1 || !strings.Contains(errOut, `group "Mailer::acct-1" has no slot 9`) {
		t.Fatalf("release of an unknown slot: %d %q", code, errOut)
	}

	code, out, _ = runCLI(t, "concurrency", "set", g, "--clear", "--database", url)
	if code != 0 || !strings.Contains(out, "cleared the override of group Mailer::acct-1") {
		t.Fatalf("clear: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "concurrency", "set", g, "--clear", "--database", url)
	if code != 0 || !strings.Contains(out, "had no override; nothing changed") {
		t.Fatalf("second clear: %d %q", code, out)
	}
	// A group with no job, slot or override yet needs --force (a typo
	// must not switch off nothing while the real group runs on).
	code, out, errOut = runCLI(t, "concurrency", "set", "Export", "--limit", "0", "--database", url)
	if code != 1 || out != "" || !strings.Contains(errOut, `group "Export" has no job, no slot and no override`) || !strings.Contains(errOut, "--force") {
		t.Fatalf("maintenance switch on an unknown group without --force: %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "concurrency", "set", "Export", "--limit", "0", "--force", "--database", url)
	if code != 0 || !strings.Contains(out, "the class's keyless jobs (group Export) are no longer admitted or started, its keyed groups (Export::KEY) go on: 'migrate-unique concurrency pause Export' stops the whole class") || !strings.Contains(errOut, "warning: group \"Export\" has no job") {
		t.Fatalf("maintenance switch: %d %q %q", code, out, errOut)
	}
	if _, ok, err := s.Acquire(ctx, "Export", 5, "x", "w", time.Minute); ok || err != nil {
		t.Fatalf("acquire under limit 0: %v %v, want busy", ok, err)
	}
}

func TestConcurrencyBadInput(t *testing.T) {
	t.Parallel()
	url, _ := concurrencyTestDB(t)
	empty := testdb.New(t)
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"concurrency"}, 2, "Usage: migrate-unique concurrency status|release|set|pause|resume"},
		{[]string{"concurrency", "frob"}, 2, `unknown subcommand "frob"`},
		{[]string{"concurrency", "set", "G", "--database", url}, 2, "give exactly one of --limit N and --clear"},
		{[]string{"concurrency", "set", "G", "--limit", "2", "--clear", "--database", url}, 2, "give exactly one of --limit N and --clear"},
		{[]string{"concurrency", "set", "G", "--limit", "-1", "--database", url}, 2, "--limit -1: a limit is 0 (block the group) or more"},
		{[]string{"concurrency", "set", "--limit", "2", "--database", url}, 2, "0 argument(s) given; usage: migrate-unique concurrency set GROUP"},
		{[]string{"concurrency", "set", "", "--limit", "2", "--database", url}, 2, "the group name is empty"},
		{[]string{"concurrency", "release", "G", "x", "--force", "--database", url}, 2, `slot "x": give a slot number from 0 to 2147483647`},
		{[]string{"concurrency", "status", "--database", empty}, 1, `the runtime tables (concurrency_limits, concurrency_slots, concurrency_reschedules) are missing in schema "public": the queue is not migrated there; run 'migrate-unique up' first, or pass the right --schema: ERROR: relation "public.concurrency_limits" does not exist`},
		{[]string{"concurrency", "status", "--database", "postgres://bob:s3cret@127.0.0.1:1/nope"}, 1, "connect to 127.0.0.1:1/nope"},
	}
	for _, tt := range tests {
		code, _, errOut := runCLI(t, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) || strings.Contains(errOut, "s3cret") || strings.Count(errOut, "migrate-unique up") > 1 {
			t.Errorf("%q: exit %d, stderr %q; want exit %d containing %q and no password", tt.args, code, errOut, tt.code, tt.want)
		}
	}
	// -h documents every flag of every subcommand.
	for sub, flags := range map[string][]string{
		"status":  {"-database", "-schema", "-json", "-requests-table", "-jobs-table", "-active-states"},
		"pause":   {"-database", "-schema", "-reason", "-json"},
		"resume":  {"-database", "-schema", "-json"},
		"release": {"-database", "-schema", "-force", "-json"},
		"set":     {"-database", "-schema", "-limit", "-reason", "-clear", "-force", "-json"},
	} {
		code, _, errOut := runCLI(t, "concurrency", sub, "-h")
		if code != 0 {
			t.Errorf("concurrency %s -h: exit %d", sub, code)
		}
		for _, f := range flags {
			if !strings.Contains(errOut, f) {
				t.Errorf("concurrency %s -h does not document %s:\n%s", sub, f, errOut)
			}
		}
	}
}

// TestBenchSlots runs the benchmark briefly: its JSON line must show the
// invariants held, and the scratch schema must be gone afterwards.
func TestBenchSlots(t *testing.T) {
	testdb.Heavy(t)
	url := testdb.New(t)
	code, out, errOut := runCLI(t, "bench", "slots", "--database", url, "--workers", "8", "--limit", "3", "--duration", "300ms", "--json")
	if code != 0 {
		t.Fatalf("bench slots: exit %d\n%s\n%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var res slots.Result
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last line is not the JSON object: %v\n%s", err, out)
	}
	if res.OverLimitObserved != 0 || res.StaleReleasesAccepted != 0 || res.AcquireReleasePerSecond <= 0 ||
		res.BaselineSingleWorker <= 0 || res.ObserverSamples == 0 || res.MaxUnexpiredObserved > 3 || res.Workers != 8 || res.Limit != 3 {
		t.Fatalf("figures %+v", res)
	}
	conn := testdb.Connect(t, url)
	var left int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'migrate_unique_bench_slots_%'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d scratch schemas left behind", left)
	}
	code, _, errOut = runCLI(t, "bench", "slots", "--database", url, "--workers", "0")
	if code != 2 || !strings.Contains(errOut, "--workers 0: want at least 1") {
		t.Fatalf("bad --workers: %d %q", code, errOut)
	}
}

// TestBenchSlotsWorkerError: when a worker fails, the command says why and
// stops its observer before it returns (no race on the figures, no query on
// a closed connection).
func TestBenchSlotsWorkerError(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	code, _, errOut := runCLI(t, "bench", "slots", "--database", url, "--workers", "2", "--limit", "2000000", "--duration", "200ms")
	if code != 1 || !strings.Contains(errOut, "worker:") || !strings.Contains(errOut, "at most 1048576 slots per group") {
		t.Fatalf("bench slots with a limit the slot API refuses: exit %d, stderr %q", code, errOut)
	}
}

// An operator's group name is checked before anything is written: a name
// no job can have is a usage error, a misspelt one (no job, slot or
// override) is refused without --force, and nothing changes either way.
// Whatever a group, key, reason, job or worker holds, status shows it
// escaped.
func TestConcurrencyOperatorInput(t *testing.T) {
	t.Parallel()
	url, s := concurrencyTestDB(t)
	ctx := t.Context()
	conn := testdb.Connect(t, url)
	// A queue table with a varchar(20) key and its counting index, holding
	// one job of class Mailer with key acct-1.
	if _, err := conn.Exec(ctx, `CREATE TABLE jobs (id bigserial PRIMARY KEY, job_class text NOT NULL, concurrency_key varchar(20) NOT NULL DEFAULT '');
CREATE INDEX jobs_concurrency_key_idx ON jobs (job_class, concurrency_key);
INSERT INTO jobs (job_class, concurrency_key) VALUES ('Mailer', 'acct-1')`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Acquire(ctx, "Evil\x1b[31m::k\u202e", 1, "job\x1b]0;owned\x07", "w\r\nFAKE LINE", time.Hour); err != nil {
		t.Fatal(err)
	}
	before := dbSnapshot(t, url)
	refused := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"set", "::", "--limit", "1"}, 2, "has an empty class before '::'"},
		{[]string{"set", "::k", "--limit", "1"}, 2, "has an empty class before '::'"},
		{[]string{"set", "Mailer::", "--limit", "1"}, 2, "has an empty key after '::'"},
		// Control characters are admitted (compat admits them): these
		// groups are only unknown.
		{[]string{"set", "Mailer\n::x", "--limit", "1"}, 1, `group "Mailer\n::x" has no job`},
		{[]string{"set", "Mailer::\x1b[2J", "--limit", "1"}, 1, `group "Mailer::\x1b[2J" has no job`},
		{[]string{"set", "Mailer::a\x00b", "--limit", "1"}, 2, `contains a NUL byte; PostgreSQL text cannot hold one`},
		{[]string{"set", "Mailer::\xff", "--limit", "1"}, 2, `is not valid UTF-8; PostgreSQL refuses such text`},
		{[]string{"set", strings.Repeat("x", 100_000), "--limit", "1"}, 2, "the group name is 100000 bytes long"},
		{[]string{"set", "Mailer::" + strings.Repeat("k", 21), "--limit", "1"}, 2, "is 21 characters long; the queue's key column holds at most 20"},
		{[]string{"set", "Mailer::acct-1", "--limit", "1", "--reason", "a\nb"}, 2, "--reason \"a\\nb\" contains a control character"},
		{[]string{"set", "Mailer::acct-1", "--limit", "99999999999"}, 2, "--limit 99999999999: at most 2147483647"},
		{[]string{"set", "Mailr", "--limit", "0"}, 1, `group "Mailr" has no job, no slot and no override in schema "public": is the name right?`},
		{[]string{"set", "Mailer::acct-2", "--limit", "0"}, 1, `group "Mailer::acct-2" has no job`},
		{[]string{"release", "G", "99999999999", "--force"}, 2, `slot "99999999999": give a slot number from 0 to 2147483647`},
		{[]string{"release", "G", "1.5", "--force"}, 2, `slot "1.5": give a slot number from 0 to 2147483647`},
		{[]string{"release", "::", "0", "--force"}, 2, "has an empty class"},
		{[]string{"status", "Mailer::"}, 2, "has an empty key after '::'"},
	}
	for _, c := range refused {
		args := append(append([]string{"concurrency"}, c.args...), "--database", url)
		code, out, errOut := runCLI(t, args...)
		if code != c.code || !strings.Contains(errOut, c.want) || strings.ContainsAny(out+errOut, "\x1b\r\u202e") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d saying %q, escaped", c.args, code, out, errOut, c.code, c.want)
		}
	}
	if after := dbSnapshot(t, url); after != before {
		t.Fatalf("a refused command changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// Known groups: by a job (class alone, or class and key), by a slot,
	// whatever their names hold: the operator addresses every group compat
	// admits, and sees it escaped.
	for _, g := range []string{"Mailer", "Mailer::acct-1", "Evil\x1b[31m::k\u202e"} {
		code, out, errOut := runCLI(t, "concurrency", "set", g, "--limit", "3", "--database", url)
		if code != 0 || !strings.Contains(out, "group "+escapeName(g)+": limit 3 (override)") || errOut != "" || strings.ContainsAny(out, "\x1b\u202e") {
			t.Errorf("set %q: exit %d, %q %q", g, code, out, errOut)
		}
	}
	// The limit-0 switch reaches a group whose key holds a newline, a tab
	// and an escape sequence; status names it on one line, in the form
	// bash's $'...' types back.
	odd := "Mailer::line\n\tnext\x1b[2J'\\"
	if _, _, err := s.Acquire(ctx, odd, 2, "j-odd", "w-odd", time.Hour); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "concurrency", "set", odd, "--limit", "0", "--database", url)
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "group "+escapeName(odd)+": limit 0 (override)") {
		t.Fatalf("set %q --limit 0: exit %d, %q %q", odd, code, out, errOut)
	}
	if st, err := s.Status(ctx, odd); err != nil || !st.Override || st.Limit != 0 {
		t.Fatalf("after set --limit 0 the group's status is %+v, %v", st, err)
	}
	code, out, errOut = runCLI(t, "concurrency", "status", odd, "--database", url)
	if code != 0 || !strings.Contains(out, "\n"+escapeName(odd)+"\n") {
		t.Fatalf("status %q: exit %d, %q %q", odd, code, out, errOut)
	}
	typed, err := exec.Command("bash", "-c", "printf %s "+shellArg(odd)).Output()
	if err != nil || string(typed) != odd {
		t.Fatalf("bash reads %s as %q (%v), want %q", shellArg(odd), typed, err, odd)
	}
	if typed, err := exec.Command("bash", "-c", "printf %s $'"+escapeName("Evil\x1b[31m::k\u202e")+"'").Output(); err != nil || string(typed) != "Evil\x1b[31m::k\u202e" {
		t.Fatalf("bash reads the shown name back as %q (%v)", typed, err)
	}
	for _, args := range [][]string{{"status"}, {"status", "--json"}} {
		code, out, errOut := runCLI(t, append(append([]string{"concurrency"}, args...), "--database", url)...)
		if code != 0 || strings.ContainsAny(out+errOut, "\x1b\r\u202e\x07") || !strings.Contains(out, `Evil\u001b[31m::k\u202e`) {
			t.Errorf("%v: exit %d, output not escaped:\n%s%s", args, code, out, errOut)
		}
		if args[len(args)-1] == "--json" {
			var doc struct {
				Groups []compat.GroupStatus `json:"groups"`
			}
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Errorf("escaped JSON is not valid: %v\n%s", err, out)
			}
			found := false
			for _, g := range doc.Groups {
				found = found || g.Group == "Evil\x1b[31m::k\u202e"
			}
			if !found {
				t.Errorf("escaped JSON does not decode to the group's real name: %+v", doc.Groups)
			}
		}
	}
}

// Through a PgBouncer that refuses the search_path startup parameter
// (1.18, transaction mode), the operator commands work: each unit of their
// work runs in one transaction that pins the search_path first. Each
// command's effect is read back directly.
func TestConcurrencyCommandsThroughPgBouncer(t *testing.T) {
	t.Parallel()
	url, s := concurrencyTestDB(t)
	pooled := testdb.PgBouncer(t, url)
	ctx := t.Context()
	if _, _, err := s.Acquire(ctx, "Mailer::a", 2, "j1", "w1", time.Hour); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, append(args, "--database", pooled)...)
		if code != 0 {
			t.Fatalf("%v through the pooler: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}
	cli("concurrency", "status")
	cli("concurrency", "set", "Mailer::a", "--limit", "1", "--reason", "quota")
	if ov, ok, err := s.Overrides().Get(ctx, "Mailer::a"); err != nil || !ok || ov.Limit != 1 || ov.Reason != "quota" {
		t.Errorf("set through the pooler: %+v %v %v; want limit 1, reason quota", ov, ok, err)
	}
	if out := cli("concurrency", "status", "Mailer::a", "--json"); !strings.Contains(out, `"override":true`) || !strings.Contains(out, `"slots_held":1`) {
		t.Errorf("status through the pooler: %s; want the override and one slot held", out)
	}
	cli("concurrency", "pause", "Mailer", "--reason", "quota")
	if ps, err := s.Overrides().Pauses(ctx); err != nil || len(ps) != 1 || ps[0].Class != "Mailer" {
		t.Errorf("pause through the pooler: %+v %v", ps, err)
	}
	cli("concurrency", "resume", "Mailer")
	if ps, err := s.Overrides().Pauses(ctx); err != nil || len(ps) != 0 {
		t.Errorf("resume through the pooler: %+v %v", ps, err)
	}
	cli("concurrency", "release", "Mailer::a", "0", "--force")
	if st, err := s.Status(ctx, "Mailer::a"); err != nil || st.Active != 0 {
		t.Errorf("release through the pooler: %+v %v; want no slot held", st, err)
	}
	cli("concurrency", "set", "Mailer::a", "--clear")
	if _, ok, err := s.Overrides().Get(ctx, "Mailer::a"); err != nil || ok {
		t.Errorf("set --clear through the pooler: override still there (%v)", err)
	}
}
