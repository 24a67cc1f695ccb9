// Package testdb finds or starts a PostgreSQL server and hands out fresh
// databases on it. Every test that needs PostgreSQL uses it, and so does the
// demo command: it is product code, not a test-only helper.
//
// A server is found in this order:
//  1. $MIGRATE_UNIQUE_TEST_DATABASE_URL, when set (it must connect);
//  2. a server on 127.0.0.1:5432 as user postgres
//     ($MIGRATE_UNIQUE_TEST_LOCAL_URL overrides that address).
//     Either is used by the tests only while it has TestHeadroom free
//     connections: with fewer, the harness goes on to 3 and says so;
//  3. a throwaway cluster started from the installed server binaries
//     (initdb and pg_ctl on PATH or under /usr/lib/postgresql/*/bin), run as
//     the postgres OS user when the process is root, listening only on a unix
//     socket in a temporary directory, and stopped when done.
//
// $MIGRATE_UNIQUE_TEST_PG_BIN (a bin directory) or
// $MIGRATE_UNIQUE_TEST_PG_VERSION (13, 13.23: fetched by FetchServer) skip
// the search: the tests run on a throwaway cluster of those binaries.
package testdb

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/pgurl"
)

// Environment variables the harness reads.
const (
	// EnvURL names a server to use instead of looking for one.
	EnvURL = "MIGRATE_UNIQUE_TEST_DATABASE_URL"
	// EnvLocalURL overrides the address of the local server tried second.
	EnvLocalURL = "MIGRATE_UNIQUE_TEST_LOCAL_URL"
	// EnvPGBin names a directory of server binaries (initdb, pg_ctl,
	// postgres) to run the tests on, in a throwaway cluster, instead of
	// looking for a server.
	EnvPGBin = "MIGRATE_UNIQUE_TEST_PG_BIN"
	// EnvPGVersion names a PostgreSQL version (13, 13.23, or a version of
	// ServerPackage) to run the tests on, in a throwaway cluster of the
	// binaries FetchServer downloads, instead of looking for a server.
	EnvPGVersion = "MIGRATE_UNIQUE_TEST_PG_VERSION"
)

// DefaultLocalURL is the local server tried when EnvURL is not set.
const DefaultLocalURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable&connect_timeout=3"

// Source says where a Server came from.
type Source string

// The places a server can come from.
const (
	SourceEnv       Source = "env"
	SourceLocal     Source = "local"
	SourceThrowaway Source = "throwaway"
)

// Server is a PostgreSQL server on which databases can be created.
type Server struct {
	// URL connects as a superuser to the server's maintenance database.
	URL string
	// Source says how the server was found.
	Source Source

	dir    string // throwaway cluster: the temp directory
	pgCtl  string
	runAs  *syscall.Credential
	logger func(format string, args ...any)

	pruneOnce sync.Once // PruneTemplates, once per process

	versionMu sync.Mutex
	version   Version // ServerVersion's answer
}

// Finder looks for a server. Its fields are taken as they are (an empty
// EnvURL is no URL); FromEnvironment fills them from the environment, as
// the tests and the demo use it.
type Finder struct {
	// EnvURL is a server to use instead of looking for one
	// ($MIGRATE_UNIQUE_TEST_DATABASE_URL in FromEnvironment). "": none.
	EnvURL string
	// LocalURL is the local server tried when EnvURL is empty
	// ($MIGRATE_UNIQUE_TEST_LOCAL_URL in FromEnvironment). "":
	// DefaultLocalURL.
	LocalURL string
	// BinDirs, when not nil, are the only directories searched for initdb
	// and pg_ctl (nil: PATH, then /usr/lib/postgresql/*/bin).
	BinDirs []string
	// BinDir, when set, makes Find start a throwaway cluster from the
	// server binaries in this directory instead of looking for a server
	// ($MIGRATE_UNIQUE_TEST_PG_BIN in FromEnvironment).
	BinDir string
	// Version, when set, makes Find start a throwaway cluster of this
	// PostgreSQL version, fetched by FetchServer, instead of looking for a
	// server ($MIGRATE_UNIQUE_TEST_PG_VERSION in FromEnvironment).
	Version string
	// Headroom, when not 0, is how many free connections the server given
	// by EnvURL or found at LocalURL must have: with fewer, Find starts a
	// throwaway cluster instead and logs why (see TestHeadroom).
	Headroom int
	// Logf receives progress lines (nil: silent).
	Logf func(format string, args ...any)
}

// FromEnvironment returns the Finder the environment describes: EnvURL,
// LocalURL, BinDir and Version from their variables.
func FromEnvironment() Finder {
	return Finder{
		EnvURL:   os.Getenv(EnvURL),
		LocalURL: os.Getenv(EnvLocalURL),
		BinDir:   os.Getenv(EnvPGBin),
		Version:  os.Getenv(EnvPGVersion),
	}
}

// ErrNoServer is wrapped by Find when no server could be found or started.
var ErrNoServer = errors.New("no PostgreSQL server for the tests")

