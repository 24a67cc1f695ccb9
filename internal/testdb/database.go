package testdb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/migrate-unique/migrate-unique/layout"
)

// CreateDatabase creates a new database named after prefix plus a random
// suffix, copied from template ("" means template0), and returns its name.
func (s *Server) CreateDatabase(ctx context.Context, prefix, template string) (string, error) {
	return s.createDatabase(ctx, prefix, template, "")
}

// createDatabase is CreateDatabase with extra options (clause) for CREATE
// DATABASE, such as a locale provider.
func (s *Server) createDatabase(ctx context.Context, prefix, template, clause string) (string, error) {
	var rnd [5]byte
	_, _ = rand.Read(rnd[:])
	p := sanitizeName(prefix)
	if len(p) > 40 {
		p = p[:40]
	}
	name := "mu_" + p + "_" + hex.EncodeToString(rnd[:])
	if template == "" {
		template = "template0"
	}
	err := s.admin(ctx, func(conn *pgx.Conn) error {
		return retryBusy(ctx, func() error {
			_, err := conn.Exec(ctx, "CREATE DATABASE "+layout.Ident(name)+" TEMPLATE "+layout.Ident(template)+clause)
			return err
		})
	})
	if err != nil {
		return "", fmt.Errorf("create database %s from %s: %w", name, template, err)
	}
	return name, nil
}

// DropDatabase drops the database, closing any connection still open to it.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	return s.admin(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, dropDatabase(name))
		if err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	})
}

// EnsureTemplate returns the name of a template database built once by setup
// and reused by every later call with the same key, in this process or any
// other (the name is derived from the key, so change the key when setup
// changes). Concurrent callers wait for the first one to finish. Each call
// records the template's use in its comment, and the first call of a
// process drops the templates nobody has used for TemplateMaxAge.
func (s *Server) EnsureTemplate(ctx context.Context, key string, setup func(ctx context.Context, url string) error) (string, error) {
	sum := sha256.Sum256([]byte(key))
	name := "mu_tmpl_" + hex.EncodeToString(sum[:10])
	s.pruneOnce.Do(func() {
		if dropped, err := s.PruneTemplates(ctx, TemplateMaxAge); err != nil {
			fmt.Fprintf(os.Stderr, "testdb: pruning unused template databases: %v\n", err)
		} else if len(dropped) > 0 {
			fmt.Fprintf(os.Stderr, "testdb: dropped template databases unused for %s: %s\n", TemplateMaxAge, strings.Join(dropped, ", "))
		}
	})
	err := s.admin(ctx, func(conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLock(name)); err != nil {
			return err
		}
		defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", templateLock(name)) //nolint:errcheck
		var ready bool
		var comment *string
		err := conn.QueryRow(ctx, "SELECT datistemplate, shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1", name).Scan(&ready, &comment)
		if err == nil && ready {
			// Under the lock, so a prune in another process sees it.
			if used, ok := templateLastUsed(comment); !ok || time.Since(used) > time.Hour {
				return markUsed(ctx, conn, name)
			}
			return nil
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		// A leftover of a setup that failed half-way: start again.
		if _, err := conn.Exec(ctx, dropDatabase(name)); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+layout.Ident(name)+" TEMPLATE template0"); err != nil {
			return err
		}
		if err := setup(ctx, s.DatabaseURL(name)); err != nil {
			_, _ = conn.Exec(context.Background(), dropDatabase(name))
			return fmt.Errorf("set up template %q: %w", key, err)
		}
		// No connection may stay open to a template that is being copied.
		if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name); err != nil {
			return err
		}
		if _, err = conn.Exec(ctx, "ALTER DATABASE "+layout.Ident(name)+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
			return err
		}
		return markUsed(ctx, conn, name)
	})
	if err != nil {
		return "", fmt.Errorf("template database %s: %w", name, err)
	}
	return name, nil
}

// TemplateMaxAge is how long a template database may go unused before the
// first EnsureTemplate of a test process drops it: templates are kept
// between runs on purpose, but one whose setup changed (a new key) is never
// used again.
const TemplateMaxAge = 7 * 24 * time.Hour

// templatePrefix starts the comment that records a template's last use.
const templatePrefix = "migrate-unique test template; last used "

