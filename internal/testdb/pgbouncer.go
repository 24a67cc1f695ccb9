package testdb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// EnvPgBouncer names the pgbouncer binary to use instead of looking for one
// on PATH and in /usr/sbin.
const EnvPgBouncer = "MIGRATE_UNIQUE_TEST_PGBOUNCER"

// ErrNoPgBouncer is wrapped by StartPgBouncer when no pgbouncer binary is
// installed.
var ErrNoPgBouncer = errors.New("no pgbouncer binary for the pooler tests")

// Bouncer is a PgBouncer in transaction pool mode in front of a Server, as
// users run it: server connections are shared between clients transaction
// by transaction, so session state (SET, session advisory locks, named
// prepared statements) does not stay with a client.
type Bouncer struct {
	// Host and Port are where clients connect (127.0.0.1 and a free port).
	Host string
	Port int

	dir string
	cmd *exec.Cmd

	// mu guards ini and the auth file, which PgBouncerAs extends: ini is
	// the configuration as written, server the address of its databases.
	mu     sync.Mutex
	ini    string
	server string
	// admin is the harness's user, an admin_users of the console.
	admin string
}

var (
	bouncerOnce sync.Once
	bouncer     *Bouncer
	bouncerErr  error
)

// PgBouncer returns a URL that reaches the same database as url (a database
// of the shared server, as New returns) through a PgBouncer in transaction
// pool mode. The pooler is started once per test process and stopped by
// Main. It fails the test with a message that says what to install when no
// pgbouncer binary can be found.
func PgBouncer(t TB, url string) string {
	t.Helper()
	srv, err := Shared()
	if err != nil {
		t.Fatalf("%v", err)
	}
	bouncerOnce.Do(func() {
		bouncer, bouncerErr = StartPgBouncer(context.Background(), srv)
	})
	if bouncerErr != nil {
		t.Fatalf("%v", bouncerErr)
	}
	u, err := bouncer.URL(url)
	if err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	return u
}

// URL rewrites a database URL of the server behind b so that it connects
// through b: the host and port change, the database, user and every other
// parameter stay.
func (b *Bouncer) URL(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil || u.Scheme == "" {
		return "", errors.New("the database URL does not parse as a URL")
	}
	q := u.Query()
	q.Del("host")
	q.Del("port")
	u.RawQuery = q.Encode()
	u.Host = net.JoinHostPort(b.Host, strconv.Itoa(b.Port))
	return u.String(), nil
}

// StartPgBouncer starts a PgBouncer in transaction pool mode in front of srv,
// listening on 127.0.0.1 at a free port, with a wildcard database entry, so
// every database of srv is reachable through it under its own name. As root
// it runs as the postgres OS user (pgbouncer refuses to run as root).
func StartPgBouncer(ctx context.Context, srv *Server) (*Bouncer, error) {
	bin, err := pgbouncerBinary()
	if err != nil {
		return nil, err
	}
	cfg, err := pgconn.ParseConfig(srv.URL)
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: the server's URL does not parse: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: no free port: %w", err)
	}
	b := &Bouncer{Host: "127.0.0.1", Port: port}
	var runAs *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, errors.New("pgbouncer: running as root, and pgbouncer refuses to run as root: create a postgres OS user (Debian's postgresql package does)")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		runAs = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	if b.dir, err = os.MkdirTemp("", "migrate-unique-pgbouncer-"); err != nil {
		return nil, fmt.Errorf("pgbouncer: %w", err)
	}
	if runAs != nil {
		if err := os.Chown(b.dir, int(runAs.Uid), int(runAs.Gid)); err != nil {
			return nil, b.fail(err)
		}
	}
	backend := fmt.Sprintf("host=%s port=%d user=%s", iniValue(cfg.Host), cfg.Port, iniValue(cfg.User))
	if cfg.Password != "" {
		backend += " password=" + iniValue(cfg.Password)
	}
	ini := strings.Join([]string{
		"[databases]",
		"* = " + backend,
		"[pgbouncer]",
		"listen_addr = " + b.Host,
		"listen_port = " + strconv.Itoa(port),
		"unix_socket_dir =",
		"auth_type = trust",
		// The console (database pgbouncer) for PgBouncerAs's RELOAD.
		"admin_users = " + iniValue(cfg.User),
		"auth_file = " + filepath.Join(b.dir, "userlist.txt"),
		"pool_mode = transaction",
		"max_client_conn = 1000",
		"default_pool_size = 40",
		"max_db_connections = 80",
		"server_lifetime = 3600",
		"server_idle_timeout = 30",
		"ignore_startup_parameters = extra_float_digits",
		"logfile = " + filepath.Join(b.dir, "pgbouncer.log"),
		"pidfile = " + filepath.Join(b.dir, "pgbouncer.pid"),
		"",
	}, "\n")
	b.ini, b.admin, b.server = ini, cfg.User, fmt.Sprintf("host=%s port=%d", iniValue(cfg.Host), cfg.Port)
	users := fmt.Sprintf("%q \"\"\n", cfg.User)
	for name, text := range map[string]string{"pgbouncer.ini": ini, "userlist.txt": users} {
		p := filepath.Join(b.dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			return nil, b.fail(err)
		}
		if runAs != nil {
			if err := os.Chown(p, int(runAs.Uid), int(runAs.Gid)); err != nil {
				return nil, b.fail(err)
			}
		}
	}
	b.cmd = exec.Command(bin, filepath.Join(b.dir, "pgbouncer.ini"))
	b.cmd.Dir = b.dir
	// Die with the test process, even when it is killed.
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: runAs, Pdeathsig: syscall.SIGKILL}
	if err := b.cmd.Start(); err != nil {
		return nil, b.fail(fmt.Errorf("start %s: %w", bin, err))
	}
	exited := make(chan error, 1)
	go func() { exited <- b.cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(b.Host, strconv.Itoa(port)), time.Second)
		if err == nil {
			conn.Close()
			break
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
			b.cmd = nil
			return nil, b.fail(fmt.Errorf("pgbouncer exited before it listened (%v): %s", err, log))
		case <-ctx.Done():
			return nil, b.fail(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
			return nil, b.fail(fmt.Errorf("pgbouncer did not listen on port %d within 15s: %s", port, log))
		}
	}
	return b, nil
}

