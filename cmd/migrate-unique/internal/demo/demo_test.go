package demo

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
)

// TestMain stops a throwaway PostgreSQL cluster, if the tests started one.
func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }

// The whole demo runs end to end in cmd/migrate-unique's TestDemo*; these
// tests cover what that run cannot reach.

func TestThrowawayServerIsKept(t *testing.T) {
	ctx := t.Context()
	var out bytes.Buffer
	db, err := openDatabase(ctx, "", testdb.Finder{}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.srv.Stop() })
	if db.srv.Source != testdb.SourceThrowaway {
		t.Fatalf("server source %s, want a throwaway server", db.srv.Source)
	}
	if !strings.Contains(out.String(), "starting a throwaway PostgreSQL cluster") || !strings.Contains(out.String(), "created database mu_demo_") {
		t.Errorf("narration:\n%s", out.String())
	}
	ping(t, db.url, true)

	out.Reset()
	if err := db.close(ctx, true, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "kept: psql '"+db.url+"'") || !strings.Contains(out.String(), "pg_ctl' -D ") {
		t.Errorf("--keep narration lacks the URL and how to stop the server:\n%s", out.String())
	}
	ping(t, db.url, true)
	// The printed command works as printed, as the user running the demo
	// (root included).
	_, stop, ok := strings.Cut(out.String(), "the throwaway server runs until you stop it: ")
	if !ok {
		t.Fatalf("no stop command:\n%s", out.String())
	}
	stop = strings.TrimSpace(stop)
	if b, err := exec.Command("sh", "-c", stop).CombinedOutput(); err != nil {
		t.Fatalf("the printed stop command %q: %v\n%s", stop, err, b)
	}
	ping(t, db.url, false)
	u, err := url.Parse(db.url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(u.Query().Get("host")); !os.IsNotExist(err) {
		t.Errorf("after the printed stop command the directory %s is still there: %v", u.Query().Get("host"), err)
	}
}

// TestThrowawayServerIsRemoved: without --keep the demo stops and removes
// its throwaway server.
func TestThrowawayServerIsRemoved(t *testing.T) {
	ctx := t.Context()
	var out bytes.Buffer
	db, err := openDatabase(ctx, "", testdb.Finder{}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.srv.Stop() })
	ping(t, db.url, true)

	out.Reset()
	if err := db.close(ctx, false, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "stopped and removed the throwaway server") {
		t.Errorf("narration:\n%s", out.String())
	}
	ping(t, db.url, false)
	u, err := url.Parse(db.url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(u.Query().Get("host")); !os.IsNotExist(err) {
		t.Errorf("the throwaway server's directory %s is still there: %v", u.Query().Get("host"), err)
	}
}

func TestWithoutServerBinariesADatabaseOnTheTestServerIsUsedAndDropped(t *testing.T) {
	ctx := t.Context()
	var out bytes.Buffer
	// The fallback finds the server the tests use, whichever it is (a
	// throwaway one too, named through the environment variable's slot).
	srv, err := testdb.Shared()
	if err != nil {
		t.Fatal(err)
	}
	db, err := openDatabase(ctx, "", testdb.Finder{BinDirs: []string{}, EnvURL: srv.URL}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if db.srv.Source == testdb.SourceThrowaway {
		t.Fatalf("started a throwaway server without binaries")
	}
	if !strings.Contains(out.String(), "no throwaway server (no PostgreSQL server binaries") {
		t.Errorf("narration does not say why there is no throwaway server:\n%s", out.String())
	}
	ping(t, db.url, true)
	if err := db.close(ctx, false, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "dropped database "+db.name) {
		t.Errorf("narration:\n%s", out.String())
	}
	var exists bool
	if err := testdb.Connect(t, db.srv.URL).QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", db.name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("database %s was not dropped", db.name)
	}
}

func ping(t *testing.T, u string, want bool) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), u)
	if err == nil {
		err = conn.Ping(t.Context())
		conn.Close(context.Background())
	}
	if (err == nil) != want {
		t.Fatalf("connect to the demo's database: %v, want success=%v", err, want)
	}
}

func TestRunRefusesADatabaseWithTheDemosTables(t *testing.T) {
	for _, table := range []string{"plainjobs_jobrequest", "concurrency_slots", "migrate_unique_version"} {
		t.Run(table, func(t *testing.T) {
			u := testdb.New(t)
			conn := testdb.Connect(t, u)
			if _, err := conn.Exec(t.Context(), "CREATE TABLE "+table+" (id int); INSERT INTO "+table+" VALUES (1)"); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err := Run(t.Context(), Options{DatabaseURL: u, Rows: 10, Out: &out})
			if err == nil || !strings.Contains(err.Error(), `already has table "public"."`+table+`"`) || !strings.Contains(err.Error(), "empty database") {
				t.Fatalf("Run on a database with %s: %v", table, err)
			}
			var tables, rows int
			if err := conn.QueryRow(t.Context(), "SELECT (SELECT count(*) FROM pg_tables WHERE schemaname = 'public'), (SELECT count(*) FROM "+table+")").Scan(&tables, &rows); err != nil {
				t.Fatal(err)
			}
			if tables != 1 || rows != 1 {
				t.Errorf("the refused run changed the database: %d tables, %d rows", tables, rows)
			}
		})
	}
}

func TestRunRejectsNegativeRows(t *testing.T) {
	err := Run(t.Context(), Options{DatabaseURL: "postgres://nowhere.invalid/db", Rows: -1})
	if err == nil || !strings.Contains(err.Error(), "rows -1") {
		t.Fatalf("Run with -1 rows: %v", err)
	}
}

func TestRewriteStepShowsTheDiffOfTheJobTypesOnly(t *testing.T) {
	var out bytes.Buffer
	d := &demo{out: &out}
	if err := d.rewriteCode(t.Context()); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"--- a/jobs/jobs.go",
		"+func (j *ChargeCard) ConcurrencyKey() string { return fmt.Sprintf(\"order-%d\", j.OrderID) }",
		"+\treturn 1, true",
		"+\treturn 1, j.ConcurrencyKey() != \"\"",
		"+func Describe(j Job) string { return \"key=\" + j.ConcurrencyKey() }",
		"fixed in 1 file(s)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "cache.go") {
		t.Errorf("the diff touches the cache package, which has no job:\n%s", out.String())
	}
}

func TestRewriteStepWithoutGoSaysSo(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var out bytes.Buffer
	d := &demo{out: &out}
	err := d.rewriteCode(t.Context())
	if !errors.Is(err, ErrNoGo) || !strings.Contains(err.Error(), "go command is not on PATH") {
		t.Fatalf("rewrite step without go: %v", err)
	}
}

func TestIndentKeepsRedrawsIndented(t *testing.T) {
	var out bytes.Buffer
	w := &indent{w: &out, prefix: "  "}
	for _, s := range []string{"a\nb", "c\r[#  ] 10%", "\r[## ] 50%\n", "\nd\n"} {
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := out.String(), "  a\n  bc\r  [#  ] 10%\r  [## ] 50%\n\n  d\n"; got != want {
		t.Errorf("indented %q, want %q", got, want)
	}
}

func TestStepLinesDropsStartLinesOnly(t *testing.T) {
	var out bytes.Buffer
	s := &stepLines{w: &out}
	for _, p := range []string{"step 1/2: a ...\nstep 1/2: a: do", "ne in 1ms\nprogress 10%\n", "step 2/2: b ...\n", "tail"} {
		if _, err := s.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	s.flush()
	if got, want := out.String(), "step 1/2: a: done in 1ms\nprogress 10%\ntail\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
