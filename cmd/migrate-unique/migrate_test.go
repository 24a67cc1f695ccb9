package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func plainJobsDB(t *testing.T) string {
	t.Helper()
	return testdb.New(t, testdb.FromTemplate(legacy.PlainJobs.Key(200), func(ctx context.Context, url string) error {
		return legacy.PlainJobs.LoadURL(ctx, url, 200)
	}))
}

// withPassword adds a password to a trust-authenticated URL: the server
// ignores it, so every command must work and never print it.
func withPassword(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "Sup3rS3cretPw")
	return u.String()
}

func TestMigrationCommandsEndToEnd(t *testing.T) {
	db := withPassword(t, plainJobsDB(t))
	steps := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"status", "--database", db}, 0, []string{"state:    legacy", "key column unique_key", "invalid indexes of ours: none"}},
		{[]string{"plan", "--database", db}, 0, []string{"state:    legacy", "CREATE TABLE IF NOT EXISTS", "lock:  ACCESS EXCLUSIVE (short)", "rows", "the cutover renames \"job_request_class_unique_key\" to it"}},
		{[]string{"up", "--database", db, "--lock-timeout", "1s", "--max-attempts", "3"}, 0, []string{"step 1/", "cutover", "up: legacy -> migrated", "longest lock"}},
		{[]string{"up", "--database", db}, 0, []string{"already migrated"}},
		{[]string{"status", "--database", db}, 0, []string{"state:    migrated", "key column concurrency_key", "saved:    CREATE UNIQUE INDEX plainjobs_jobrequest_unique_job_class_key"}},
		{[]string{"plan", "--database", db}, 0, []string{"already migrated"}},
		{[]string{"down", "--database", db}, 0, []string{"rebuild unique rule", "down: migrated -> legacy"}},
		{[]string{"status", "--database", db}, 0, []string{"state:    legacy"}},
	}
	for _, s := range steps {
		code, out, errOut := runCLI(t, s.args...)
		if code != s.code {
			t.Fatalf("%v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", s.args[0], code, s.code, out, errOut)
		}
		for _, w := range s.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: stdout lacks %q:\n%s", s.args[0], w, out)
			}
		}
		if strings.Contains(out+errOut, "Sup3rS3cretPw") {
			t.Errorf("%v printed the password:\n%s%s", s.args[0], out, errOut)
		}
	}
}

func TestMigrationCommandsFailClearly(t *testing.T) {
	db := withPassword(t, plainJobsDB(t))
	t.Setenv("DATABASE_URL", "")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"up"}, 2, "no database given"},
		{[]string{"up", "--database", db, "--lock-timeout", "0s"}, 2, "--lock-timeout 0s: must be positive"},
		{[]string{"down", "--database", db, "--max-attempts", "0"}, 2, "--max-attempts 0: must be at least 1"},
		{[]string{"up", "--database", db, "--long-transaction", "-1s"}, 2, "--long-transaction -1s: must be positive"},
		{[]string{"bench", "migration", "--database", db, "--rows", "0"}, 2, "--rows 0: must be at least 1"},
		{[]string{"bench", "migration", "--database", db, "--hold", "-1s"}, 2, "--hold -1s: must not be negative"},
		{[]string{"plan", "--database", db, "--jobs-table", "jobs"}, 2, "--active-states"},
		{[]string{"plan", "--database", db, "--bogus"}, 2, "flag provided but not defined: --bogus"},
		{[]string{"status", "--database", db, "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"up", "--database", db, "--requests-table", "nope"}, 1, `table "public"."nope" does not exist`},
		{[]string{"plan", "--database", db, "--class-column", "kind"}, 1, "up would refuse"},
		{[]string{"down", "--database", db, "--requests-table", "nope"}, 1, "layout not found"},
		{[]string{"status", "--database", "postgres://postgres:Sup3rS3cretPw@127.0.0.1:1/jobs?connect_timeout=2"}, 1, "connect to"},
		// A password with an unencoded '/' makes the URL unparsable; up
		// prints the database line before it connects.
		{[]string{"up", "--database", "postgres://postgres:Sup3rS3cretPw/x@127.0.0.1:1/jobs"}, 1, "cannot parse the database URL"},
	}
	for _, c := range cases {
		code, out, errOut := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errOut, c.code, c.want)
		}
		if strings.Contains(out+errOut, "Sup3rS3cretPw") {
			t.Errorf("%v printed the password:\n%s%s", c.args, out, errOut)
		}
	}
}

