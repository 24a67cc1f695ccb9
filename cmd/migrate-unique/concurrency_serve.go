package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/dashboard"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
)

const concurrencyServeUsage = `concurrency serve [--database URL] [layout flags] [--listen 127.0.0.1:8080] [--token T] [--read-only] [--refresh 5s]

Serves the concurrency dashboard: every group with its limit and where it
comes from, its queued, running and active jobs, slots held, expired and
over the limit, sorted by pressure; each group's slots, holders, waiting
and running jobs; and the operator's switches (set or clear a limit, pause
or resume a class, release a slot), each confirmed first. It reads what
'concurrency status' reads and switches with the calls 'concurrency set',
'pause', 'resume' and 'release' make. The layout flags are status's.

Every page needs a login with the token: --token, else $` + dashboard.TokenEnv + `,
else a random one printed once as a login link (loopback only). An address
other than loopback is refused without a token. --read-only hides and
refuses the switches. Stop it with Ctrl-C.`

func runConcurrencyServe(ctx context.Context, e *env, args []string) error {
	f := newConcurrencyLayoutFlags(e, "serve", concurrencyServeUsage)
	listen := f.fs.String("listen", "127.0.0.1:8080", "host:port to listen on; an address other than loopback needs a token")
	token := f.fs.String("token", "", "the token operators log in with (default $"+dashboard.TokenEnv+", else a random one printed at start; a flag shows in the process list, prefer the variable)")
	readOnly := f.fs.Bool("read-only", false, "hide and refuse the switches: the page only shows")
	refresh := f.fs.Duration("refresh", 5*time.Second, "how often the groups page refreshes itself")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	if *refresh < time.Second {
		return &exitError{code: 2, err: fmt.Errorf("--refresh %v: give 1s or more", *refresh)}
	}
	if *token == "" {
		*token = os.Getenv(dashboard.TokenEnv)
	}
	ql, err := f.layout.Layout()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	url, err := pgurl.Resolve(*f.database)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	// Fail now on a database that cannot be reached, not on the first page.
	conn, err := pgurl.Connect(ctx, url, "migrate-unique concurrency serve")
	if err != nil {
		return err
	}
	conn.Close(context.Background())
	ln, err := dashboard.Listen(*listen, *token)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	srv, err := dashboard.New(dashboard.Options{URL: url, Layout: ql, Token: *token, ReadOnly: *readOnly, Log: e.stderr, Refresh: *refresh})
	if err != nil {
		ln.Close()
		return err
	}
	addr := "http://" + ln.Addr().String()
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		addr = fmt.Sprintf("http://HOST:%d", tcp.Port)
	}
	mode := ""
	if *readOnly {
		mode = ", read-only"
	}
	fmt.Fprintf(e.stdout, "concurrency dashboard of %s (schema %s%s) on %s/\n", pgurl.Describe(url), ql.Schema, mode, addr)
	if *token == "" {
		fmt.Fprintf(e.stdout, "log in: %s/login?token=%s\n", addr, srv.Token())
	} else {
		fmt.Fprintf(e.stdout, "log in at %s/login with the token (--token or $%s)\n", addr, dashboard.TokenEnv)
	}
	return srv.Serve(ctx, ln)
}
