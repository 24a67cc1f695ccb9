package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
)

const demoRows = 2000

// stepOutput returns the narration of step n (from its heading to the next
// one).
func stepOutput(t *testing.T, out string, n int) string {
	t.Helper()
	head := "\nStep " + string(rune('0'+n)) + "/6: "
	i := strings.Index(out, head)
	if i < 0 {
		t.Fatalf("no step %d in the output:\n%s", n, out)
	}
	s := out[i+1:]
	if j := strings.Index(s, "\nStep "); j >= 0 {
		s = s[:j]
	}
	return s
}

// wantLines checks that every pattern matches a line of s.
func wantLines(t *testing.T, step int, s string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile("(?m)" + p).MatchString(s) {
			t.Errorf("step %d: no line matches %q:\n%s", step, p, s)
		}
	}
}

func TestDemoEndToEnd(t *testing.T) {
	db := withPassword(t, testdb.New(t))
	code, out, errOut := runCLI(t, "demo", "--database", db, "--rows", "2000")
	if code != 0 {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, "Sup3rS3cretPw") {
		t.Errorf("the demo printed the password")
	}

	wantLines(t, 1, stepOutput(t, out, 1),
		`created plain-jobs' tables with 2000 pending, 200 running and 400 finished jobs`,
		`the old rule, one pending job per key: CREATE UNIQUE INDEX plainjobs_jobrequest_unique_job_class_key .*WHERE \(\(retry_attempt = 0\)`)
	wantLines(t, 2, stepOutput(t, out, 2),
		`plan: state legacy; up would run \d+ of \d+ steps:`,
		`^    7\. plain-jobs 0007 index "job_request_concurrency_key" on "public"\."plainjobs_jobrequest": SHARE UPDATE EXCLUSIVE`,
		`^    step 7/\d+: plain-jobs 0007 index "job_request_concurrency_key" on "public"\."plainjobs_jobrequest": done in`,
		`^    up: legacy -> migrated in`,
		`figures from up's report: \S+ in all, longest lock \S+ \(cutover`,
		`rows before and after: 2600 and 2600$`)
	wantLines(t, 3, stepOutput(t, out, 3),
		`admitted  shop\.jobs\.ChargeCard::order-42 -> request \d+\n    skipped   shop\.jobs\.ChargeCard::order-42: 1 of 1 active`,
		`(admitted  shop\.jobs\.RebuildSearchIndex -> request \d+\n    ){2}skipped   shop\.jobs\.RebuildSearchIndex: 2 of 2 active`,
		`(admitted  shop\.jobs\.SyncAccount::account-7 -> request \d+\n    ){3}skipped   shop\.jobs\.SyncAccount::account-7: 3 of 3 active`,
		`admitted  shop\.jobs\.SendEmail::digest-weekly -> request \d+, retry_attempt 1, starts in \d+s`,
		`again     not retryable`,
		`admitted  shop\.jobs\.NightlyReport::nightly-report:scheduled:(\d+) -> request \d+\n    skipped   shop\.jobs\.NightlyReport::nightly-report:scheduled:\d+: 1 of 1 active`)
	wantLines(t, 4, stepOutput(t, out, 4),
		`\$ migrate-unique concurrency status shop\.jobs\.SyncAccount::account-7`,
		`^    shop\.jobs\.SyncAccount::account-7 +3 +3 +0 +0$`,
		`^      [012] +held +[0-9a-f-]{36} +worker-[123] +\d+ `,
		`^  \$ migrate-unique concurrency serve --database 'postgres://`,
		`a 4th acquisition: busy, no slot handed out`,
		`enqueue: skipped, shop\.jobs\.SyncAccount::account-7 is at limit 0`,
		`worker:  busy, no slot handed out while the limit is 0`,
		`--clear: the code's limit 3 applies again`)
	if n := strings.Count(stepOutput(t, out, 4), " held "); n != 3 {
		t.Errorf("step 4: %d held slots in the status, want 3", n)
	}
	wantLines(t, 5, stepOutput(t, out, 5),
		`^    \+func \(j \*ChargeCard\) ConcurrencyLimit\(\) \(int, bool\) \{`,
		`^    \+\treturn 1, j\.ConcurrencyKey\(\) != ""`,
		`fixed in 1 file\(s\)`)
	wantLines(t, 6, stepOutput(t, out, 6),
		`down refused before any change`,
		`group shop\.jobs\.SyncAccount::account-7: 3 pending jobs, the old rule \(plainjobs_jobrequest_unique_job_class_key\) allows 1`,
		`deleted the demo's own 2 extra jobs of shop\.jobs\.SyncAccount::account-7 \(request ids \d+, \d+\)`,
		`down: migrated -> legacy`,
		`status: legacy, key column unique_key`,
		`the old unique rule is back, identical to the original`,
		`rows: 2607 = 2600 seeded \+ 7 the demo added; none lost`)
	wantLines(t, 0, out, `demo finished in \S+: every step did what it shows\.`)

	// The database tells the same story.
	ctx := context.Background()
	st, err := migrations.Status(ctx, db, layout.PlainJobs())
	if err != nil {
		t.Fatal(err)
	}
	if st.State != migrations.Legacy {
		t.Errorf("state after the demo: %s", st.State)
	}
	conn := testdb.Connect(t, db)
	var (
		unique                                  string
		requests, perKey, legacyJob, retries    int
		scheduled, runtimeTables, resultsFailed int
	)
	err = conn.QueryRow(ctx, `SELECT coalesce(pg_get_indexdef(to_regclass('plainjobs_jobrequest_unique_job_class_key')), ''),
  (SELECT count(*) FROM plainjobs_jobrequest),
  (SELECT count(*) FROM plainjobs_jobrequest WHERE job_class = 'shop.jobs.SyncAccount' AND unique_key = 'account-7'),
  (SELECT count(*) FROM plainjobs_jobrequest WHERE job_class = 'shop.jobs.ChargeCard' AND unique_key = 'order-42'),
  (SELECT count(*) FROM plainjobs_jobrequest WHERE job_class = 'shop.jobs.SendEmail' AND unique_key = 'digest-weekly' AND retry_attempt = 1 AND start_at > created_at + interval '9 seconds'),
  (SELECT count(*) FROM plainjobs_jobrequest WHERE job_class = 'shop.jobs.NightlyReport' AND unique_key LIKE 'nightly-report:scheduled:%'),
  (SELECT count(*) FROM pg_tables WHERE tablename IN ('concurrency_limits', 'concurrency_slots', 'concurrency_reschedules', 'migrate_unique_version')),
  (SELECT count(*) FROM plainjobs_jobresult WHERE job_class = 'shop.jobs.SendEmail' AND retry_job_request_uuid IS NOT NULL)`).
		Scan(&unique, &requests, &perKey, &legacyJob, &retries, &scheduled, &runtimeTables, &resultsFailed)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(unique, "CREATE UNIQUE INDEX plainjobs_jobrequest_unique_job_class_key ON public.plainjobs_jobrequest USING btree (job_class, unique_key) WHERE ((retry_attempt = 0)") {
		t.Errorf("unique rule after the demo: %q", unique)
	}
	if requests != demoRows+6 || perKey != 1 || legacyJob != 1 || retries != 1 || scheduled != 1 || runtimeTables != 0 || resultsFailed != 1 {
		t.Errorf("after the demo: %d requests (want %d), %d of account-7 (want 1), %d of order-42 (want 1), %d retries (want 1), %d scheduled (want 1), %d runtime tables (want 0), %d retried results (want 1)",
			requests, demoRows+6, perKey, legacyJob, retries, scheduled, runtimeTables, resultsFailed)
	}
}

