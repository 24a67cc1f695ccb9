package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
)

// TestAHostileNeighbourNeverRunsThroughAPooler: through PgBouncer in
// transaction mode, which refuses the search_path startup parameter the
// tool pins (1.18; later versions unless search_path is in
// track_extra_parameters), the read-only commands (status, plan, plan
// --expand, sql --database) run in the legacy, expanded and migrated
// states, and then every concurrency command (set, set --clear, status,
// pause, resume, release) and the dashboard's pages and a switch run on the
// migrated queue, on a database where another role planted shadowing
// functions and operators in public, with the default search path and with
// one that puts public before pg_catalog. No shadow ever runs, every
// command gives its usual exit code, and each switch is seen in the
// database.
func TestAHostileNeighbourNeverRunsThroughAPooler(t *testing.T) {
	onEachSearchPath(t, func(t *testing.T, db string, shadows *testdb.Shadows) {
		pooled := testdb.PgBouncer(t, db)
		cli := func(url string, code int, args ...string) string {
			t.Helper()
			got, out, errOut := runCLI(t, append(args, "--database", url)...)
			if got != code {
				t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, out, errOut)
			}
			shadows.Check(t, strings.Join(args, " ")+" through the pooler")
			return out
		}
		readOnly := func(state string) {
			t.Helper()
			out := cli(pooled, 0, "status")
			if !strings.Contains(out, "state:    "+state) || !strings.Contains(out, "pooler:") {
				t.Fatalf("status through the pooler: want state %s and a pooler line:\n%s", state, out)
			}
			cli(pooled, 0, "status", "--json")
			// plan lists the pooler as a finding (up would refuse it).
			if out := cli(pooled, 1, "plan"); !strings.Contains(out, "pooler") {
				t.Fatalf("plan through the pooler names no pooler:\n%s", out)
			}
			cli(pooled, 1, "plan", "--down")
			dir := filepath.Join(t.TempDir(), state)
			cli(pooled, 0, "sql", "--dir", dir)
			if files, err := os.ReadDir(dir); err != nil || len(files) == 0 {
				t.Fatalf("sql --database through the pooler wrote no file: %v", err)
			}
		}
		readOnly("legacy")
		cli(pooled, 1, "plan", "--expand")
		cli(db, 0, "up", "--expand")
		shadows.Hits(t) // the direct runs are another test's subject
		readOnly("expanded")
		cli(db, 0, "up")
		shadows.Hits(t)
		readOnly("migrated")
		rec := &testdb.Recorder{}
		concurrencyThroughAPooler(t, pgurl.WithTracer(t.Context(), rec), db, pooled, func(what string) { shadows.Check(t, what+" through the pooler") })
		requireQualified(t, rec)
	})
}

// requireQualified fails t for every statement rec recorded that names a
// function, operator or type unqualified (testdb.Recorder.Unqualified):
// each must resolve in pg_catalog on any search path, pinned or not.
func requireQualified(t *testing.T, rec *testdb.Recorder) {
	t.Helper()
	if n := len(rec.Statements()); n < 20 {
		t.Fatalf("only %d distinct statements recorded: the recorder saw little of the commands", n)
	}
	for _, u := range rec.Unqualified() {
		t.Errorf("a statement the concurrency commands or the dashboard sent: %s", u)
	}
}

