package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/internal/version"
	"github.com/migrate-unique/migrate-unique/migrations"
)

// jsonLines decodes every line of s as a progress event.
func jsonLines(t *testing.T, s string) []progressEvent {
	t.Helper()
	var out []progressEvent
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if line == "" {
			continue
		}
		var ev progressEvent
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("stderr line is not a JSON event: %v\n%s", err, line)
		}
		out = append(out, ev)
	}
	return out
}

// TestMigrationCommandsJSON runs status, plan, up and down with --json
// through the built binary and checks each schema field by field: a whole
// round trip with a refused down (duplicates), a down that keeps operator
// data, a second down that keeps it again, and --drop-operator-data.
func TestMigrationCommandsJSON(t *testing.T) {
	db := withPassword(t, plainJobsDB(t))
	wantLayout := layoutJSON{Tables: []string{`"public"."plainjobs_jobrequest"`, `"public"."plainjobs_jobprocess"`, `"public"."plainjobs_jobresult"`}, Flags: ""}
	checkHead := func(what, command, database string, l layoutJSON) {
		t.Helper()
		if command != what || !strings.HasPrefix(database, "127.0.0.1:") && !strings.Contains(database, "/mu_") || strings.Contains(database, "Sup3rS3cretPw") ||
			strings.Join(l.Tables, ",") != strings.Join(wantLayout.Tables, ",") || l.Flags != "" {
			t.Errorf("%s: command %q database %q layout %+v", what, command, database, l)
		}
	}

	var st statusJSONResult
	mustJSON(t, 0, &st, "status", "--json", "--database", db)
	checkHead("status", st.Command, st.Database, st.Layout)
	if st.State != "legacy" || st.ToolVersion != version.Version || st.RecordedVersion != "" || st.RecordedAt != nil || st.Direction != "" ||
		st.Stopped != "" || st.Next != "" || len(st.Drift) != 0 || st.RunLock != nil || st.Pooler != nil || len(st.Tables) != 3 ||
		st.Tables[0].Table != wantLayout.Tables[0] || st.Tables[0].KeyColumn != "unique_key" || st.Tables[0].Rows <= 0 || len(st.Saved) != 0 || len(st.InvalidIndexes) != 0 || len(st.Kept) != 0 {
		t.Fatalf("status --json on a legacy queue: %+v", st)
	}

	var plan planJSON
	mustJSON(t, 0, &plan, "plan", "--json", "--database", db)
	checkHead("plan", plan.Command, plan.Database, plan.Layout)
	if plan.Direction != "up" || plan.State != "legacy" || plan.WouldRefuse || len(plan.Findings) != 1 || plan.Findings[0].Fatal || !strings.Contains(plan.Findings[0].Message, "will be dropped at the cutover and saved for down") {
		t.Fatalf("plan --json: %+v", plan)
	}
	if len(plan.Steps) < 8 {
		t.Fatalf("plan --json has %d steps: %+v", len(plan.Steps), plan.Steps)
	}
	byKind := map[string]planStepJSON{}
	for i, s := range plan.Steps {
		if s.Number != i+1 || s.Name == "" || s.Lock == "" || s.Table == "" || (s.Skip == "") == (s.SQL == "") {
			t.Errorf("plan step %d: %+v", i+1, s)
		}
		switch {
		case s.Execution == "concurrent" && s.Skip == "" && byKind["build"].Name == "":
			byKind["build"] = s
		case s.Skip != "" && byKind["skip"].Name == "":
			byKind["skip"] = s
		case strings.HasPrefix(s.Name, "cutover"):
			byKind["cutover"] = s
		case s.Name == "analyze":
			byKind["analyze"] = s
		}
	}
	if s := byKind["build"]; !strings.HasPrefix(s.SQL, "CREATE INDEX CONCURRENTLY") || s.Rows <= 0 || s.Bytes <= 0 || s.RowsUnknown || s.Lock != "SHARE UPDATE EXCLUSIVE (writers go on)" {
		t.Errorf("plan's first index build: %+v", s)
	}
	if s := byKind["skip"]; s.Name == "" || s.SQL != "" {
		t.Errorf("plan's first skipped step: %+v", s)
	}
	if s := byKind["cutover"]; s.Execution != "transaction" || s.Lock != "ACCESS EXCLUSIVE (short)" || !strings.Contains(s.SQL, "LOCK TABLE") {
		t.Errorf("plan's cutover: %+v", s)
	}
	if s := byKind["analyze"]; s.Execution != "statement" || !strings.Contains(s.SQL, "\nANALYZE ") {
		t.Errorf("plan's analyze: %+v", s)
	}

	var up runJSON
	errOut := mustJSON(t, 0, &up, "up", "--json", "--database", db)
	checkHead("up", up.Command, up.Database, up.Layout)
	if !up.OK || up.Error != "" || up.Before != "legacy" || up.After != "migrated" || up.DurationMS <= 0 || up.LongestLockMS <= 0 ||
		!strings.HasPrefix(up.LongestLockStep, "cutover") || len(up.Findings) != 1 || len(up.Steps) != len(plan.Steps) || len(up.Saved) != 1 || len(up.Kept) != 0 || len(up.Duplicates) != 0 {
		t.Fatalf("up --json: %+v", up)
	}
	if sv := up.Saved[0]; sv.Table != "public.plainjobs_jobrequest" || sv.Index != "plainjobs_jobrequest_unique_job_class_key" || !strings.Contains(sv.Rebuild, "concurrency_key") {
		t.Errorf("up --json saved: %+v", sv)
	}
	for i, s := range up.Steps {
		if s.Number != i+1 || s.Name != plan.Steps[i].Name || (s.Skipped == "") != (s.Attempts == 1) || s.DurationMS < 0 {
			t.Errorf("up step %d: %+v (planned %+v)", i+1, s, plan.Steps[i])
		}
	}
	events := jsonLines(t, errOut)
	var stepEvents int
	for _, ev := range events {
		if ev.Event == "step" && ev.Step != nil {
			stepEvents++
			if *ev.Step != up.Steps[ev.Step.Number-1] {
				t.Errorf("step event %+v differs from the report's %+v", *ev.Step, up.Steps[ev.Step.Number-1])
			}
		}
	}
	if stepEvents != len(up.Steps) {
		t.Errorf("up --json printed %d step events on stderr, want %d:\n%s", stepEvents, len(up.Steps), errOut)
	}

	st = statusJSONResult{}
	mustJSON(t, 0, &st, "status", "--json", "--database", db)
	if st.State != "migrated" || st.RecordedVersion != version.Version || st.RecordedAt == nil || len(st.Saved) != 1 || st.Tables[0].KeyColumn != "concurrency_key" {
		t.Fatalf("status --json after up: %+v", st)
	}

	// Duplicates under the old rule: down refuses, as JSON too.
	conn := testdb.Connect(t, db)
	if _, err := conn.Exec(t.Context(), `INSERT INTO plainjobs_jobrequest (created_at, uuid, job_class, source, concurrency_key, priority, queue, retries, retry_attempt)
SELECT now(), gen_random_uuid(), 'json.Dup', '', 'k-1', 0, 'default', 0, 0 FROM generate_series(1, 3)`); err != nil {
		t.Fatal(err)
	}
	var downPlan planJSON
	mustJSON(t, 1, &downPlan, "plan", "--down", "--json", "--database", db)
	if last := downPlan.Findings[len(downPlan.Findings)-1]; downPlan.Direction != "down" || !downPlan.WouldRefuse || !last.Fatal || last.Kind != "duplicates" ||
		!strings.Contains(last.Message, `class "json.Dup", key "k-1": 3 rows`) || last.Action == "" || len(downPlan.Steps) == 0 {
		t.Fatalf("plan --down --json with duplicates: %+v", downPlan)
	}
	refusedPlan := downPlan
	// The text lists the same steps after the refusal, and never says
	// that down has nothing to do.
	planCode, planOut, _ := runBin(t, "plan", "--down", "--summary", "--database", db)
	refusal := strings.Index(planOut, `class "json.Dup", key "k-1": 3 rows`)
	firstStep := strings.Index(planOut, "step 1: "+downPlan.Steps[0].Name)
	if planCode != 1 || refusal < 0 || firstStep < refusal || strings.Contains(planOut, "nothing to do") ||
		!strings.HasSuffix(planOut, "\nverdict: down would refuse (1 fatal finding above) and change nothing; exit 1\n") ||
		!strings.Contains(planOut, fmt.Sprintf("step %d: %s", len(downPlan.Steps), downPlan.Steps[len(downPlan.Steps)-1].Name)) {
		t.Fatalf("plan --down --summary with duplicates: exit %d\n%s", planCode, planOut)
	}
	var refused runJSON
	mustJSON(t, 1, &refused, "down", "--json", "--database", db)
	if refused.OK || !strings.Contains(refused.Error, "down refused") || len(refused.Duplicates) != 1 || refused.Before != "" || len(refused.Steps) != 0 {
		t.Fatalf("down --json refused: %+v", refused)
	}
	if d := refused.Duplicates[0]; d.Class != "json.Dup" || d.Key != "k-1" || d.Count != 3 || d.Index != "plainjobs_jobrequest_unique_job_class_key" {
		t.Errorf("down --json duplicate: %+v", d)
	}
	if _, err := conn.Exec(t.Context(), `DELETE FROM plainjobs_jobrequest WHERE job_class = 'json.Dup'`); err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{{"concurrency", "set", "json.Export", "--limit", "0", "--force"}, {"concurrency", "pause", "json.Charge"}} {
		if code, out, errOut := runBin(t, append(args, "--database", db)...); code != 0 {
			t.Fatalf("%v: %d %s %s", args, code, out, errOut)
		}
	}
	downPlan = planJSON{}
	mustJSON(t, 0, &downPlan, "plan", "--down", "--json", "--database", db)
	if downPlan.Direction != "down" || downPlan.WouldRefuse || downPlan.State != "migrated" {
		t.Fatalf("plan --down --json: %+v", downPlan)
	}
	var down runJSON
	mustJSON(t, 0, &down, "down", "--json", "--database", db)
	if len(down.Steps) != len(downPlan.Steps) || len(down.Steps) != len(refusedPlan.Steps) {
		t.Fatalf("down ran %d steps, plan --down planned %d (%d while it refused)", len(down.Steps), len(downPlan.Steps), len(refusedPlan.Steps))
	}
	for i, s := range refusedPlan.Steps {
		if s.Name != down.Steps[i].Name {
			t.Errorf("plan --down with duplicates planned step %d %q, down ran %q", i+1, s.Name, down.Steps[i].Name)
		}
	}
	for i, s := range down.Steps {
		if p := downPlan.Steps[i]; p.Name != s.Name || p.Number != s.Number || p.Skip != "" || p.SQL == "" {
			t.Errorf("down step %d %+v, planned %+v", i+1, s, p)
		}
	}
	if !down.OK || down.Before != "migrated" || down.After != "legacy" || len(down.Saved) != 1 || len(down.Kept) != 1 {
		t.Fatalf("down --json: %+v", down)
	}
	for _, s := range down.Steps {
		if s.Skipped != "" {
			t.Errorf("down lists a step that does not apply: %+v", s)
		}
	}
	if k := down.Kept[0]; k.Table != `"public"."concurrency_limits"` || k.Column != "" || k.Rows != 2 || !strings.Contains(k.Why, "(1 of them pauses)") || !strings.Contains(k.Remove, "down --drop-operator-data") {
		t.Errorf("down --json kept: %+v", k)
	}
	code, out, errOut := runBin(t, "concurrency", "status", "--database", db)
	if code != 1 || !strings.Contains(errOut, "the queue was rolled back with 'down', which kept them because they hold operator data") {
		t.Errorf("concurrency status after down: %d %q %q", code, out, errOut)
	}
	st = statusJSONResult{}
	mustJSON(t, 0, &st, "status", "--json", "--database", db)
	if st.State != "legacy" || len(st.Kept) != 1 || st.Kept[0] != down.Kept[0] || !strings.Contains(st.Next, "down --drop-operator-data") {
		t.Errorf("status --json after a down that kept data: %+v", st)
	}
	var again runJSON
	mustJSON(t, 0, &again, "down", "--json", "--database", db)
	if !again.OK || again.Before != "legacy" || again.After != "legacy" || len(again.Steps) != 1 || len(again.Kept) != 1 || again.Kept[0].Rows != 2 {
		t.Fatalf("a second down --json: %+v", again)
	}
	var dropPlan planJSON
	mustJSON(t, 0, &dropPlan, "plan", "--down", "--drop-operator-data", "--json", "--database", db)
	if len(dropPlan.Steps) != 1 || !strings.Contains(dropPlan.Steps[0].Name, "--drop-operator-data") || strings.Contains(dropPlan.Steps[0].SQL, "NOT EXISTS") {
		t.Fatalf("plan --down --drop-operator-data --json: %+v", dropPlan)
	}
	if code, _, errOut := runBin(t, "plan", "--drop-operator-data", "--database", db); code != 2 || !strings.Contains(errOut, "plan --down --drop-operator-data") {
		t.Errorf("plan --drop-operator-data without --down: %d %q", code, errOut)
	}
	var dropped runJSON
	mustJSON(t, 0, &dropped, "down", "--drop-operator-data", "--json", "--database", db)
	if !dropped.OK || len(dropped.Steps) != 1 || !strings.Contains(dropped.Steps[0].Name, "--drop-operator-data") || len(dropped.Kept) != 0 {
		t.Fatalf("down --drop-operator-data --json: %+v", dropped)
	}
	var left int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_class WHERE relname LIKE 'concurrency\_%' OR relname = 'migrate_unique_version'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("after down --drop-operator-data %d runtime tables are left (%v)", left, err)
	}
	code, out, _ = runBin(t, "down", "--database", db)
	if code != 0 || !strings.Contains(out, "not migrated: nothing to roll back") {
		t.Errorf("down with nothing left: %d %q", code, out)
	}
}