// Find returns the first server that works, in the order of the package doc.
func (f Finder) Find(ctx context.Context) (*Server, error) {
	if f.BinDir != "" || f.Version != "" {
		chosen := EnvPGBin + "=" + f.BinDir
		if f.Version != "" {
			chosen = EnvPGVersion + "=" + f.Version
		}
		if f.BinDir != "" && f.Version != "" {
			return nil, fmt.Errorf("%w: both %s=%s and %s=%s are set: unset one", ErrNoServer, EnvPGBin, f.BinDir, EnvPGVersion, f.Version)
		}
		if f.EnvURL != "" {
			return nil, fmt.Errorf("%w: both %s and %s are set: the tests run either on a given server or on a throwaway cluster of chosen binaries; unset one", ErrNoServer, EnvURL, chosen)
		}
		srv, err := f.StartThrowaway(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrNoServer, chosen, err)
		}
		return srv, nil
	}
	if f.EnvURL != "" {
		if err := ping(ctx, f.EnvURL); err != nil {
			return nil, fmt.Errorf("%w: %s=%s does not connect: %v; fix the URL or unset it to use a local server", ErrNoServer, EnvURL, pgurl.Redact(f.EnvURL), err)
		}
		return f.withHeadroom(ctx, &Server{URL: f.EnvURL, Source: SourceEnv})
	}
	localURL := f.LocalURL
	if localURL == "" {
		localURL = DefaultLocalURL
	}
	localErr := ping(ctx, localURL)
	if localErr == nil {
		return f.withHeadroom(ctx, &Server{URL: localURL, Source: SourceLocal})
	}
	srv, err := f.StartThrowaway(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %s did not connect (%v) and %v; install the PostgreSQL server (Debian: apt-get install postgresql) or set %s to a server's URL", ErrNoServer, pgurl.Redact(localURL), localErr, err, EnvURL)
	}
	return srv, nil
}

// ping connects once, failing fast.
func ping(ctx context.Context, u string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return pgurl.RedactError(u, err)
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > 5*time.Second {
		cfg.ConnectTimeout = 5 * time.Second
	}
	// A full server (53300) is there all the same: wait for a slot.
	conn, err := dialWaiting(ctx, func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cfg) })
	if err != nil {
		return pgurl.RedactError(u, err)
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// binaries finds initdb and pg_ctl: in BinDir, in Version's fetched
// binaries, or searched for.
func (f Finder) binaries(ctx context.Context) (initdb, pgCtl string, err error) {
	dirs := f.BinDirs
	switch {
	case f.BinDir != "":
		dirs = []string{f.BinDir}
	case f.Version != "":
		dir, err := FetchServer(ctx, f.Version, f.Logf)
		if err != nil {
			return "", "", err
		}
		dirs = []string{dir}
	case dirs == nil:
		if i, e1 := exec.LookPath("initdb"); e1 == nil {
			if p, e2 := exec.LookPath("pg_ctl"); e2 == nil {
				return i, p, nil
			}
		}
		found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		sort.Slice(found, func(i, j int) bool { return versionOf(found[i]) > versionOf(found[j]) })
		dirs = found
	}
	for _, d := range dirs {
		i, p := filepath.Join(d, "initdb"), filepath.Join(d, "pg_ctl")
		if isExecutable(i) && isExecutable(p) {
			return i, p, nil
		}
	}
	if f.BinDir != "" || f.Version != "" {
		return "", "", fmt.Errorf("no PostgreSQL server binaries (initdb, pg_ctl) in %s", dirs[0])
	}
	return "", "", errors.New("no PostgreSQL server binaries (initdb, pg_ctl) on PATH or under /usr/lib/postgresql/*/bin")
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// StartThrowaway initialises and starts a cluster in a new temporary
// directory. Stop removes it.
func (f Finder) StartThrowaway(ctx context.Context) (*Server, error) {
	initdb, pgCtl, err := f.binaries(ctx)
	if err != nil {
		return nil, err
	}
	s := &Server{Source: SourceThrowaway, pgCtl: pgCtl, logger: f.Logf}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, errors.New("running as root, and PostgreSQL refuses to run as root: create a postgres OS user (Debian's postgresql package does) or run as another user")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.runAs = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	s.dir, err = os.MkdirTemp("", "migrate-unique-pg-")
	if err != nil {
		return nil, fmt.Errorf("throwaway cluster: %w", err)
	}
	if err := os.Chmod(s.dir, 0o755); err != nil {
		return nil, s.fail(err)
	}
	if s.runAs != nil {
		if err := os.Chown(s.dir, int(s.runAs.Uid), int(s.runAs.Gid)); err != nil {
			return nil, s.fail(err)
		}
	}
	if s.runAs != nil {
		// The server's OS user may not be able to enter the binaries'
		// directory (root's cache under /root): it runs a linked copy.
		if _, err := s.run(ctx, initdb, "--version"); err != nil {
			staged := filepath.Join(s.dir, "pg")
			if err := stageCopy(filepath.Dir(filepath.Dir(initdb)), staged); err != nil {
				return nil, s.fail(fmt.Errorf("copy the server binaries for the postgres OS user: %w", err))
			}
			initdb, s.pgCtl = filepath.Join(staged, "bin", "initdb"), filepath.Join(staged, "bin", "pg_ctl")
			pgCtl = s.pgCtl
		}
	}
	data := filepath.Join(s.dir, "data")
	s.logf("starting a throwaway PostgreSQL cluster in %s", s.dir)
	if out, err := s.run(ctx, initdb, "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		return nil, s.fail(fmt.Errorf("initdb: %v: %s", err, out))
	}
	opts := fmt.Sprintf("-h '' -k %s -F -c max_connections=300 -c shared_buffers=128MB -c synchronous_commit=off -c full_page_writes=off", s.dir)
	if out, err := s.run(ctx, pgCtl, "-D", data, "-l", filepath.Join(s.dir, "server.log"), "-w", "-t", "60", "-o", opts, "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
		return nil, s.fail(fmt.Errorf("pg_ctl start: %v: %s %s", err, out, log))
	}
	s.URL = (&url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/postgres",
		RawQuery: url.Values{"host": {s.dir}, "sslmode": {"disable"}}.Encode()}).String()
	if err := ping(ctx, s.URL); err != nil {
		return nil, s.fail(fmt.Errorf("throwaway cluster started but does not answer: %w", err))
	}
	v, err := s.ServerVersion(ctx)
	if err != nil {
		return nil, s.fail(err)
	}
	if f.Version != "" && !matches(v.String(), serverOf(f.Version)) {
		return nil, s.fail(fmt.Errorf("asked for PostgreSQL %s, the binaries run %s", f.Version, v))
	}
	s.logf("PostgreSQL %s runs in the throwaway cluster", v)
	return s, nil
}

// Version is a server's version.
type Version struct {
	// Num is server_version_num: 130023 for 13.23, 180004 for 18.4.
	Num int
}

// Major is the major version: 13, 14, ...
func (v Version) Major() int { return v.Num / 10000 }

// String is the version as PostgreSQL prints it: 13.23, 18.4.
func (v Version) String() string {
	if v.Num == 0 {
		return "(unknown)"
	}
	return fmt.Sprintf("%d.%d", v.Num/10000, v.Num%10000)
}

// ServerVersion asks the server its version, once.
func (s *Server) ServerVersion(ctx context.Context) (Version, error) {
	s.versionMu.Lock()
	defer s.versionMu.Unlock()
	if s.version.Num != 0 {
		return s.version, nil
	}
	err := s.admin(ctx, func(conn *pgx.Conn) error {
		var num string
		if err := conn.QueryRow(ctx, "SELECT pg_catalog.current_setting('server_version_num')").Scan(&num); err != nil {
			return err
		}
		n, err := strconv.Atoi(num)
		s.version.Num = n
		return err
	})
	if err != nil {
		return Version{}, fmt.Errorf("server version of %s: %w", s.Describe(), err)
	}
	return s.version, nil
}

func (s *Server) logf(format string, args ...any) {
	if s.logger != nil {
		s.logger(format, args...)
	}
}

func (s *Server) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	if s.runAs != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.runAs}
	}
	return cmd.CombinedOutput()
}

