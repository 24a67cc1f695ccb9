package main

import (
	"context"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
)

// TestRollingDeployCommands runs the phases of a rolling deploy through the
// built command: plan --expand (JSON phases), up --expand, status (text
// and JSON: expanded, version_schema), complete refused while an
// old-version session is connected (exit 1, its pid named) and done with
// --force, up --contract, and the flags' usage errors.
func TestRollingDeployCommands(t *testing.T) {
	ctx := context.Background()
	db := plainJobsDB(t)

	var plan planJSON
	mustJSON(t, 0, &plan, "plan", "--json", "--expand", "--database", db)
	if plan.State != "legacy" || plan.WouldRefuse || len(plan.Steps) == 0 || plan.Steps[len(plan.Steps)-1].Name != "record expanded" {
		t.Fatalf("plan --expand --json: %+v", plan)
	}
	sawViews := false
	for _, s := range plan.Steps {
		if s.Phase != "expand" || strings.HasPrefix(s.Name, "cutover") {
			t.Errorf("plan --expand step %q has phase %q", s.Name, s.Phase)
		}
		sawViews = sawViews || strings.Contains(s.SQL, `CREATE OR REPLACE VIEW "public_concurrency"."plainjobs_jobrequest"`) && strings.Contains(s.SQL, `"unique_key" AS "concurrency_key"`)
	}
	if !sawViews {
		t.Fatalf("plan --expand shows no view: %+v", plan.Steps)
	}
	var full planJSON
	mustJSON(t, 0, &full, "plan", "--json", "--database", db)
	phases := map[string]bool{}
	for _, s := range full.Steps {
		phases[s.Phase] = true
	}
	if !phases["expand"] || !phases["complete"] {
		t.Fatalf("plan --json phases: %v", phases)
	}
	code, out, errOut := runCLI(t, "plan", "--database", db)
	if code != 0 || !strings.Contains(out, "phase: complete (after it the old version's statements naming unique_key fail") {
		t.Fatalf("plan text: exit %d\n%s", code, out)
	}
	// The verdict names the run as it is typed.
	code, out, _ = runCLI(t, "plan", "--expand", "--summary", "--database", db)
	if code != 0 || !strings.Contains(out, "\nverdict: up --expand would go ahead: ") {
		t.Fatalf("plan --expand text: exit %d\n%s", code, out)
	}

	code, out, errOut = runCLI(t, "up", "--expand", "--database", db)
	if code != 0 || !strings.Contains(out, "legacy -> expanded") {
		t.Fatalf("up --expand: exit %d\n%s\n%s", code, out, errOut)
	}
	var st statusJSONResult
	mustJSON(t, 0, &st, "status", "--json", "--database", db)
	if st.State != "expanded" || st.VersionSchema == nil || *st.VersionSchema != "public_concurrency" || !strings.Contains(st.Next, `search_path = "public_concurrency", "public"`) {
		t.Fatalf("status --json after expand: %+v", st)
	}
	code, out, _ = runCLI(t, "status", "--database", db)
	if code != 0 || !strings.Contains(out, "state:    expanded") || !strings.Contains(out, `version schema: "public_concurrency"`) {
		t.Fatalf("status text after expand: exit %d\n%s", code, out)
	}

	old := testdb.Connect(t, db)
	if _, err := old.Exec(ctx, "SELECT count(*) FROM plainjobs_jobrequest WHERE unique_key = 'x'"); err != nil {
		t.Fatal(err)
	}
	var refused planJSON
	mustJSON(t, 1, &refused, "plan", "--json", "--database", db)
	named := false
	for _, f := range refused.Findings {
		named = named || f.Fatal && f.Kind == "old_version_writing" && strings.Contains(f.Object, "pid ")
	}
	if !refused.WouldRefuse || !named {
		t.Fatalf("plan of complete with an old-version session: %+v", refused.Findings)
	}
	code, out, errOut = runCLI(t, "plan", "--contract", "--database", db)
	if code != 1 || !strings.Contains(errOut, "this layout is expanded: run up first") {
		t.Fatalf("plan --contract on an expanded layout: exit %d\n%s\n%s", code, out, errOut)
	}
	code, _, errOut = runCLI(t, "up", "--database", db)
	if code != 1 || !strings.Contains(errOut, "is of the old application version") || !strings.Contains(errOut, "--force") {
		t.Fatalf("complete with an old-version session: exit %d\n%s", code, errOut)
	}
	code, out, errOut = runCLI(t, "up", "--force", "--database", db)
	if code != 0 || !strings.Contains(out, "expanded -> migrated") || !strings.Contains(out, "(--force: completing anyway)") {
		t.Fatalf("complete --force: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "up", "--contract", "--database", db)
	if code != 0 || !strings.Contains(out, "drop the version schema") {
		t.Fatalf("up --contract: exit %d\n%s\n%s", code, out, errOut)
	}
	st = statusJSONResult{}
	mustJSON(t, 0, &st, "status", "--json", "--database", db)
	if st.State != "migrated" || st.VersionSchema != nil {
		t.Fatalf("status --json after contract: %+v", st)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "--expand", "--contract"}, "--expand and --contract are two phases"},
		{[]string{"up", "--contract", "--force"}, "flags of the complete phase"},
		{[]string{"plan", "--down", "--expand"}, "leave out --down"},
		{[]string{"up", "--version-schema", strings.Repeat("v", 64)}, "longer than PostgreSQL's 63 bytes"},
		{[]string{"down", "--drain", "--drain-timeout", "0s"}, "--drain-timeout 0s: must be positive"},
		{[]string{"up", "--version-schema", ""}, "--version-schema"},
		{[]string{"down", "--expand"}, "-expand"},
	} {
		code, _, errOut := runCLI(t, append(c.args, "--database", db)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// TestCompleteThatGaveUpIsStillExpanded: complete (up on an expanded
// layout) gives up while a session holds a lock on the results table
// (exit 1, nothing applied). status, text and --json, and plan then say
// the layout is expanded, that a complete stopped before its cutover and
// applied nothing, and to run up again; once the session ends, up
// completes it (expanded -> migrated).
func TestCompleteThatGaveUpIsStillExpanded(t *testing.T) {
	ctx := context.Background()
	db := plainJobsDB(t)
	if code, out, errOut := runCLI(t, "up", "--expand", "--database", db); code != 0 {
		t.Fatalf("up --expand: exit %d\n%s\n%s", code, out, errOut)
	}
	holder := testdb.Connect(t, db)
	if _, err := holder.Exec(ctx, "BEGIN; LOCK TABLE plainjobs_jobresult IN ROW EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "up", "--lock-timeout", "200ms", "--max-attempts", "2", "--database", db)
	if code != 1 || !strings.Contains(errOut, "could not take its locks in 2 attempts") || !strings.Contains(errOut, "nothing of this step was applied") || strings.Contains(out, "preflight note: ;") {
		t.Fatalf("complete while a session holds the results table: exit %d\n%s\n%s; want exit 1, giving up after 2 attempts", code, out, errOut)
	}

	code, out, _ = runCLI(t, "status", "--database", db)
	for _, want := range []string{
		"state:    expanded\n",
		"stopped:  a complete (up on the expanded layout) stopped before its cutover committed, at step complete ",
		"nothing of the cutover was applied",
		"next:     run up again to complete (",
		"table:    \"public\".\"plainjobs_jobrequest\": key column unique_key",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("status after complete gave up: exit %d, want %q in:\n%s", code, want, out)
		}
	}
	if strings.Contains(out, "partly migrated") {
		t.Fatalf("status after complete gave up says partly migrated:\n%s", out)
	}
	var st statusJSONResult
	mustJSON(t, 0, &st, "status", "--json", "--database", db)
	if st.State != "expanded" || st.Direction != "up" || !strings.Contains(st.Stopped, "before its cutover committed") ||
		!strings.HasPrefix(st.Next, "run up again to complete") || st.VersionSchema == nil || *st.VersionSchema != "public_concurrency" || len(st.Drift) != 0 {
		t.Fatalf("status --json after complete gave up: %+v", st)
	}
	var plan planJSON
	mustJSON(t, 0, &plan, "plan", "--json", "--database", db)
	if plan.State != "expanded" {
		t.Fatalf("plan --json after complete gave up: state %q, want expanded", plan.State)
	}

	if _, err := holder.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, "up", "--database", db)
	if code != 0 || !strings.Contains(out, "expanded -> migrated") || strings.Contains(out, "preflight note: ;") {
		t.Fatalf("up after the session ended: exit %d\n%s\n%s; want expanded -> migrated", code, out, errOut)
	}
}