// TestUpAndDownPrintEachStepOnceOffATerminal: without a terminal each step
// is one line.
func TestUpAndDownPrintEachStepOnceOffATerminal(t *testing.T) {
	db := plainJobsDB(t)
	for _, cmd := range []string{"up", "down"} {
		code, out, errOut := runBin(t, cmd, "--database", db)
		if code != 0 {
			t.Fatalf("%s: %d\n%s%s", cmd, code, out, errOut)
		}
		for n := 1; n <= 3; n++ {
			if c := strings.Count(out, fmt.Sprintf("step %d/", n)); c != 1 {
				t.Errorf("%s prints step %d %d times:\n%s", cmd, n, c, out)
			}
		}
		if strings.Contains(out, "(TRUE)") || strings.Contains(out, "not built by up") {
			t.Errorf("%s prints noise:\n%s", cmd, out)
		}
	}
}

// holdReader opens a transaction that read a queue table and waits until
// it is older than age; the returned func commits it.
func holdReader(t *testing.T, db string, age time.Duration) (pid int, done func()) {
	t.Helper()
	ctx := t.Context()
	conn := testdb.Connect(t, db)
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid() FROM plainjobs_jobrequest LIMIT 1").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	watch := testdb.Connect(t, db)
	for {
		var old bool
		if err := watch.QueryRow(ctx, "SELECT xact_start < now() - make_interval(secs => $2) FROM pg_stat_activity WHERE pid = $1", pid, age.Seconds()).Scan(&old); err != nil {
			t.Fatal(err)
		}
		if old {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return pid, func() { _ = tx.Commit(context.Background()) }
}

// TestPlanPredictsUp: plan takes up's preflight flags and runs its
// preflight: with a reader in a transaction longer than --long-transaction,
// plan exits 1 exactly as up does, and 0 with the default threshold.
func TestPlanPredictsUp(t *testing.T) {
	db := plainJobsDB(t)
	pid, done := holdReader(t, db, 1500*time.Millisecond)
	defer done()
	code, out, _ := runBin(t, "plan", "--database", db, "--long-transaction", "1s", "--lock-timeout", "3s", "--max-attempts", "2")
	if code != 1 || !strings.Contains(out, fmt.Sprintf("refused: session pid %d is idle in a transaction", pid)) {
		t.Fatalf("plan --long-transaction 1s with an older reader: exit %d\n%s", code, out)
	}
	var plan planJSON
	mustJSON(t, 1, &plan, "plan", "--json", "--database", db, "--long-transaction", "1s")
	if last := plan.Findings[len(plan.Findings)-1]; !plan.WouldRefuse || !last.Fatal || last.Kind != "long_transaction" || !strings.Contains(last.Message, fmt.Sprintf("pid %d", pid)) {
		t.Fatalf("plan --json with an older reader: %+v", plan)
	}
	if code, out, errOut := runBin(t, "up", "--database", db, "--long-transaction", "1s"); code != 1 || !strings.Contains(errOut, fmt.Sprintf("session pid %d is idle in a transaction", pid)) {
		t.Fatalf("up --long-transaction 1s: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := runBin(t, "plan", "--database", db, "--summary"); code != 0 || !regexp.MustCompile(`(?m)^step \d+: cutover: .*: ACCESS EXCLUSIVE \(short\)$`).MatchString(out) || strings.Contains(out, "sql:") {
		t.Fatalf("plan --summary with the default threshold: exit %d\n%s", code, out)
	}
	done()
	if code, out, _ := runBin(t, "plan", "--database", db, "--long-transaction", "1s"); code != 0 {
		t.Fatalf("plan --long-transaction 1s once the reader is gone: exit %d\n%s", code, out)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestProgressNamesWhatABuildWaitsFor: while a CONCURRENTLY build waits
// for an older snapshot, up's progress names that session (pid, state,
// transaction age, query), in text and in --json's progress events; the
// build finishes once the session ends.
func TestProgressNamesWhatABuildWaitsFor(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", asJSON), func(t *testing.T) {
			db := plainJobsDB(t)
			progressEvery = 100 * time.Millisecond
			defer func() { progressEvery = 0 }()
			pid, done := holdReader(t, db, 0)
			defer done()
			var out, errOut syncBuffer
			args := []string{"up", "--database", db}
			if asJSON {
				args = append(args, "--json")
			}
			exit := make(chan int, 1)
			go func() { exit <- run(context.Background(), &env{stdout: &out, stderr: &errOut}, args) }()
			text := fmt.Sprintf("waiting for pid %d, idle in transaction, in a transaction for ", pid)
			deadline := time.Now().Add(time.Minute)
			for {
				if asJSON {
					found := false
					for _, ev := range jsonLines(t, errOut.String()) {
						if p := ev.Progress; ev.Event == "progress" && p != nil && p.WaitingFor != nil && p.WaitingFor.PID == pid &&
							p.WaitingFor.State == "idle in transaction" && strings.Contains(p.WaitingFor.Query, "pg_backend_pid()") &&
							p.WaitingFor.TransactionAge > 0 && strings.HasPrefix(p.Phase, "waiting") && strings.Contains(p.Step, "index") {
							found = true
						}
					}
					if found {
						break
					}
				} else if strings.Contains(out.String(), text) && strings.Contains(out.String(), "pg_terminate_backend") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no progress names pid %d:\nstdout:\n%s\nstderr:\n%s", pid, out.String(), errOut.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			done()
			if code := <-exit; code != 0 {
				t.Fatalf("up: exit %d\n%s%s", code, out.String(), errOut.String())
			}
			if asJSON {
				var rep runJSON
				if err := json.Unmarshal([]byte(out.String()), &rep); err != nil || !rep.OK || rep.After != string(migrations.Migrated) {
					t.Fatalf("up --json: %v %+v", err, rep)
				}
			}
		})
	}
}

// TestPlanSaysWhenATableWasNeverAnalysed: a table the planner has no
// estimate for shows its size and "row count unknown", never "~0 rows".
func TestPlanSaysWhenATableWasNeverAnalysed(t *testing.T) {
	db := plainJobsDB(t)
	conn := testdb.Connect(t, db)
	if _, err := conn.Exec(t.Context(), `CREATE SCHEMA fresh;
CREATE TABLE fresh.plainjobs_jobrequest (LIKE public.plainjobs_jobrequest INCLUDING ALL);
CREATE TABLE fresh.plainjobs_jobprocess (LIKE public.plainjobs_jobprocess INCLUDING ALL);
CREATE TABLE fresh.plainjobs_jobresult (LIKE public.plainjobs_jobresult INCLUDING ALL);
INSERT INTO fresh.plainjobs_jobrequest SELECT * FROM public.plainjobs_jobrequest LIMIT 10`); err != nil {
		t.Fatal(err)
	}
	var plan planJSON
	mustJSON(t, 0, &plan, "plan", "--schema", "fresh", "--json", "--database", db)
	if s := plan.Steps[1]; !s.RowsUnknown || s.Rows != 0 || s.Bytes <= 0 {
		t.Fatalf("plan --json step 2 on a never-analysed table: %+v", s)
	}
	code, out, _ := runBin(t, "plan", "--schema", "fresh", "--summary", "--database", db)
	if code != 0 || !strings.Contains(out, "row count unknown: never analysed") || strings.Contains(out, "~0 rows") {
		t.Fatalf("plan --summary on never-analysed tables: %d\n%s", code, out)
	}
	// The closing verdict counts the steps that run (not the skipped ones).
	run := 0
	for _, s := range plan.Steps {
		if s.Skip == "" {
			run++
		}
	}
	if want := fmt.Sprintf("\nverdict: up would go ahead: %d steps to run; exit 0\n", run); !strings.HasSuffix(out, want) {
		t.Errorf("plan --summary ends without the verdict %q:\n%s", want, out)
	}
}

// TestStatusSaysWhenATableWasNeverAnalysed: status agrees with plan on a
// table with no estimate: "row count unknown", rows_unknown in JSON,
// never "~0 rows".
func TestStatusSaysWhenATableWasNeverAnalysed(t *testing.T) {
	db := plainJobsDB(t)
	conn := testdb.Connect(t, db)
	if _, err := conn.Exec(t.Context(), `CREATE SCHEMA fresh;
CREATE TABLE fresh.plainjobs_jobrequest (LIKE public.plainjobs_jobrequest INCLUDING ALL);
CREATE TABLE fresh.plainjobs_jobprocess (LIKE public.plainjobs_jobprocess INCLUDING ALL);
CREATE TABLE fresh.plainjobs_jobresult (LIKE public.plainjobs_jobresult INCLUDING ALL);
INSERT INTO fresh.plainjobs_jobrequest SELECT * FROM public.plainjobs_jobrequest LIMIT 10`); err != nil {
		t.Fatal(err)
	}
	var st statusJSONResult
	mustJSON(t, 0, &st, "status", "--schema", "fresh", "--json", "--database", db)
	var plan planJSON
	mustJSON(t, 0, &plan, "plan", "--schema", "fresh", "--json", "--database", db)
	if len(st.Tables) != 3 {
		t.Fatalf("status --json tables: %+v", st.Tables)
	}
	for _, tb := range st.Tables {
		if !tb.RowsUnknown || tb.Rows != 0 {
			t.Errorf("status --json on a never-analysed table: %+v", tb)
		}
		for _, s := range plan.Steps {
			if s.Table == tb.Table && !s.RowsUnknown {
				t.Errorf("plan says step %q on %s knows its rows, status says it does not", s.Name, tb.Table)
			}
		}
	}
	code, out, _ := runBin(t, "status", "--schema", "fresh", "--database", db)
	if code != 0 || strings.Count(out, "row count unknown: never analysed") != 3 || strings.Contains(out, "~0 rows") {
		t.Fatalf("status on never-analysed tables: %d\n%s", code, out)
	}
	st = statusJSONResult{}
	mustJSON(t, 0, &st, "status", "--json", "--database", db)
	for _, tb := range st.Tables {
		if tb.RowsUnknown {
			t.Errorf("status --json on an analysed table: %+v", tb)
		}
	}
}
