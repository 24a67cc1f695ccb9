package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/migration"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/migrations"
)

const benchMigrationUsage = `bench migration [--database URL] [--rows 1000000] [--lock-timeout 2s] [--hold 6s] [--writer-interval 5ms] [--keep-existing-indexes] [--keep] [--scale 1000000,8000000 [--partitions 8]]

Seeds plain-jobs' tables, copies the database, and runs up on one copy and a
naive migration (plain CREATE INDEX, unguarded renames) on the other, each
under the same load: a live writer that does not name the key column and a
reader holding a lock on the requests table for --hold from just before the
cutover. Prints the writer's p50/p99/max latency, failed writes and the
longest ACCESS EXCLUSIVE hold per table, side by side. Creates and drops
two databases on the server of --database. Takes minutes at 1M rows.

With --scale, it instead migrates a two-table queue with plain-jobs' columns
and unique rule, and the same queue range-partitioned (--partitions monthly
partitions; 0 leaves it out), up and then down at each size, under a live writer, and prints every
step's longest writer-blocking lock and the application's longest insert
at each size side by side, with the ratio of the largest size to the
smallest. Creates and drops one database per queue and size.`

func runBenchMigration(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "bench migration", benchMigrationUsage)
	database := fs.String("database", "", databaseFlagUsage+"; the benchmark creates its own databases on that server")
	rows := fs.Int("rows", 1_000_000, "pending requests to seed (plus a tenth running, a fifth finished)")
	lockTimeout := fs.Duration("lock-timeout", migrations.DefaultLockTimeout, "up's lock timeout")
	hold := fs.Duration("hold", 0, "how long the reader holds its lock on the requests table (default 3 x --lock-timeout)")
	interval := fs.Duration("writer-interval", 0, "pause between the writer's inserts (default 5ms)")
	keepIdx := fs.Bool("keep-existing-indexes", false, "keep plain-jobs' own (class, key) indexes, which up reuses (by default both migrations build theirs under load)")
	keep := fs.Bool("keep", false, "keep the two benchmark databases")
	scale := fs.String("scale", "", "comma-separated sizes (pending requests): migrate up and down at each and compare every step's locks side by side, instead of ours against naive")
	partitions := fs.Int("partitions", 8, "with --scale: monthly partitions of the partitioned queue (0 leaves it out)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *scale != "" {
		var sizes []int
		for _, f := range strings.Split(*scale, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return &exitError{code: 2, err: fmt.Errorf("--scale %q: want comma-separated row counts of at least 1, e.g. 1000000,8000000", *scale)}
			}
			sizes = append(sizes, n)
		}
		if *partitions < 0 {
			return &exitError{code: 2, err: fmt.Errorf("--partitions %d: must not be negative (0 leaves the partitioned queue out)", *partitions)}
		}
		url, err := pgurl.Resolve(*database)
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		res, err := migration.RunScale(ctx, migration.ScaleOptions{DatabaseURL: url, Sizes: sizes, Partitions: *partitions,
			LockTimeout: *lockTimeout, WriterInterval: *interval, Keep: *keep, Out: e.stderr})
		if err != nil {
			return pgurl.RedactError(url, err)
		}
		res.Print(e.stdout)
		return nil
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
