package main

import (
	"context"
	"fmt"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/migration"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/migrations"
)

const benchMigrationUsage = `bench migration [--database URL] [--rows 1000000] [--lock-timeout 2s] [--hold 6s] [--writer-interval 5ms] [--keep-existing-indexes] [--keep]

Seeds plain-jobs' tables, copies the database, and runs up on one copy and a
naive migration (plain CREATE INDEX, unguarded renames) on the other, each
under the same load: a live writer that does not name the key column and a
reader holding a lock on the requests table for --hold from just before the
cutover. Prints the writer's p50/p99/max latency, failed writes and the
longest ACCESS EXCLUSIVE hold per table, side by side. Creates and drops
two databases on the server of --database. Takes minutes at 1M rows.`

func runBenchMigration(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "bench migration", benchMigrationUsage)
	database := fs.String("database", "", databaseFlagUsage+"; the benchmark creates its own databases on that server")
	rows := fs.Int("rows", 1_000_000, "pending requests to seed (plus a tenth running, a fifth finished)")
	lockTimeout := fs.Duration("lock-timeout", migrations.DefaultLockTimeout, "up's lock timeout")
	hold := fs.Duration("hold", 0, "how long the reader holds its lock on the requests table (default 3 x --lock-timeout)")
	interval := fs.Duration("writer-interval", 0, "pause between the writer's inserts (default 5ms)")
	keepIdx := fs.Bool("keep-existing-indexes", false, "keep plain-jobs' own (class, key) indexes, which up reuses (by default both migrations build theirs under load)")
	keep := fs.Bool("keep", false, "keep the two benchmark databases")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *rows < 1:
		return &exitError{code: 2, err: fmt.Errorf("--rows %d: must be at least 1", *rows)}
	case *lockTimeout <= 0:
		return &exitError{code: 2, err: fmt.Errorf("--lock-timeout %s: must be positive, e.g. 2s", *lockTimeout)}
	case *hold < 0:
		return &exitError{code: 2, err: fmt.Errorf("--hold %s: must not be negative (0 means 3 x --lock-timeout)", *hold)}
	case *interval < 0:
		return &exitError{code: 2, err: fmt.Errorf("--writer-interval %s: must not be negative (0 means 5ms)", *interval)}
	}
	url, err := pgurl.Resolve(*database)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	res, err := migration.Run(ctx, migration.Options{
		DatabaseURL: url, Rows: *rows, LockTimeout: *lockTimeout, Hold: *hold, WriterInterval: *interval,
		KeepExistingIndexes: *keepIdx, Keep: *keep, Out: e.stderr,
	})
	if err != nil {
		return pgurl.RedactError(url, err)
	}
	res.Print(e.stdout)
	return nil
}
