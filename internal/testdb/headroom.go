package testdb

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// TestHeadroom is how many free connections a server must have, when a
// test process starts, for the tests to use it: the most that the test
// processes of one `go test ./...` hold at once, all of them together
// (measured on a quiet server: see docs/testing.md), with a margin. Shared
// asks for it; on a server with fewer free connections (other clients hold
// them) the harness starts a throwaway cluster of its own instead, so that
// a shortage of connections never fails a test at random.
const TestHeadroom = 60

// Connections is what a server has of connection slots: its
// max_connections, the slots reserved for superusers and for roles with
// pg_use_reserved_connections (PostgreSQL 16), and the client sessions
// connected now (every session counts: the server's own, other clients',
// and the tests' of other processes).
type Connections struct {
	Max, Reserved, InUse int
}

// Free is how many more sessions the server accepts from a role without
// reserved slots.
func (c Connections) Free() int { return c.Max - c.Reserved - c.InUse }

func (c Connections) String() string {
	return fmt.Sprintf("%d of %d connections free (max_connections %d, %d reserved, %d in use)", max(c.Free(), 0), c.Max, c.Max, c.Reserved, c.InUse)
}

// ReadConnections reads the server's connection slots through conn.
func ReadConnections(ctx context.Context, conn *pgx.Conn) (Connections, error) {
	var c Connections
	// reserved_connections exists from PostgreSQL 16 on: missing_ok.
	err := conn.QueryRow(ctx, `SELECT pg_catalog.current_setting('max_connections')::pg_catalog.int4,
       pg_catalog.current_setting('superuser_reserved_connections')::pg_catalog.int4
         + coalesce(pg_catalog.current_setting('reserved_connections', true), '0')::pg_catalog.int4,
       (SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type OPERATOR(pg_catalog.=) 'client backend')::pg_catalog.int4`).
		Scan(&c.Max, &c.Reserved, &c.InUse)
	if err != nil {
		return Connections{}, fmt.Errorf("read the server's connection slots: %w", err)
	}
	return c, nil
}

// withHeadroom returns srv when it has f.Headroom free connections (or
// f.Headroom is 0), else a throwaway cluster started in its place; either
// way the log says which and why.
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
	if c.Free() >= f.Headroom {
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
