package compat

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// queue is a test database holding one legacy schema, migrated by the real
// migration engine or left as it is.
type queue struct {
	url    string
	l      layout.Resolved
	schema legacy.Schema
	pool   *pgxpool.Pool
	c      *Client
}

// newQueue is the one fixture of the admission tests: a fresh database with
// the legacy schema s, migrated with migrations.Up when migrated is true.
func newQueue(t *testing.T, s legacy.Schema, migrated bool, opts ...Option) *queue {
	t.Helper()
	ctx := t.Context()
	url := testdb.New(t)
	if err := s.LoadURL(ctx, url, 0); err != nil {
		t.Fatal(err)
	}
	if migrated {
		migrate(t, url, s.Layout)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c, err := NewClient(Pgx(pool), s.Layout, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return &queue{url: url, l: s.Resolved, schema: s, pool: pool, c: c}
}

func migrate(t testing.TB, url string, l layout.Layout) {
	t.Helper()
	if _, err := migrations.Up(t.Context(), url, l, migrations.Options{}); err != nil {
		t.Fatalf("migrations.Up: %v", err)
	}
}

// count returns how many rows a table of the layout holds.
func (q *queue) count(t *testing.T, tbl string) int {
	t.Helper()
	var n int
	if err := q.pool.QueryRow(t.Context(), "SELECT count(*) FROM "+q.l.Table(tbl)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// keyCol is the key column after (or before) the migration.
func (q *queue) keyCol(t *testing.T) string {
	t.Helper()
	s, err := q.c.loadSchema(t.Context(), q.c.db)
	if err != nil {
		t.Fatal(err)
	}
	return s.keyCol
}

// run inserts a running job of (class, key) directly, as a worker would: a
// process row, or a job row in the second active state.
func (q *queue) run(t *testing.T, class, key string) int64 {
	t.Helper()
	ctx := t.Context()
	k := layout.Ident(q.keyCol(t))
	var id int64
	var err error
	switch q.schema.Name {
	case "plainjobs":
		err = q.pool.QueryRow(ctx, `INSERT INTO `+q.l.Table(q.l.ProcessesTable)+` (created_at, uuid, job_class, source, priority, queue, retries, retry_attempt, `+k+`, job_request_uuid) VALUES (now(), gen_random_uuid(), $1, 'test', 0, 'default', 0, 0, $2, gen_random_uuid()) RETURNING id`, class, key).Scan(&id)
	case "teamqueue":
		err = q.pool.QueryRow(ctx, `INSERT INTO `+q.l.Table(q.l.ProcessesTable)+` (uuid, kind, `+k+`, worker) VALUES (gen_random_uuid(), $1, nullif($2, ''), 'w') RETURNING id`, class, key).Scan(&id)
	case "singletable":
		err = q.pool.QueryRow(ctx, `INSERT INTO `+q.l.Table(q.l.JobsTable)+` (job_type, `+k+`, status) VALUES ($1, nullif($2, ''), 'running') RETURNING id`, class, key).Scan(&id)
	default:
		err = fmt.Errorf("unknown schema %s", q.schema.Name)
	}
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// finish moves every active job of the class out of the active set: deletes
// requests and processes, or marks jobs done.
func (q *queue) finish(t *testing.T, class string) {
	t.Helper()
	ctx := context.Background()
	cc := layout.Ident(q.l.ClassColumn)
	if q.l.SingleTable() {
		if _, err := q.pool.Exec(ctx, `UPDATE `+q.l.Table(q.l.JobsTable)+` SET status = 'done' WHERE `+cc+` = $1`, class); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, tbl := range q.l.ActiveTables() {
		if _, err := q.pool.Exec(ctx, `DELETE FROM `+q.l.Table(tbl)+` WHERE `+cc+` = $1`, class); err != nil {
			t.Fatal(err)
		}
	}
}
