package main

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
)

// cancelDroppingProxy forwards PostgreSQL connections to server (host:port,
// or the path of a unix socket: a throwaway cluster's) and swallows every
// cancel request: a network on which the server never hears that a
// statement should stop.
func cancelDroppingProxy(t *testing.T, server string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer client.Close()
				head := make([]byte, 8)
				if _, err := io.ReadFull(client, head); err != nil {
					return
				}
				if binary.BigEndian.Uint32(head[0:4]) == 16 && binary.BigEndian.Uint32(head[4:8]) == 80877102 {
					return // a CancelRequest: dropped
				}
				network := "tcp"
				if strings.HasPrefix(server, "/") {
					network = "unix"
				}
				up, err := net.Dial(network, server)
				if err != nil {
					return
				}
				defer up.Close()
				if _, err := up.Write(head); err != nil {
					return
				}
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, client); done <- struct{}{} }()
				go func() { _, _ = io.Copy(client, up); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return ln.Addr().String()
}

// upThroughLostCancels starts the built command's up on a team queue whose
// connections go through cancelDroppingProxy, and returns once its first
// index build waits for a writer (held until the test ends), with the pid
// of the build's session.
func upThroughLostCancels(t *testing.T) (c *child, db string, probe *pgx.Conn, pid int) {
	t.Helper()
	bin := builtTool(t)
	ctx := context.Background()
	db = teamQueueDB(t)
	cfg, err := pgx.ParseConfig(db)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	server := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if strings.HasPrefix(cfg.Host, "/") { // a unix socket's directory
		server = filepath.Join(cfg.Host, ".s.PGSQL."+strconv.Itoa(int(cfg.Port)))
	}
	u.Host = cancelDroppingProxy(t, server)
	q := u.Query()
	q.Del("host") // the proxy's address, not the socket's directory
	u.RawQuery = q.Encode()
	probe = testdb.Connect(t, db)
	holder, err := testdb.Connect(t, db).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Rollback(context.Background()) })
	if _, err := holder.Exec(ctx, `UPDATE "Billing Queue"."JobRequests" SET priority = priority WHERE false`); err != nil {
		t.Fatal(err)
	}
	c = startCommand(t, exec.Command(bin, append(append([]string{"up"}, teamQueueFlags...), "--database", u.String())...))
	pid = awaitWaiting(t, probe, c, "the writer", notGate)
	t.Cleanup(func() { _, _ = probe.Exec(context.Background(), "SELECT pg_cancel_backend($1)", pid) })
	return c, db, probe, pid
}

// When the server never gets the cancel request (here a proxy swallows
// it), an interrupted run waits the 30 seconds it gives the server, then
// drops its connection and says so, naming the session that may go on; the
// next run names that session too, and it is the one that still builds.
func TestInterruptWhoseCancelIsLostNamesTheSession(t *testing.T) {
	t.Parallel() // most of it is the 30 seconds the run waits for the server
	ctx := context.Background()
	c, db, probe, pid := upThroughLostCancels(t)
	c.interrupt(t, syscall.SIGINT)
	m := regexp.MustCompile(`its session \(backend pid (\d+)\) may still run it and hold the run lock; 'migrate-unique status' shows it, and SELECT pg_cancel_backend\((\d+)\) ends the statement`).FindStringSubmatch(c.output())
	if m == nil || m[1] != strconv.Itoa(pid) || m[2] != strconv.Itoa(pid) {
		t.Fatalf("the run whose cancel request was lost does not name its session %d:\n%s", pid, c.output())
	}
	var active bool
	if err := probe.QueryRow(ctx, "SELECT state = 'active' AND query LIKE 'CREATE INDEX CONCURRENTLY%' FROM pg_stat_activity WHERE pid = $1", pid).Scan(&active); err != nil || !active {
		t.Fatalf("session %d is not the build that goes on: %v %v", pid, active, err)
	}
	if st := mustCLI(t, db, "status"); !strings.Contains(st, "run lock: an orphaned session holds this layout's run lock") || !strings.Contains(st, "backend pid "+strconv.Itoa(pid)) {
		t.Fatalf("status does not name the session that goes on:\n%s", st)
	}
}

// A second SIGINT while the first one's cancel request waits for the
// server ends the command at once, by the signal: it does not wait for the
// answer (which never comes here) nor print that the connection was lost.
func TestSecondInterruptQuitsAtOnce(t *testing.T) {
	t.Parallel()
	c, _, _, _ := upThroughLostCancels(t)
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	c.waitLine(t, `^migrate-unique: interrupted; stopping`)
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the command did not exit after a second SIGINT:\n%s", c.output())
	}
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT || strings.Contains(c.output(), "connection to the server was lost") {
		t.Fatalf("after a second SIGINT the command ended with %v, want killed by SIGINT at once:\n%s", c.cmd.ProcessState, c.output())
	}
}