// -h documents every flag of every migration command, and the flag table of
// docs/migration.md lists exactly those flags for exactly those commands.
func TestMigrationCommandsDocumentEveryFlag(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "migration.md"))
	if err != nil {
		t.Fatal(err)
	}
	commands := []string{"plan", "up", "down", "status", "sql"}
	documented := map[string]map[string]bool{} // command -> flags in the table
	for _, c := range commands {
		documented[c] = map[string]bool{}
	}
	row := regexp.MustCompile("(?m)^\\| `--([a-z-]+)[^`]*` \\| ([^|]+) \\|")
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		for _, c := range strings.Split(m[2], ",") {
			c = strings.TrimSpace(c)
			if c == "all" {
				for _, all := range commands {
					documented[all][m[1]] = true
				}
				continue
			}
			if documented[c] == nil {
				t.Errorf("docs/migration.md documents --%s for an unknown command %q", m[1], c)
				continue
			}
			documented[c][m[1]] = true
		}
	}
	helpFlag := regexp.MustCompile(`(?m)^  --?([a-z][a-z-]*)`)
	for _, cmd := range commands {
		code, _, help := runCLI(t, cmd, "-h")
		if code != 0 || !strings.Contains(help, "Usage: migrate-unique "+cmd) {
			t.Errorf("%s -h: exit %d\n%s", cmd, code, help)
		}
		inHelp := map[string]bool{}
		for _, m := range helpFlag.FindAllStringSubmatch(help, -1) {
			inHelp[m[1]] = true
			if !documented[cmd][m[1]] {
				t.Errorf("docs/migration.md does not document --%s for %s", m[1], cmd)
			}
		}
		if len(inHelp) < 9 {
			t.Errorf("%s -h lists only %d flags:\n%s", cmd, len(inHelp), help)
		}
		for f := range documented[cmd] {
			if !inHelp[f] {
				t.Errorf("docs/migration.md documents --%s for %s, which %s -h does not list", f, cmd, cmd)
			}
		}
	}
}

func TestSQLWritesTheGolangMigrateFiles(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI(t, "sql", "--dir", dir)
	if code != 0 {
		t.Fatalf("sql: exit %d: %s", code, errOut)
	}
	for _, name := range []string{"000001_version_table.up.sql", "000008_cutover.up.sql", "000009_unique_rule.down.sql"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s not written: %v\n%s", name, err, out)
		}
		want, err := os.ReadFile(filepath.Join("..", "..", "migrations", "plainjobs", name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("sql wrote a %s that differs from migrations/plainjobs", name)
		}
	}
	// Again into the same directory: the same files are replaced.
	if code, _, errOut = runCLI(t, "sql", "--dir", dir); code != 0 {
		t.Fatalf("sql again: exit %d: %s", code, errOut)
	}
	single := []string{"sql", "--dir", dir, "--jobs-table", "jobs", "--active-states", "pending,running", "--class-column", "job_type"}
	// Another layout's files would be applied together with these.
	code, _, errOut = runCLI(t, single...)
	if code != 1 || !strings.Contains(errOut, "000002_drop_invalid_plainjobs_j_uuid_cd8cd3_idx.up.sql") || !strings.Contains(errOut, "empty directory") {
		t.Fatalf("sql into a directory holding another layout's files: exit %d, stderr %q; want exit 1 naming the files", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "000002_drop_invalid_jobs_concurrency_key_idx.up.sql")); !os.IsNotExist(err) {
		t.Fatalf("a refused sql wrote files (stat: %v)", err)
	}
	single[2] = t.TempDir()
	if code, _, errOut = runCLI(t, single...); code != 0 {
		t.Fatalf("sql for a single table: exit %d: %s", code, errOut)
	}
}

