package demo

import (
	"context"
	"fmt"
	"io"

	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// database is where the demo runs, and how to remove it.
type database struct {
	url string
	// srv and name are set when the demo made the database itself.
	srv  *testdb.Server
	name string
}

// openDatabase returns the user's database (checked to hold none of the
// tables the demo creates) or makes one: a throwaway server first, else a
// fresh database on the server the tests would use.
// The finder's Logf is replaced by one that writes to out.
func openDatabase(ctx context.Context, given string, finder testdb.Finder, out io.Writer) (*database, error) {
	if given != "" {
		if err := checkEmpty(ctx, given); err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "database: %s (given with --database)\n", pgurl.Describe(given))
		return &database{url: given}, nil
	}
	finder.Logf = func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	srv, err := finder.StartThrowaway(ctx)
	if err != nil {
		fmt.Fprintf(out, "no throwaway server (%v); looking for a running one\n", err)
		finder.Logf = nil
		if srv, err = finder.Find(ctx); err != nil {
			return nil, fmt.Errorf("%w; or pass --database with the URL of an empty database", err)
		}
	}
	name, err := srv.CreateDatabase(ctx, "demo", "")
	if err != nil {
		_ = srv.Stop()
		return nil, fmt.Errorf("create the demo's database on %s: %w", srv.Describe(), err)
	}
	fmt.Fprintf(out, "created database %s on the %s\n", name, srv.Describe())
	return &database{url: srv.DatabaseURL(name), srv: srv, name: name}, nil
}

// close removes what openDatabase made, or with keep says how to reach it.
func (db *database) close(ctx context.Context, keep bool, out io.Writer) error {
	if db.srv == nil {
		return nil
	}
	if keep {
		fmt.Fprintf(out, "\nkept: psql '%s'\n", pgurl.Redact(db.url))
		if db.srv.Source == testdb.SourceThrowaway {
			fmt.Fprintf(out, "the throwaway server runs until you stop it: %s\n", db.srv.StopCommand())
		} else {
			fmt.Fprintf(out, "drop it when done: dropdb %s (on %s)\n", db.name, db.srv.Describe())
		}
		return nil
	}
	if db.srv.Source == testdb.SourceThrowaway {
		if err := db.srv.Stop(); err != nil {
			return fmt.Errorf("stop the throwaway server: %w", err)
		}
		fmt.Fprintf(out, "stopped and removed the throwaway server\n")
		return nil
	}
	if err := db.srv.DropDatabase(ctx, db.name); err != nil {
		return fmt.Errorf("drop the demo's database %s: %w", db.name, pgurl.RedactError(db.srv.URL, err))
	}
	fmt.Fprintf(out, "dropped database %s\n", db.name)
	return nil
}

// demoTables are the tables the demo creates: the queue's, the tool's and
// the runtime's.
var demoTables = []string{layout.PlainJobsRequests, layout.PlainJobsProcesses, layout.PlainJobsResults,
	layout.VersionTable, layout.LimitsTable, layout.SlotsTable, layout.ReschedulesTable}

// checkEmpty refuses a database that already holds one of the demo's
// tables: the demo creates them itself and must never touch a real queue.
func checkEmpty(ctx context.Context, u string) error {
	conn, err := pgurl.Connect(ctx, u, "")
	if err != nil {
		return fmt.Errorf("connect to --database: %w", pgurl.RedactError(u, err))
	}
	defer conn.Close(context.Background())
	l := legacy.PlainJobs.Resolved
	for _, t := range demoTables {
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", l.Table(t)).Scan(&exists); err != nil {
			return pgurl.RedactError(u, err)
		}
		if exists {
			return fmt.Errorf("database %s already has table %s: the demo creates its own queue and never touches an existing one; give it an empty database (createdb migrate_unique_demo) or omit --database for a throwaway server",
				pgurl.Describe(u), l.Table(t))
		}
	}
	return nil
}
