package testdb

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/layout"
)

// TB is the part of testing.TB the harness uses, so this package does not
// import testing into the binaries that use it.
type TB interface {
	Helper()
	Name() string
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	Context() context.Context
}

var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
)

// Shared returns the server of this process, found once with
// FromEnvironment().
func Shared() (*Server, error) {
	sharedOnce.Do(func() {
		f := FromEnvironment()
		f.Headroom = TestHeadroom
		f.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "testdb: "+format+"\n", args...) }
		shared, sharedErr = f.Find(context.Background())
	})
	return shared, sharedErr
}

// EnvSummary names a file to which Main appends its summary line (the
// server's version, the package, how many tests used the server and how
// many were adapted to its version), for a CI run to gather: go test shows
// a passing package's output only with -v.
const EnvSummary = "MIGRATE_UNIQUE_TEST_SUMMARY"

// Main runs a test binary's tests, prints a summary line (see EnvSummary),
// then stops the PgBouncer and the throwaway cluster the harness started
// for them.
// Every package whose tests use this harness calls it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }
func Main(m interface{ Run() int }) int {
	code := m.Run()
	summarize(code)
	if err := bouncer.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testdb: stopping pgbouncer: %v\n", err)
	}
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testdb: stopping the throwaway cluster: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Option changes what New creates.
type Option func(*options)

type options struct {
	templateKey string
	setup       func(ctx context.Context, url string) error
	icuLocale   string
	libcLocale  string
}

// ICU makes New create the database with the ICU provider and the given
// locale (for example "en-US") as its default collation, copied from
// template0: the default of many managed services, in which text does not
// sort bytewise. On PostgreSQL 13 and 14, which have no ICU default
// collation, it makes a libc database of the same language and region
// (en_US.UTF-8 for en-US: see Libc) and says so with Adapted. It cannot be
// combined with FromTemplate.
func ICU(locale string) Option {
	return func(o *options) { o.icuLocale = locale }
}

// Libc makes New create the database with the libc provider and the given
// operating-system locale (for example "en_US.UTF-8") as its default
// collation, copied from template0: a non-C libc database, in which text does
// not sort bytewise. The server must see the locale: install it (Debian: the
// locales package, the locale in /etc/locale.gen, locale-gen; .ci/run does)
// before the server starts. It cannot be combined with FromTemplate or ICU.
func Libc(locale string) Option {
	return func(o *options) { o.libcLocale = locale }
}

// FromTemplate makes New copy a template database built once by setup (per
// key, shared by every test and process that uses the same key), instead of
// an empty database. Make the key change whenever setup changes.
func FromTemplate(key string, setup func(ctx context.Context, url string) error) Option {
	return func(o *options) { o.templateKey, o.setup = key, setup }
}

// New creates a fresh database for the test, dropped when the test ends, and
// returns its URL. It fails the test with a message that says what to install
// or set when no server can be found.
func New(t TB, opts ...Option) string {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	srv, err := Shared()
	if err != nil {
		t.Fatalf("%v", err)
	}
	recordUse(t)
	ctx := context.Background()
	template := ""
	if o.setup != nil {
		template, err = srv.EnsureTemplate(ctx, o.templateKey, o.setup)
		if err != nil {
			t.Fatalf("%v", err)
		}
	}
	clause := ""
	if o.icuLocale != "" || o.libcLocale != "" {
		if template != "" || o.icuLocale != "" && o.libcLocale != "" {
			t.Fatalf("testdb: ICU, Libc and FromTemplate cannot be combined: a database with its own collation is copied from template0")
		}
		v, err := srv.ServerVersion(ctx)
		if err != nil {
			t.Fatalf("testdb: %v", err)
		}
		switch {
		case o.icuLocale != "" && v.Major() >= 15:
			clause = " LOCALE_PROVIDER icu ICU_LOCALE " + layout.Literal(o.icuLocale)
		case o.icuLocale != "":
			// Before 15 a database's default collation is libc's; what
			// such a server has that does not sort bytewise is a libc
			// locale of the same language.
			o.libcLocale = icuToLibc(o.icuLocale)
			Adapted(t, "no ICU default collation before PostgreSQL 15 (CREATE DATABASE ... LOCALE_PROVIDER icu): a libc %s database instead, which does not sort bytewise either", o.libcLocale)
			clause = " LOCALE " + layout.Literal(o.libcLocale)
		case v.Major() >= 15:
			clause = " LOCALE_PROVIDER libc LOCALE " + layout.Literal(o.libcLocale)
		default: // libc is the only provider before 15
			clause = " LOCALE " + layout.Literal(o.libcLocale)
		}
	}
	name, err := srv.createDatabase(ctx, t.Name(), template, clause)
	if err != nil {
		if o.libcLocale != "" {
			t.Fatalf("%v; the server must see the OS locale %q: install it (Debian: apt-get install locales, add it to /etc/locale.gen, run locale-gen) and restart the server", err, o.libcLocale)
		}
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := srv.DropDatabase(context.Background(), name); err != nil {
			t.Logf("testdb: %v", err)
		}
	})
	return srv.DatabaseURL(name)
}

