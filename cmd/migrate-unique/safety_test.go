package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
)

// secretCorpus reads the connection strings of internal/pgurl's corpus,
// each carrying the password Sup3rS3cret, pointed at the local server (a
// database that does not exist) instead of a host that needs DNS.
func secretCorpus(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "pgurl", "testdata", "secrets.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := strconv.Unquote(line)
		if err != nil {
			t.Fatalf("secrets.txt: %s: %v", line, err)
		}
		s = strings.ReplaceAll(s, "db.example", "127.0.0.1")
		s = strings.ReplaceAll(s, "host=db", "host=127.0.0.1")
		s = strings.ReplaceAll(s, "/jobs", "/mu_no_such_database")
		out = append(out, s)
	}
	return out
}

// showsSecret reports whether out shows the corpus's password or any
// five-character piece of it.
func showsSecret(out string) bool {
	const secret = "Sup3rS3cret"
	for i := 0; i+5 <= len(secret); i++ {
		if strings.Contains(out, secret[i:i+5]) {
			return true
		}
	}
	return false
}

// No command prints any part of a password, whatever the shape of the
// connection string, given with --database or in $DATABASE_URL.
func TestNoCommandPrintsThePassword(t *testing.T) {
	dir := t.TempDir()
	commands := [][]string{
		{"plan"}, {"up", "--lock-timeout", "100ms"}, {"down"}, {"status"},
		{"sql", "--dir", filepath.Join(dir, "sql")},
		{"concurrency", "status"}, {"concurrency", "set", "Mailer", "--limit", "1", "--force"},
		{"concurrency", "release", "Mailer", "0", "--force"},
		{"demo"},
	}
	for _, db := range secretCorpus(t) {
		for _, c := range commands {
			args := append(append([]string(nil), c...), "--database", db)
			code, out, errOut := runCLI(t, args...)
			if code == 0 {
				t.Errorf("%s --database %q: exit 0, want a failure (no such database)", c[0], db)
			}
			if showsSecret(out + errOut) {
				t.Errorf("%s --database %q printed the password:\n%s%s", strings.Join(c, " "), db, out, errOut)
			}
		}
		if strings.ContainsRune(db, 0) {
			continue // an environment variable cannot hold a NUL byte
		}
		t.Setenv("DATABASE_URL", db)
		for _, c := range [][]string{{"status"}, {"up"}, {"concurrency", "status"}} {
			code, out, errOut := runCLI(t, c...)
			if code == 0 || showsSecret(out+errOut) {
				t.Errorf("%s with DATABASE_URL=%q: exit %d, printed:\n%s%s", strings.Join(c, " "), db, code, out, errOut)
			}
		}
	}
}

// Every way of asking for help ends, with the list of commands or one
// command's flags, and exit 0.
func TestEveryHelpFormTerminates(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"help"}, "Usage:"},
		{[]string{"-h"}, "Usage:"},
		{[]string{"--help"}, "Usage:"},
		{[]string{"help", "help"}, "Usage:"},
		{[]string{"help", "-h"}, "Usage:"},
		{[]string{"-h", "-h"}, "Usage:"},
		{[]string{"--help", "help"}, "Usage:"},
		{[]string{"help", "--help", "-h"}, "Usage:"},
		{[]string{"help", "up"}, "Usage: migrate-unique up"},
		{[]string{"-h", "status"}, "Usage: migrate-unique status"},
		{[]string{"up", "-h"}, "Usage: migrate-unique up"},
		{[]string{"concurrency", "help"}, "Usage: migrate-unique concurrency"},
		{[]string{"concurrency", "-h"}, "Usage: migrate-unique concurrency"},
		{[]string{"help", "concurrency"}, "Usage: migrate-unique concurrency"},
		{[]string{"concurrency", "set", "-h"}, "Usage: migrate-unique concurrency set"},
	}
	for _, c := range cases {
		code, out, errOut := runCLI(t, c.args...)
		if code != 0 || !strings.Contains(out+errOut, c.want) {
			t.Errorf("%v: exit %d, output %q; want exit 0 and %q", c.args, code, out+errOut, c.want)
		}
	}
}

