package testdb_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
)

// logLines collects a Finder's log lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestAServerWithoutHeadroomIsNotUsed: a server with fewer free connections
// than the tests need is not used; the harness starts a throwaway cluster
// of its own and says so, or, when it cannot, fails saying what to do.
// A server with headroom is used, and the log says how much it has.
func TestAServerWithoutHeadroomIsNotUsed(t *testing.T) {
	t.Parallel()
	srv, err := testdb.Shared()
	if err != nil {
		t.Fatal(err)
	}
	c, err := testdb.ReadConnections(t.Context(), testdb.Connect(t, testdb.New(t)))
	if err != nil {
		t.Fatal(err)
	}
	// This test's own session is on its database (mu_*): a test's.
	if c.Max <= 0 || c.InUse < 1 || c.Tests < 1 || c.Tests > c.InUse || c.Free() >= c.Max || c.ForTests() < c.Free() {
		t.Fatalf("connection slots read as %+v", c)
	}

	var log logLines
	used, err := testdb.Finder{EnvURL: srv.URL, Headroom: 1, Logf: log.logf}.Find(t.Context())
	if err != nil || used.Source != testdb.SourceEnv || !strings.Contains(log.String(), "using the env server") || !strings.Contains(log.String(), "connections for the tests (max_connections") {
		t.Fatalf("a server with headroom: %v, %+v; log:\n%s", err, used, log.String())
	}

	short := c.Max + 1 // more than any server of this size has free
	log = logLines{}
	f := testdb.FromEnvironment()
	f.EnvURL, f.Headroom, f.Logf = srv.URL, short, log.logf
	f.BinDir, f.Version = "", ""
	own, err := f.Find(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := own.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	if own.Source != testdb.SourceThrowaway || !strings.Contains(log.String(), fmt.Sprintf("not using the env server %s", strings.TrimPrefix(srv.Describe(), string(srv.Source)+" server "))) ||
		!strings.Contains(log.String(), fmt.Sprintf("the tests need %d at once: starting a throwaway cluster", short)) {
		t.Fatalf("a server without headroom: %+v; log:\n%s", own, log.String())
	}

	_, err = testdb.Finder{EnvURL: srv.URL, Headroom: short, BinDirs: []string{t.TempDir()}}.Find(t.Context())
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("fewer than the %d the tests need at once", short)) || !strings.Contains(err.Error(), "raise max_connections") {
		t.Fatalf("a server without headroom and no binaries: %v", err)
	}
}

// TestDialWaitsForAFreeSlot: while the server refuses a session for want of
// a slot (53300: here a role's connection limit, the same error as a full
// server), Dial waits for one; it gives up when its context ends.
func TestDialWaitsForAFreeSlot(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	admin := testdb.Connect(t, url)
	role := fmt.Sprintf("mu_dial_%d", time.Now().UnixNano())
	password := "Dial-" + role
	if _, err := admin.Exec(t.Context(), fmt.Sprintf("CREATE ROLE %s LOGIN CONNECTION LIMIT 1 PASSWORD '%s'", role, password)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	as, err := testdb.URLAs(url, role, password)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := testdb.Dial(t.Context(), as)
	if err != nil {
		t.Fatal(err)
	}
	// Longer than the few seconds a dial used to wait.
	const held = 7 * time.Second
	release := time.AfterFunc(held, func() { holder.Close(context.Background()) })
	defer release.Stop()
	start := time.Now()
	conn, err := testdb.Dial(t.Context(), as)
	if err != nil {
		t.Fatalf("Dial while the only slot was held for %s: %v", held, err)
	}
	defer conn.Close(context.Background())
	if waited := time.Since(start); waited < held-time.Second {
		t.Fatalf("Dial connected after %s, while the slot was held for %s", waited, held)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	var other *pgx.Conn
	if other, err = testdb.Dial(ctx, as); err == nil {
		other.Close(context.Background())
		t.Fatal("a second session of a role limited to one connected")
	}
	if ctx.Err() == nil {
		t.Fatalf("Dial gave up before its context ended: %v", err)
	}
}