// icuToLibc is the libc locale of an ICU locale's language and region:
// en-US is en_US.UTF-8.
func icuToLibc(icu string) string {
	return strings.ReplaceAll(icu, "-", "_") + ".UTF-8"
}

// Connect opens a connection to url that is closed when the test ends.
func Connect(t TB, url string) *pgx.Conn {
	t.Helper()
	recordUse(t)
	conn, err := Dial(t.Context(), url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// heavyLockID serializes tests that open many connections at once.
const heavyLockID = 0x6d75_6865_6176_7900 // "muheavy"

// Heavy marks a test that opens many connections (a hammer): across every
// test process on the server, only one heavy test runs at a time, so their
// connections together stay below max_connections.
func Heavy(t TB) {
	t.Helper()
	recordUse(t)
	srv, err := Shared()
	if err != nil {
		t.Fatalf("%v", err)
	}
	conn, err := Dial(context.Background(), srv.URL)
	if err != nil {
		t.Fatalf("heavy test lock: %v", err)
	}
	if _, err := conn.Exec(t.Context(), "SELECT pg_advisory_lock($1)", int64(heavyLockID)); err != nil {
		conn.Close(context.Background())
		t.Fatalf("heavy test lock: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
}

// The tests of this process that used the server, and those adapted to its
// version (Adapted), by full name.
var (
	statsMu      sync.Mutex
	testsUsed    = map[string]bool{}
	testsAdapted = map[string]string{}
)

func recordUse(t TB) {
	statsMu.Lock()
	testsUsed[t.Name()] = true
	statsMu.Unlock()
}

// Major returns the major version (13, 14, ...) of the shared server,
// for a test whose set-up needs a feature of a later version: it runs what
// the older server has instead and says so with Adapted.
func Major(t TB) int {
	t.Helper()
	srv, err := Shared()
	if err != nil {
		t.Fatalf("%v", err)
	}
	v, err := srv.ServerVersion(t.Context())
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	recordUse(t)
	return v.Major()
}

// Adapted records that the test runs a set-up adapted to the server's
// version (a feature of a later version is missing, and the test checks
// the product against what this one has instead): it logs why, and Main's
// summary line counts it. A test that cannot apply at all says so here too,
// rather than skipping in silence.
func Adapted(t TB, format string, args ...any) {
	t.Helper()
	v := "(unknown)"
	if srv, err := Shared(); err == nil {
		if sv, err := srv.ServerVersion(t.Context()); err == nil {
			v = sv.String()
		}
	}
	why := fmt.Sprintf(format, args...)
	t.Logf("adapted to PostgreSQL %s: %s", v, why)
	statsMu.Lock()
	testsUsed[t.Name()] = true
	testsAdapted[t.Name()] = why
	statsMu.Unlock()
}

// summarize prints the summary line of a test process whose tests used
// the shared server, and appends it to $MIGRATE_UNIQUE_TEST_SUMMARY.
func summarize(code int) {
	if shared == nil {
		return
	}
	statsMu.Lock()
	used, adapted := len(testsUsed), make([]string, 0, len(testsAdapted))
	for name := range testsAdapted {
		adapted = append(adapted, name)
	}
	statsMu.Unlock()
	sort.Strings(adapted)
	v, err := shared.ServerVersion(context.Background())
	version := v.String()
	if err != nil {
		version = "(version unknown: " + err.Error() + ")"
	}
	result := "ok"
	if code != 0 {
		result = "FAIL"
	}
	line := fmt.Sprintf("testdb: PostgreSQL %s: %s %s: %d tests, %d adapted", version, result, packageName(), used, len(adapted))
	if len(adapted) > 0 {
		line += " (" + strings.Join(adapted, ", ") + ")"
	}
	fmt.Fprintln(os.Stderr, line)
	if p := os.Getenv(EnvSummary); p != "" {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err == nil {
			_, err = f.WriteString(line + "\n")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "testdb: %s: %v\n", EnvSummary, err)
		}
	}
}

// packageName is the test's package directory relative to the module root
// (go test runs a test binary in its package's directory).
func packageName() string {
	dir, err := os.Getwd()
	if err != nil {
		return filepath.Base(os.Args[0])
	}
	for root := dir; ; {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			if rel, err := filepath.Rel(root, dir); err == nil {
				return filepath.ToSlash(rel)
			}
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			break
		}
		root = parent
	}
	return filepath.Base(dir)
}
