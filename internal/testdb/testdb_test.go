package testdb_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
)

func TestNewGivesEachTestItsOwnDatabase(t *testing.T) {
	t.Parallel()
	a, b := testdb.New(t), testdb.New(t)
	if a == b {
		t.Fatalf("two calls to New returned the same database %s", a)
	}
	ca, cb := testdb.Connect(t, a), testdb.Connect(t, b)
	if _, err := ca.Exec(t.Context(), "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := cb.QueryRow(t.Context(), "SELECT count(*) FROM pg_class WHERE relname = 'only_in_a'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("a table created in one test database is visible in another")
	}
}

func TestDatabaseIsDroppedAfterTheTest(t *testing.T) {
	t.Parallel()
	var url string
	t.Run("inner", func(t *testing.T) { url = testdb.New(t) })
	srv, err := testdb.Shared()
	if err != nil {
		t.Fatal(err)
	}
	name := url[strings.LastIndex(url, "/")+1:]
	if i := strings.IndexByte(name, '?'); i >= 0 {
		name = name[:i]
	}
	conn := testdb.Connect(t, srv.URL)
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database %s still exists after its test ended", name)
	}
}

func TestTemplateIsBuiltOnceAndCopied(t *testing.T) {
	t.Parallel()
	calls := 0
	key := "testdb-template-test-" + time.Now().Format(time.RFC3339Nano)
	setup := func(ctx context.Context, url string) error {
		calls++
		conn := testdb.Connect(t, url)
		_, err := conn.Exec(ctx, "CREATE TABLE seeded AS SELECT generate_series(1, 100) AS n")
		conn.Close(ctx)
		return err
	}
	for i := 0; i < 3; i++ {
		url := testdb.New(t, testdb.FromTemplate(key, setup))
		var n int
		if err := testdb.Connect(t, url).QueryRow(t.Context(), "SELECT count(*) FROM seeded").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 100 {
			t.Fatalf("copy %d has %d rows, want 100", i, n)
		}
	}
	if calls != 1 {
		t.Fatalf("setup ran %d times, want once", calls)
	}
	srv, _ := testdb.Shared()
	name, err := srv.EnsureTemplate(t.Context(), key, setup)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), srv.URL)
		if err != nil {
			t.Errorf("drop template: %v", err)
			return
		}
		defer conn.Close(context.Background())
		_, _ = conn.Exec(context.Background(), `ALTER DATABASE "`+name+`" WITH IS_TEMPLATE false`)
		if err := srv.DropDatabase(context.Background(), name); err != nil {
			t.Errorf("drop template: %v", err)
		}
	})
}

func TestBadEnvURLFailsFastAndNamesTheVariable(t *testing.T) {
	t.Parallel()
	// A refused connection fails on its own; the deadline only keeps a hang
	// from blocking the test, and reaching it is a failure.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := testdb.Finder{EnvURL: "postgres://nobody:topsecret@127.0.0.1:1/none?connect_timeout=2"}.Find(ctx)
	if ctx.Err() != nil {
		t.Fatalf("Find did not give up on an unreachable URL by itself: %v", err)
	}
	if err == nil {
		t.Fatal("Find with an unreachable URL succeeded")
	}
	if !errors.Is(err, testdb.ErrNoServer) || !strings.Contains(err.Error(), testdb.EnvURL) {
		t.Fatalf("error %q does not name %s", err, testdb.EnvURL)
	}
	if strings.Contains(err.Error(), "topsecret") {
		t.Fatalf("error shows the password: %v", err)
	}
}

func TestNoServerAndNoBinariesSaysWhatToInstall(t *testing.T) {
	t.Parallel()
	_, err := testdb.Finder{
		EnvURL:   "",
		LocalURL: "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=2",
		BinDirs:  []string{t.TempDir()},
	}.Find(t.Context())
	if err == nil {
		t.Fatal("Find succeeded without a server or binaries")
	}
	for _, want := range []string{"apt-get install postgresql", testdb.EnvURL, "initdb"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestThrowawayCluster starts a cluster from the installed binaries (or
// those $MIGRATE_UNIQUE_TEST_PG_BIN or $MIGRATE_UNIQUE_TEST_PG_VERSION
// choose) whatever else is available, so that path is exercised on every
// run.
func TestThrowawayCluster(t *testing.T) {
	t.Parallel()
	f := testdb.FromEnvironment()
	f.EnvURL = ""
	f.LocalURL = "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=2"
	f.Logf = t.Logf
	srv, err := f.Find(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	if srv.Source != testdb.SourceThrowaway {
		t.Fatalf("source = %s, want throwaway", srv.Source)
	}
	name, err := srv.CreateDatabase(t.Context(), t.Name(), "")
	if err != nil {
		t.Fatal(err)
	}
	conn := testdb.Connect(t, srv.DatabaseURL(name))
	var user string
	if err := conn.QueryRow(t.Context(), "SELECT current_user").Scan(&user); err != nil {
		t.Fatal(err)
	}
	if user != "postgres" {
		t.Fatalf("connected as %q, want postgres", user)
	}
	conn.Close(t.Context())
	if err := srv.DropDatabase(t.Context(), name); err != nil {
		t.Fatal(err)
	}
}

// TestFinderFieldsAreTakenAsTheyAre: an empty EnvURL is no URL, even with
// the variable set (a test that means "no URL" must not get the CI's
// server); FromEnvironment is what reads the variables.
func TestFinderFieldsAreTakenAsTheyAre(t *testing.T) {
	t.Setenv(testdb.EnvURL, "postgres://from-the-environment@127.0.0.1:1/x?connect_timeout=2")
	t.Setenv(testdb.EnvPGVersion, "")
	t.Setenv(testdb.EnvPGBin, "")
	_, err := testdb.Finder{
		LocalURL: "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=2",
		BinDirs:  []string{t.TempDir()},
	}.Find(t.Context())
	if err == nil || strings.Contains(err.Error(), "from-the-environment") || strings.Contains(err.Error(), "does not connect") {
		t.Fatalf("a Finder with no EnvURL used the variable: %v", err)
	}
	f := testdb.FromEnvironment()
	if f.EnvURL != os.Getenv(testdb.EnvURL) {
		t.Fatalf("FromEnvironment: EnvURL %q", f.EnvURL)
	}
	if _, err := f.Find(t.Context()); err == nil || !strings.Contains(err.Error(), testdb.EnvURL) {
		t.Fatalf("FromEnvironment().Find with an unreachable %s: %v", testdb.EnvURL, err)
	}
}
