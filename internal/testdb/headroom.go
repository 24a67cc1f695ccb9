package testdb

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// TestHeadroom is how many connections the tests may need at once on a
// server, all the test processes of one `go test ./...` together: the
// heaviest test's (the compat hammer holds 64; testdb.Heavy lets one such
// test run at a time across every process on the server) plus what the
// other test processes hold meanwhile (up to about 20 on a 2-core machine),
// with a margin. A run measured 70 at most (docs/testing.md). Shared asks
// a server for it, not counting the sessions of tests (theirs are part of
// it); on a server where other clients leave less, the harness starts a
// throwaway cluster of its own instead, so that a shortage of connections
// never fails a test at random.
const TestHeadroom = 90

// Connections is what a server has of connection slots: its
// max_connections, the slots reserved for superusers and for roles with
// pg_use_reserved_connections (PostgreSQL 16), the client sessions
// connected now, and how many of those are tests' (on a database of this
// harness, mu_*).
type Connections struct {
	Max, Reserved, InUse, Tests int
}

// Free is how many more sessions the server accepts now from a role
// without reserved slots.
func (c Connections) Free() int { return c.Max - c.Reserved - c.InUse }

// ForTests is how many sessions the tests can have at once: the slots that
// neither reserved ones nor other clients' sessions take.
func (c Connections) ForTests() int { return c.Max - c.Reserved - (c.InUse - c.Tests) }

func (c Connections) String() string {
	return fmt.Sprintf("%d connections for the tests (max_connections %d, %d reserved, %d in use by other clients, %d by tests)",
		max(c.ForTests(), 0), c.Max, c.Reserved, c.InUse-c.Tests, c.Tests)
}

// ReadConnections reads the server's connection slots through conn.
func ReadConnections(ctx context.Context, conn *pgx.Conn) (Connections, error) {
	var c Connections
	// reserved_connections exists from PostgreSQL 16 on: missing_ok.
	err := conn.QueryRow(ctx, `SELECT pg_catalog.current_setting('max_connections')::pg_catalog.int4,
       pg_catalog.current_setting('superuser_reserved_connections')::pg_catalog.int4
         + coalesce(pg_catalog.current_setting('reserved_connections', true), '0')::pg_catalog.int4,
       pg_catalog.count(*)::pg_catalog.int4,
       (pg_catalog.count(*) FILTER (WHERE datname OPERATOR(pg_catalog.~~) 'mu\_%'))::pg_catalog.int4
FROM pg_catalog.pg_stat_activity WHERE backend_type OPERATOR(pg_catalog.=) 'client backend'`).
		Scan(&c.Max, &c.Reserved, &c.InUse, &c.Tests)
	if err != nil {
		return Connections{}, fmt.Errorf("read the server's connection slots: %w", err)
	}
	return c, nil
}

// withHeadroom returns srv when it leaves the tests f.Headroom connections
// (or f.Headroom is 0), else a throwaway cluster started in its place;
// either way the log says which and why.
func (f Finder) withHeadroom(ctx context.Context, srv *Server) (*Server, error) {
	if f.Headroom == 0 {
		return srv, nil
	}
	var c Connections
	err := srv.admin(ctx, func(conn *pgx.Conn) (err error) {
		c, err = ReadConnections(ctx, conn)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoServer, srv.Describe(), err)
	}
	if c.ForTests() >= f.Headroom {
		f.logf("using the %s: %s; the tests need %d", srv.Describe(), c, f.Headroom)
		return srv, nil
	}
	f.logf("not using the %s: %s, and the tests need %d at once: starting a throwaway cluster of our own instead", srv.Describe(), c, f.Headroom)
	own, err := f.StartThrowaway(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: the %s has %s, fewer than the %d the tests need at once, and no throwaway cluster could start instead (%v): free connections there (or raise max_connections), install the PostgreSQL server binaries, or set %s to a server with headroom",
			ErrNoServer, srv.Describe(), c, f.Headroom, err, EnvURL)
	}
	return own, nil
}

func (f Finder) logf(format string, args ...any) {
	if f.Logf != nil {
		f.Logf(format, args...)
	}
}
