package testdb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/layout"
)

// Roles are the roles of a managed server (RDS, Cloud SQL, ...), made for
// one test database by ManagedRoles: nobody is a superuser, the tables
// belong to a role nobody logs in as, and the people and programs that use
// them log in as other roles.
type Roles struct {
	// Owner owns every table and sequence of the schemas ManagedRoles was
	// given, and may create in them. NOLOGIN.
	Owner string
	// Migrator is a member of Owner (so it owns the tables through the
	// membership), with LOGIN and nothing else: no SUPERUSER, CREATEROLE,
	// CREATEDB or pg_read_all_stats. MigratorURL connects as it.
	Migrator, MigratorURL string
	// App has SELECT, INSERT, UPDATE and DELETE on every table of the
	// schemas, USAGE on their sequences and schemas, and nothing else (no
	// CREATE): an application's least-privilege role. AppURL connects as it.
	App, AppURL string
}

// ManagedRoles makes the roles of a managed server for the database at
// dbURL: a NOLOGIN owner that takes over every table and sequence of
// schemas (and gets CREATE on them), a login role that is a member of it
// (the migration's role), and a DML-only application role. Role names are
// derived from the database's name, which is unique, so tests that run at
// the same time on one server never share a role (roles are cluster-wide).
// When the test ends, the database is dropped and then the roles.
func ManagedRoles(t TB, dbURL string, schemas ...string) *Roles {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("testdb: parse the database URL: %v", err)
	}
	dbName := cfg.Database
	sum := sha256.Sum256([]byte(dbName))
	base := "mu_r" + hex.EncodeToString(sum[:6])
	r := &Roles{Owner: base + "_owner", Migrator: base + "_migrator", App: base + "_app"}
	password := randomPassword()
	srv, err := Shared()
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		// The roles own objects and hold privileges in this database only:
		// drop it first (the harness's own drop, later, finds it gone).
		ctx := context.Background()
		if err := srv.DropDatabase(ctx, dbName); err != nil {
			t.Logf("testdb: %v", err)
		}
		err := srv.admin(ctx, func(conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+layout.Ident(r.App)+", "+layout.Ident(r.Migrator)+", "+layout.Ident(r.Owner))
			return err
		})
		if err != nil {
			t.Logf("testdb: drop the roles of %s: %v", dbName, err)
		}
	})
	err = srv.admin(ctx, func(conn *pgx.Conn) error {
		for _, stmt := range []string{
			"CREATE ROLE " + layout.Ident(r.Owner) + " NOLOGIN",
			"CREATE ROLE " + layout.Ident(r.Migrator) + " LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB PASSWORD " + layout.Literal(password) + " IN ROLE " + layout.Ident(r.Owner),
			"CREATE ROLE " + layout.Ident(r.App) + " LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB PASSWORD " + layout.Literal(password),
		} {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("testdb: create the managed roles: %v", err)
	}
	conn, err := Dial(ctx, dbURL)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	defer conn.Close(ctx)
	for _, s := range schemas {
		rows, err := conn.Query(ctx, `SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') ORDER BY c.relname`, s)
		if err != nil {
			t.Fatalf("testdb: list the tables of %s: %v", s, err)
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("testdb: list the tables of %s: %v", s, err)
		}
		stmts := []string{
			"GRANT USAGE, CREATE ON SCHEMA " + layout.Ident(s) + " TO " + layout.Ident(r.Owner),
			"GRANT USAGE ON SCHEMA " + layout.Ident(s) + " TO " + layout.Ident(r.App),
		}
		for _, tb := range tables {
			// Sequences owned by a table's columns follow the table.
			stmts = append(stmts, "ALTER TABLE "+tb+" OWNER TO "+layout.Ident(r.Owner))
		}
		stmts = append(stmts,
			"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "+layout.Ident(s)+" TO "+layout.Ident(r.App),
			"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA "+layout.Ident(s)+" TO "+layout.Ident(r.App))
		for _, stmt := range stmts {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				t.Fatalf("testdb: %s: %v", stmt, err)
			}
		}
	}
	if r.MigratorURL, err = URLAs(dbURL, r.Migrator, password); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	if r.AppURL, err = URLAs(dbURL, r.App, password); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	return r
}

// URLAs returns dbURL with its user and password replaced, in the same form
// (a postgres:// URL or key=value settings).
func URLAs(dbURL, user, password string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil || u.Scheme == "" {
		if strings.Contains(dbURL, "=") {
			// Later settings win in a key=value string.
			return dbURL + " user=" + kvQuote(user) + " password=" + kvQuote(password), nil
		}
		return "", fmt.Errorf("cannot set the user of database URL %q", dbURL)
	}
	u.User = url.UserPassword(user, password)
	return u.String(), nil
}

func kvQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func randomPassword() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