func TestDemoFailsWhenAStepFailsAndGoesOnWithTheOthers(t *testing.T) {
	db := testdb.New(t)
	t.Setenv("PATH", t.TempDir()) // no go command: step 5 cannot run
	code, out, errOut := runCLI(t, "demo", "--database", db, "--rows", "100")
	if code != 1 {
		t.Fatalf("demo without go exited %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	wantLines(t, 5, stepOutput(t, out, 5), `^  FAILED: the go command is not on PATH`)
	wantLines(t, 6, stepOutput(t, out, 6), `the old unique rule is back, identical to the original`)
	wantLines(t, 0, out, `^demo FAILED after `)
	if !strings.Contains(errOut, "migrate-unique demo: step 5 (rewrite the job code) failed: the go command is not on PATH") {
		t.Errorf("stderr does not name the failed step:\n%s", errOut)
	}
}

func TestDemoFlags(t *testing.T) {
	code, _, errOut := runCLI(t, "demo", "-h")
	if code != 0 {
		t.Fatalf("demo -h exited %d", code)
	}
	for _, f := range []string{"-database", "-rows", "-keep", "throwaway", "(default 200000)"} {
		if !strings.Contains(errOut, f) {
			t.Errorf("demo -h does not mention %q:\n%s", f, errOut)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--rows", "0"}, "--rows 0: give 1 or more"},
		{[]string{"--rows", "many"}, `invalid value "many" for flag --rows`},
		{[]string{"now"}, `unexpected argument "now"`},
	} {
		code, out, errOut := runCLI(t, append([]string{"demo"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("demo %v: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errOut, c.want)
		}
	}
	code, out, errOut := runCLI(t, "demo", "--database", "postgres://u:Sup3rS3cretPw@127.0.0.1:1/x?connect_timeout=2")
	if code != 1 || !strings.Contains(errOut, "connect to --database") || strings.Contains(out+errOut, "Sup3rS3cretPw") {
		t.Errorf("demo with an unreachable --database: exit %d, stdout %q, stderr %q; want exit 1, the connection error, no password", code, out, errOut)
	}
}