// concurrencyThroughAPooler runs every concurrency command and the
// dashboard through pooled (a transaction-mode pooler in front of db, a
// migrated plain-jobs queue), checking each one's effect on the database
// directly and calling check after each.
func concurrencyThroughAPooler(t *testing.T, runCtx context.Context, db, pooled string, check func(what string)) {
	t.Helper()
	ctx := t.Context()
	direct := compat.Pgx(testdb.Connect(t, db))
	slots, err := compat.NewSlots(direct, layout.PlainJobs(), compat.SlotsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	client, err := compat.NewClient(direct, layout.PlainJobs())
	if err != nil {
		t.Fatal(err)
	}
	// acct-7 holds a slot; acct-9 has only a queued job, so that set
	// without --force reads the queue's tables to know it.
	if _, ok, err := slots.Acquire(ctx, "app.Mail::acct-7", 2, "job-7", "worker-1", time.Hour); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if res, err := client.Enqueue(ctx, compat.Job{Class: "app.Mail", Value: compat.Limit("acct-9", 5)}); err != nil || !res.Inserted() {
		t.Fatalf("enqueue: %+v %v", res, err)
	}
	check("the setup")
	cli := func(code int, args ...string) string {
		t.Helper()
		got, out, errOut := runCLIContext(runCtx, append(args, "--database", pooled)...)
		if got != code {
			t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, out, errOut)
		}
		check(strings.Join(args, " "))
		return out
	}
	override := func(group string, wantLimit int, wantReason string) {
		t.Helper()
		ov, ok, err := slots.Overrides().Get(ctx, group)
		switch {
		case err != nil:
			t.Fatal(err)
		case wantLimit < 0 && ok:
			t.Fatalf("group %s has an override %+v, want none", group, ov)
		case wantLimit >= 0 && (!ok || ov.Limit != wantLimit || ov.Reason != wantReason):
			t.Fatalf("group %s: override %+v (%v), want limit %d reason %q", group, ov, ok, wantLimit, wantReason)
		}
	}
	paused := func(class string) bool {
		t.Helper()
		pauses, err := slots.Overrides().Pauses(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pauses {
			if p.Class == class {
				return true
			}
		}
		return false
	}

	cli(0, "concurrency", "set", "app.Mail::acct-9", "--limit", "2", "--reason", "quota")
	override("app.Mail::acct-9", 2, "quota")
	cli(1, "concurrency", "set", "app.Mail::acct-404", "--limit", "2")
	override("app.Mail::acct-404", -1, "")
	if out := cli(0, "concurrency", "set", "app.Mail::acct-7", "--limit", "1", "--reason", "smtp"); !strings.Contains(out, "limit 1 (override)") {
		t.Errorf("set through the pooler says: %s", out)
	}
	override("app.Mail::acct-7", 1, "smtp")
	var st statusJSON
	if err := json.Unmarshal([]byte(cli(0, "concurrency", "status", "app.Mail::acct-7", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if g := st.Groups; len(g) != 1 || g[0].Limit == nil || *g[0].Limit != 1 || !g[0].Override || g[0].SlotsHeld != 1 || g[0].Running == nil {
		t.Errorf("status of app.Mail::acct-7 through the pooler: %+v; want limit 1 (override), 1 slot held, jobs counted", g)
	}
	if out := cli(0, "concurrency", "status"); !strings.Contains(out, "app.Mail::acct-9") {
		t.Errorf("status through the pooler lists no app.Mail::acct-9:\n%s", out)
	}
	cli(0, "concurrency", "pause", "app.Export", "--reason", "maintenance")
	if !paused("app.Export") {
		t.Error("pause through the pooler: app.Export is not paused")
	}
	cli(0, "concurrency", "resume", "app.Export")
	if paused("app.Export") {
		t.Error("resume through the pooler: app.Export is still paused")
	}
	cli(0, "concurrency", "release", "app.Mail::acct-7", "0", "--force")
	if g, err := slots.Status(ctx, "app.Mail::acct-7"); err != nil || g.Active != 0 {
		t.Errorf("release through the pooler: %d slot(s) still held (%v)", g.Active, err)
	}
	cli(0, "concurrency", "set", "app.Mail::acct-7", "--clear")
	override("app.Mail::acct-7", -1, "")

	// The dashboard: its pages, and a switch.
	base, login, _ := startServeContext(t, runCtx, "--database", pooled)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	get := func(path string) string {
		t.Helper()
		resp, err := c.Get(path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s through the pooler: %d\n%s", path, resp.StatusCode, body.String())
		}
		check("the dashboard's GET " + path)
		return body.String()
	}
	get(login)
	if body := get(base + "/api/groups"); !strings.Contains(body, "app.Mail::acct-9") {
		t.Errorf("/api/groups through the pooler lists no app.Mail::acct-9: %s", body)
	}
	get(base + "/")
	page := get(base + "/group?name=" + url.QueryEscape("app.Mail::acct-9"))
	_, after, _ := strings.Cut(page, `name="csrf" value="`)
	csrf, _, _ := strings.Cut(after, `"`)
	form := url.Values{"step": {"apply"}, "action": {"set"}, "group": {"app.Mail::acct-9"}, "limit": {"3"}, "reason": {"dash"}, "csrf": {csrf}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/switch", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the dashboard's set through the pooler: %d\n%s", resp.StatusCode, body.String())
	}
	check("the dashboard's set")
	override("app.Mail::acct-9", 3, "dash")
}