// templateLock is the advisory lock that serializes building, using and
// dropping the template called name, across processes.
func templateLock(name string) int64 {
	sum := sha256.Sum256([]byte("migrate-unique template " + name))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

func markUsed(ctx context.Context, conn *pgx.Conn, name string) error {
	_, err := conn.Exec(ctx, "COMMENT ON DATABASE "+layout.Ident(name)+" IS "+layout.Literal(templatePrefix+time.Now().UTC().Format(time.RFC3339)))
	return err
}

// templateLastUsed reads a template's comment; false when it has none of
// ours (a template made before uses were recorded).
func templateLastUsed(comment *string) (time.Time, bool) {
	if comment == nil {
		return time.Time{}, false
	}
	at, ok := strings.CutPrefix(*comment, templatePrefix)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, at)
	return t, err == nil
}

// PruneTemplates drops the template databases (mu_tmpl_*) not used for
// maxAge, or never marked as used, and returns their names. A template that
// another process is building or using right now (it holds the template's
// lock) is left alone, and one whose use was recorded meanwhile is kept.
func (s *Server) PruneTemplates(ctx context.Context, maxAge time.Duration) ([]string, error) {
	return s.pruneTemplates(ctx, maxAge, `mu\_tmpl\_%`)
}

// pruneTemplates prunes the template databases whose names are LIKE
// pattern.
func (s *Server) pruneTemplates(ctx context.Context, maxAge time.Duration, pattern string) ([]string, error) {
	var dropped []string
	err := s.admin(ctx, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE $1 AND datistemplate ORDER BY datname`, pattern)
		if err != nil {
			return err
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, name := range names {
			var locked bool
			if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", templateLock(name)).Scan(&locked); err != nil {
				return err
			}
			if !locked {
				continue
			}
			err := func() error {
				defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", templateLock(name)) //nolint:errcheck
				var comment *string
				if err := conn.QueryRow(ctx, "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1", name).Scan(&comment); err != nil {
					return err
				}
				if used, ok := templateLastUsed(comment); ok && time.Since(used) <= maxAge {
					return nil
				}
				if _, err := conn.Exec(ctx, "ALTER DATABASE "+layout.Ident(name)+" WITH IS_TEMPLATE false"); err != nil {
					return err
				}
				if _, err := conn.Exec(ctx, dropDatabase(name)); err != nil {
					return err
				}
				dropped = append(dropped, name)
				return nil
			}()
			if err != nil {
				return fmt.Errorf("drop template %s: %w", name, err)
			}
		}
		return nil
	})
	return dropped, err
}

func (s *Server) admin(ctx context.Context, f func(*pgx.Conn) error) error {
	conn, err := Dial(ctx, s.URL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return f(conn)
}

// DialWait bounds how long Dial waits for a connection slot while the
// server has none to spare (SQLSTATE 53300, too many clients).
const DialWait = time.Minute

// Dial connects to url, waiting (at most DialWait) while the server has no
// connection slot to spare (SQLSTATE 53300): test processes share one
// server, and a hammer in one of them, or another client, may hold most of
// its connections for a while.
func Dial(ctx context.Context, url string) (*pgx.Conn, error) {
	return dialWaiting(ctx, func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, url) })
}

// dialWaiting calls connect until it does not fail with 53300, at most
// DialWait; the last error says how long it waited.
func dialWaiting(ctx context.Context, connect func(context.Context) (*pgx.Conn, error)) (*pgx.Conn, error) {
	start := time.Now()
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		conn, err := connect(ctx)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "53300" {
			return conn, err
		}
		if waited := time.Since(start); waited+delay > DialWait {
			return nil, fmt.Errorf("no connection slot free after waiting %s (other sessions hold the server's max_connections): %w", waited.Round(time.Second), err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
	}
}

// retryBusy retries f while the template is being accessed by another
// session (SQLSTATE 55006), which happens when databases are copied from one
// template in parallel.
func retryBusy(ctx context.Context, f func() error) error {
	for delay := 20 * time.Millisecond; ; delay *= 2 {
		err := f()
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || delay > 5*time.Second {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// dropDatabase is the statement that drops a database, closing any
// connection still open to it.
func dropDatabase(name string) string {
	return "DROP DATABASE IF EXISTS " + layout.Ident(name) + " WITH (FORCE)"
}
