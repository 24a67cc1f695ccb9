package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/demo"
	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/groupstatus"
	"github.com/migrate-unique/migrate-unique/compat"
)

const demoUsage = `demo [--database URL] [--rows N] [--keep]

Shows the whole migration, step by step, on a real PostgreSQL database:
  1. a legacy plain-jobs queue with N pending jobs (and N/10 running, N/5
     finished);
  2. plan, then up online with progress, and its figures (duration,
     longest lock);
  3. enqueues through the compat runtime: a legacy UniqueKey job, a
     class-wide limit, a per-key limit of 3, a retry, a scheduled key;
  4. jobs run under slot leases, the group's concurrency status, and a
     limit override of 0 that blocks admission and execution;
  5. the rewrite of a small embedded job module, as a diff (needs go on
     PATH);
  6. down refused while a group breaks the old unique rule, then the clean
     round trip.
Without --database it starts a throwaway PostgreSQL server from the
installed server binaries (initdb, pg_ctl), or, without them, creates a
fresh database on the server the tests use, and removes it afterwards.
Exits 1 if any step fails.`

func runDemo(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "demo", demoUsage)
	database := fs.String("database", "", "URL of an empty PostgreSQL database to run in, e.g. postgres://user@host:5432/demo (default: a throwaway server); the password is never printed")
	rows := fs.Int("rows", demo.DefaultRows, "pending jobs in the legacy queue (plus a tenth as many running and a fifth as many finished)")
	keep := fs.Bool("keep", false, "leave the throwaway server (or database) in place and print its URL")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &exitError{code: 2, err: fmt.Errorf("unexpected argument %q; every setting is a flag (see -h)", fs.Arg(0))}
	}
	if *rows < 1 {
		return &exitError{code: 2, err: fmt.Errorf("--rows %d: give 1 or more (default %d)", *rows, demo.DefaultRows)}
	}
	return demo.Run(ctx, demo.Options{
		DatabaseURL: *database,
		Rows:        *rows,
		Keep:        *keep,
		Out:         e.stdout,
		Terminal:    e.isTerminal,
		PrintStatus: func(w io.Writer, groups []compat.GroupStatus) {
			printConcurrencyStatus(w, groupstatus.FromRuntime(groups, nil), time.Now())
		},
	})
}
