package testdb

import (
	"context"
	"fmt"
	"os"
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
		f.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "testdb: "+format+"\n", args...) }
		shared, sharedErr = f.Find(context.Background())
	})
	return shared, sharedErr
}

// Main runs a test binary's tests, then stops the PgBouncer and the
// throwaway cluster the harness started for them.
// Every package whose tests use this harness calls it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }
func Main(m interface{ Run() int }) int {
	code := m.Run()
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
// sort bytewise. It needs PostgreSQL 15 or later and cannot be combined with
// FromTemplate.
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
	ctx := context.Background()
	template := ""
	if o.setup != nil {
		template, err = srv.EnsureTemplate(ctx, o.templateKey, o.setup)
		if err != nil {
			t.Fatalf("%v", err)
		}
	}
	clause := ""
	if o.icuLocale != "" {
		if template != "" {
			t.Fatalf("testdb: ICU and FromTemplate cannot be combined: an ICU database is copied from template0")
		}
		clause = " LOCALE_PROVIDER icu ICU_LOCALE " + layout.Literal(o.icuLocale)
	}
	if o.libcLocale != "" {
		if template != "" || clause != "" {
			t.Fatalf("testdb: Libc cannot be combined with FromTemplate or ICU: a libc database is copied from template0")
		}
		clause = " LOCALE_PROVIDER libc LOCALE " + layout.Literal(o.libcLocale)
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

// Connect opens a connection to url that is closed when the test ends.
func Connect(t TB, url string) *pgx.Conn {
	t.Helper()
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
