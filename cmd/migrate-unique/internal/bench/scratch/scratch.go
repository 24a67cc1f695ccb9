// Package scratch gives the database benchmarks a queue of their own: a
// schema on the server they measure, holding a legacy queue's tables created
// from its real DDL (testdata/legacy) and migrated by the real migration
// (migrations.Up), so that what a benchmark measures is what users run, and
// nothing outside that schema is touched.
package scratch

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// Queue is one scratch queue: a schema of its own holding a migrated legacy
// queue and the runtime's tables.
type Queue struct {
	// Layout is the queue's layout, in its scratch schema.
	Layout layout.Resolved
	url    string
}

// New creates schema name on the server of url, creates the tables of the
// legacy schema s in it from s.DDL (whose table names are unqualified), and
// migrates them with migrations.Up. On error nothing is left behind. The
// caller drops the queue with Drop.
func New(ctx context.Context, url, name string, s legacy.Schema) (*Queue, error) {
	l := s.Layout
	l.Schema = name
	rl, err := l.Resolve()
	if err != nil {
		return nil, err
	}
	q := &Queue{Layout: rl, url: url}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, pgurl.RedactError(url, fmt.Errorf("connect: %w", err))
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+layout.Ident(name)); err != nil {
		return nil, fmt.Errorf("create the scratch schema %s: %w", layout.Ident(name), err)
	}
	create := func() error {
		if _, err := conn.Exec(ctx, "SET search_path TO "+layout.Ident(name)); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, s.DDL); err != nil {
			return fmt.Errorf("create %s's legacy tables: %w", s.Name, err)
		}
		if _, err := migrations.Up(ctx, url, l, migrations.Options{}); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		return nil
	}
	if err := create(); err != nil {
		_ = q.Drop(context.Background())
		return nil, fmt.Errorf("scratch schema %s: %w", layout.Ident(name), err)
	}
	return q, nil
}

// Drop drops the queue's schema and everything in it.
func (q *Queue) Drop(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, q.url)
	if err != nil {
		return pgurl.RedactError(q.url, fmt.Errorf("connect: %w", err))
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+layout.Ident(q.Layout.Schema)+" CASCADE"); err != nil {
		return fmt.Errorf("drop the scratch schema %s: %w", layout.Ident(q.Layout.Schema), err)
	}
	return nil
}