func (s *Server) fail(err error) error {
	_ = s.Stop()
	return fmt.Errorf("throwaway cluster: %w", err)
}

// Stop stops a throwaway cluster and removes its directory. For any other
// server it does nothing.
func (s *Server) Stop() error {
	if s == nil || s.dir == "" {
		return nil
	}
	var err error
	if _, statErr := os.Stat(filepath.Join(s.dir, "data", "postmaster.pid")); statErr == nil {
		if out, e := s.run(context.Background(), s.pgCtl, "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop"); e != nil {
			err = fmt.Errorf("pg_ctl stop: %v: %s", e, out)
		}
	}
	if e := os.RemoveAll(s.dir); e != nil && err == nil {
		err = e
	}
	s.dir = ""
	return err
}

// StopCommand is the shell command that stops a throwaway cluster and
// removes its directory, for an operator who kept it: pg_ctl by its full
// path (it is often not on PATH), run as the cluster's OS user when this
// process is root (pg_ctl refuses to run as root). "" for any other server.
func (s *Server) StopCommand() string {
	if s == nil || s.dir == "" {
		return ""
	}
	stop := shellQuote(s.pgCtl) + " -D " + shellQuote(filepath.Join(s.dir, "data")) + " -m fast -w stop"
	if s.runAs != nil {
		if u, err := user.LookupId(strconv.Itoa(int(s.runAs.Uid))); err == nil {
			stop = "runuser -u " + shellQuote(u.Username) + " -- " + stop
		}
	}
	return stop + " && rm -r " + shellQuote(s.dir)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// DatabaseURL returns the URL of database name on the server.
func (s *Server) DatabaseURL(name string) string {
	u, err := url.Parse(s.URL)
	if err != nil || u.Scheme == "" {
		return s.URL + " dbname=" + name
	}
	u.Path = "/" + name
	return u.String()
}

// Describe names the server for progress lines, without credentials.
func (s *Server) Describe() string {
	return fmt.Sprintf("%s server %s", s.Source, pgurl.Describe(s.URL))
}

func sanitizeName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