// With --database, sql reads the layout's unique rules (a quoted schema and
// a named constraint here) and writes a down file that rebuilds each one
// CONCURRENTLY; a bad URL or a missing table is a clear error, names no
// password and writes nothing.
func TestSQLWithTheDatabaseRebuildsEveryRuleConcurrently(t *testing.T) {
	s := legacy.TeamQueue
	db := withPassword(t, testdb.New(t, testdb.FromTemplate(s.Key(200), func(ctx context.Context, url string) error {
		return s.LoadURL(ctx, url, 200)
	})))
	flags := []string{"--schema", s.Layout.Schema, "--class-column", s.Layout.ClassColumn,
		"--requests-table", s.Layout.RequestsTable, "--processes-table", s.Layout.ProcessesTable}
	if s.Layout.ResultsTable != "" {
		flags = append(flags, "--results-table", s.Layout.ResultsTable)
	}
	dir := t.TempDir()
	code, out, errOut := runCLI(t, append([]string{"sql", "--dir", dir, "--database", db}, flags...)...)
	if code != 0 {
		t.Fatalf("sql --database: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	got, err := os.ReadFile(filepath.Join(dir, "000007_unique_rule.down.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `CREATE UNIQUE INDEX CONCURRENTLY "JobRequests_Kind_UniqueKey_uniq" ON "Billing Queue"."JobRequests" USING btree (kind, concurrency_key);`; !strings.Contains(string(got), want) {
		t.Fatalf("000007_unique_rule.down.sql:\n%s\nwant it to hold\n%s", got, want)
	}
	closed, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	closed.Host = "127.0.0.1:1" // nothing listens there
	q := closed.Query()
	q.Del("host")
	closed.RawQuery = q.Encode()
	for _, c := range []struct {
		args []string
		want string
	}{
		{append([]string{"--database", "postgres://postgres:Sup3rS3cretPw@127.0.0.1:x/db"}, flags...), "parse the database URL"},
		{append([]string{"--database", closed.String()}, flags...), "connect to"},
		{[]string{"--database", db, "--requests-table", "no_such_table"}, "no_such_table"},
	} {
		empty := t.TempDir()
		code, out, errOut := runCLI(t, append([]string{"sql", "--dir", empty}, c.args...)...)
		if code == 0 || !strings.Contains(errOut, c.want) || strings.Contains(out+errOut, "Sup3rS3cretPw") {
			t.Errorf("sql %v: exit %d, stderr %q; want a failure naming %q and no password", c.args, code, errOut, c.want)
		}
		if written, _ := filepath.Glob(filepath.Join(empty, "*.sql")); len(written) > 0 {
			t.Errorf("sql %v failed but wrote %v", c.args, written)
		}
	}
}

// The migration benchmark runs end to end on a small table; its figures are
// printed, never asserted.
func TestBenchMigrationRunsBothMigrations(t *testing.T) {
	db := withPassword(t, testdb.New(t))
	code, out, errOut := runCLI(t, "bench", "migration", "--database", db, "--rows", "2000", "--lock-timeout", "200ms", "--hold", "400ms")
	if code != 0 {
		t.Fatalf("bench migration: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"ours (online)", "naive (CREATE INDEX, bare rename)", "writer p99", "longest ACCESS EXCLUSIVE on plainjobs_jobrequest", "targets (ours):"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+errOut, "Sup3rS3cretPw") {
		t.Errorf("bench migration printed the password:\n%s%s", out, errOut)
	}
}

// bench migration --scale migrates both queues up and down at each size
// and prints every step side by side, with the ratio.
func TestBenchMigrationScale(t *testing.T) {
	db := withPassword(t, testdb.New(t))
	code, out, errOut := runCLI(t, "bench", "migration", "--database", db, "--scale", "300,600", "--partitions", "2", "--lock-timeout", "500ms")
	if code != 0 {
		t.Fatalf("bench migration --scale: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"plain-jobs' columns, not partitioned: 300 rows", "plain-jobs' columns, 2 partitions: 300 rows", "held 600/300", "up: longest insert", "down: longest insert",
		"cutover: rename unique_key", "skip-metadata column (unless it holds skip metadata)", "probe index for skip metadata", `counting index on "pq"."jobrequest"`,
		"cpu @300", "cpu wait @600", "load average "} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, " failed, load average"); n != 4 || strings.Count(out, " 0 failed, load average") != n || strings.Contains(out, "first failed write") {
		t.Errorf("a write failed:\n%s", out)
	}
	if code, _, errOut := runCLI(t, "bench", "migration", "--database", db, "--scale", "1000,x"); code != 2 || !strings.Contains(errOut, "--scale") {
		t.Errorf("--scale 1000,x: exit %d, %s", code, errOut)
	}
}

// Every flag of bench migration -h is in the usage line that opens the
// "## Migration" section of docs/performance.md, and vice versa.
func TestBenchMigrationFlagsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "performance.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Migration\n")
	if !ok {
		t.Fatal(`docs/performance.md has no "## Migration" section`)
	}
	usage := regexp.MustCompile("`migrate-unique bench migration ([^`]*)`").FindStringSubmatch(section)
	if usage == nil {
		t.Fatal(`the "## Migration" section of docs/performance.md does not open with the command line`)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile(`--([a-z-]+)`).FindAllStringSubmatch(usage[1], -1) {
		documented[m[1]] = true
	}
	code, _, help := runCLI(t, "bench", "migration", "-h")
	if code != 0 {
		t.Fatalf("bench migration -h: exit %d\n%s", code, help)
	}
	inHelp := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  --?([a-z][a-z-]*)`).FindAllStringSubmatch(help, -1) {
		inHelp[m[1]] = true
		if !documented[m[1]] {
			t.Errorf("docs/performance.md does not document bench migration --%s", m[1])
		}
	}
	for f := range documented {
		if !inHelp[f] {
			t.Errorf("docs/performance.md documents bench migration --%s, which -h does not list", f)
		}
	}
}