// PgBouncerAs returns a URL that reaches the database at dbURL through the
// test process's PgBouncer (transaction pool mode) as dbURL's user on the
// server too. The pooler's wildcard entry logs every client in to the
// server as the harness's own user, so that the role settings of the
// client's user (ALTER ROLE ... SET search_path) would not apply; this adds
// a database entry of its own (named after dbURL's database and user) that
// logs in as the client's user, with that user (and its password, for the
// server) in the pooler's auth file, and reloads the pooler.
func PgBouncerAs(t TB, dbURL string) string {
	t.Helper()
	via := PgBouncer(t, dbURL)
	cfg, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("pgbouncer: parse the database URL: %v", err)
	}
	sum := sha256.Sum256([]byte(cfg.Database + "\x00" + cfg.User))
	alias := "mu_as_" + hex.EncodeToString(sum[:8])
	b := bouncer
	b.mu.Lock()
	entry := fmt.Sprintf("%s = %s dbname=%s", alias, b.server, iniValue(cfg.Database))
	if !strings.Contains(b.ini, "\n"+entry+"\n") {
		b.ini = strings.Replace(b.ini, "[databases]\n", "[databases]\n"+entry+"\n", 1)
		err = os.WriteFile(filepath.Join(b.dir, "pgbouncer.ini"), []byte(b.ini), 0o600)
		if err == nil {
			var f *os.File
			if f, err = os.OpenFile(filepath.Join(b.dir, "userlist.txt"), os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
				_, err = fmt.Fprintf(f, "%q %q\n", cfg.User, cfg.Password)
				err = errors.Join(err, f.Close())
			}
		}
		if err == nil {
			err = b.reload()
		}
	}
	b.mu.Unlock()
	if err != nil {
		t.Fatalf("pgbouncer: add %s as %s: %v", alias, cfg.User, err)
	}
	u, err := url.Parse(via)
	if err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	u.Path = "/" + alias
	return u.String()
}

// reload makes the pooler read its configuration and auth file again,
// through its console (RELOAD returns once they are read). A SIGHUP would
// not say when: a client that connected to the new entry's name before it
// was read got a database the wildcard entry made for that name, logging in
// as the harness's user, and kept it after the reload.
func (b *Bouncer) reload() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := pgconn.ParseConfig(fmt.Sprintf("host=%s port=%d user=%s dbname=pgbouncer sslmode=disable", b.Host, b.Port, iniValue(b.admin)))
	if err != nil {
		return err
	}
	// The console speaks the simple protocol only and takes no startup
	// parameters but the basic ones.
	cfg.RuntimeParams = map[string]string{}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("the console: %w", err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "RELOAD").ReadAll()
	return err
}

// Stop ends the pooler and removes its directory.
func (b *Bouncer) Stop() error {
	if b == nil {
		return nil
	}
	if b.cmd != nil && b.cmd.Process != nil {
		_ = b.cmd.Process.Kill()
		b.cmd = nil
	}
	if b.dir == "" {
		return nil
	}
	err := os.RemoveAll(b.dir)
	b.dir = ""
	return err
}

func (b *Bouncer) fail(err error) error {
	_ = b.Stop()
	return fmt.Errorf("pgbouncer: %w", err)
}

func pgbouncerBinary() (string, error) {
	if p := os.Getenv(EnvPgBouncer); p != "" {
		if !isExecutable(p) {
			return "", fmt.Errorf("%w: %s=%s is not an executable file", ErrNoPgBouncer, EnvPgBouncer, p)
		}
		return p, nil
	}
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer", "/usr/local/bin/pgbouncer"} {
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: install it (Debian: apt-get install pgbouncer; .ci/run does) or set %s to its path", ErrNoPgBouncer, EnvPgBouncer)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// iniValue quotes a value for a pgbouncer connection string when it needs it.
func iniValue(s string) string {
	if s != "" && !strings.ContainsAny(s, " '\\") {
		return s
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