// A flag given an empty value (a script's unset variable) is a usage error
// that names it, never its default, and nothing is changed.
func TestEmptyFlagsAreUsageErrors(t *testing.T) {
	db := plainJobsDB(t)
	before := dbSnapshot(t, db)
	flags := []string{"schema", "class-column", "requests-table", "processes-table", "results-table", "jobs-table", "state-column", "active-states", "database"}
	for _, cmd := range []string{"plan", "up", "down", "status", "sql"} {
		for _, f := range flags {
			args := []string{cmd, "--" + f, ""}
			if f != "database" {
				args = append(args, "--database", db)
			}
			if cmd == "sql" {
				args = append(args, "--dir", t.TempDir())
			}
			code, _, errOut := runCLI(t, args...)
			if code != 2 || !strings.Contains(errOut, "--"+f+" is empty") {
				t.Errorf("%v: exit %d, stderr %q; want exit 2 naming --%s", args, code, errOut, f)
			}
		}
	}
	for _, args := range [][]string{
		{"sql", "--dir", ""},
		{"concurrency", "status", "--schema", "", "--database", db},
		{"concurrency", "set", "G", "--limit", "1", "--database", ""},
		{"demo", "--database", ""},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != 2 || !strings.Contains(errOut, "is empty") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming the empty flag", args, code, errOut)
		}
	}
	if after := dbSnapshot(t, db); after != before {
		t.Fatalf("a refused command changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// up and down through PgBouncer in transaction mode refuse with exit 1 and
// say to connect directly; status and plan work and say so; nothing
// changes.
func TestMigrationCommandsThroughPgBouncer(t *testing.T) {
	db := plainJobsDB(t)
	pooled := testdb.PgBouncer(t, db)
	before := dbSnapshot(t, db)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"up"}, 1, "Connect directly to PostgreSQL"},
		{[]string{"down"}, 1, "Connect directly to PostgreSQL"},
		// Read commands work again and again (no statement left prepared).
		{[]string{"plan"}, 1, "refused: connected through a connection pooler"},
		{[]string{"status"}, 0, "pooler:   connected through a connection pooler"},
		{[]string{"plan"}, 1, "refused: connected through a connection pooler"},
		{[]string{"status"}, 0, "pooler:   connected through a connection pooler"},
		{[]string{"up"}, 1, "Connect directly to PostgreSQL"},
	} {
		code, out, errOut := runCLI(t, append(c.args, "--database", pooled)...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("%v through PgBouncer: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, out, errOut, c.code, c.want)
		}
	}
	if after := dbSnapshot(t, db); after != before {
		t.Fatalf("a refused run through PgBouncer changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// The README's vet line stops with a message when the binary is not on
// PATH, instead of running go vet without it (a clean result that checked
// nothing, as -vettool=$(which migrate-unique) does).
func TestReadmeVetLineFailsWithoutTheBinary(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var script []string
	for _, line := range strings.Split(string(b), "\n") {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "MU=") || strings.HasPrefix(l, "go vet -vettool=") {
			script = append(script, strings.TrimSpace(strings.SplitN(l, "#", 2)[0]))
		}
	}
	if len(script) != 2 {
		t.Fatalf("the README's vet lines: %q", script)
	}
	cmd := exec.Command("sh", "-c", strings.Join(script, "\n"))
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + filepath.Dir(mustLookPath(t, "go")) + ":/usr/bin:/bin", "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not on PATH") {
		t.Fatalf("without the binary the README's vet lines: %v\n%s", err, out)
	}
}

func mustLookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// plan says how each step runs as it does: ANALYZE is one statement on its
// own, not a transaction.
func TestPlanSaysHowEachStepRuns(t *testing.T) {
	db := teamQueueDB(t)
	out := mustCLI(t, db, "plan")
	blocks := strings.Split(out, "\nstep ")
	want := map[string]string{
		"counting index": "outside any transaction (CONCURRENTLY)",
		"cutover":        "in one transaction, lock_timeout bounded, retried",
		"analyze":        "one statement on its own, outside any transaction",
	}
	for prefix, how := range want {
		found := false
		for _, b := range blocks {
			if name := strings.SplitN(b, "\n", 2)[0]; strings.Contains(name, ": "+prefix) {
				found = true
				if !strings.Contains(b, how) {
					t.Errorf("plan's %s step does not say %q:\n%s", prefix, how, b)
				}
			}
		}
		if !found {
			t.Errorf("plan has no %s step:\n%s", prefix, out)
		}
	}
}
