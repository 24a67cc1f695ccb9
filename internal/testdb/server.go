// Package testdb finds or starts a PostgreSQL server and hands out fresh
// databases on it. Every test that needs PostgreSQL uses it, and so does the
// demo command: it is product code, not a test-only helper.
//
// A server is found in this order:
//  1. $MIGRATE_UNIQUE_TEST_DATABASE_URL, when set (it must connect);
//  2. a server on 127.0.0.1:5432 as user postgres
//     ($MIGRATE_UNIQUE_TEST_LOCAL_URL overrides that address);
//  3. a throwaway cluster started from the installed server binaries
//     (initdb and pg_ctl on PATH or under /usr/lib/postgresql/*/bin), run as
//     the postgres OS user when the process is root, listening only on a unix
//     socket in a temporary directory, and stopped when done.
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
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/migrate-unique/migrate-unique/internal/pgurl"
)

// Environment variables the harness reads.
const (
	// EnvURL names a server to use instead of looking for one.
	EnvURL = "MIGRATE_UNIQUE_TEST_DATABASE_URL"
	// EnvLocalURL overrides the address of the local server tried second.
	EnvLocalURL = "MIGRATE_UNIQUE_TEST_LOCAL_URL"
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
}

// Finder looks for a server. The zero value uses the environment and the
// defaults; tests set its fields to exercise each path.
type Finder struct {
	// EnvURL is used instead of $MIGRATE_UNIQUE_TEST_DATABASE_URL when set.
	EnvURL string
	// LocalURL is used instead of $MIGRATE_UNIQUE_TEST_LOCAL_URL or
	// DefaultLocalURL when set.
	LocalURL string
	// BinDirs, when not nil, are the only directories searched for initdb
	// and pg_ctl (nil: PATH, then /usr/lib/postgresql/*/bin).
	BinDirs []string
	// Logf receives progress lines (nil: silent).
	Logf func(format string, args ...any)
}

// ErrNoServer is wrapped by Find when no server could be found or started.
var ErrNoServer = errors.New("no PostgreSQL server for the tests")

// Find returns the first server that works, in the order of the package doc.
func (f Finder) Find(ctx context.Context) (*Server, error) {
	envURL := f.EnvURL
	if envURL == "" {
		envURL = os.Getenv(EnvURL)
	}
	if envURL != "" {
		if err := ping(ctx, envURL); err != nil {
			return nil, fmt.Errorf("%w: %s=%s does not connect: %v; fix the URL or unset it to use a local server", ErrNoServer, EnvURL, pgurl.Redact(envURL), err)
		}
		return &Server{URL: envURL, Source: SourceEnv}, nil
	}
	localURL := f.LocalURL
	if localURL == "" {
		localURL = os.Getenv(EnvLocalURL)
	}
	if localURL == "" {
		localURL = DefaultLocalURL
	}
	localErr := ping(ctx, localURL)
	if localErr == nil {
		return &Server{URL: localURL, Source: SourceLocal}, nil
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
	var conn *pgx.Conn
	for delay := 20 * time.Millisecond; ; delay *= 2 {
		conn, err = pgx.ConnectConfig(ctx, cfg)
		var pgErr *pgconn.PgError
		// A full server (53300) is there all the same: wait for a slot.
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "53300" || delay > 2*time.Second {
			break
		}
		time.Sleep(delay)
	}
	if err != nil {
		return pgurl.RedactError(u, err)
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// binaries finds initdb and pg_ctl.
func (f Finder) binaries() (initdb, pgCtl string, err error) {
	dirs := f.BinDirs
	if dirs == nil {
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
	initdb, pgCtl, err := f.binaries()
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
	return s, nil
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
