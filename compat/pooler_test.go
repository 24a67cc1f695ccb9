package compat

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// TestExactThroughPgBouncer: 32 clients, each on its own connection through
// a real PgBouncer in transaction pool mode, enqueue into keyed groups with
// limits 1 and 3 and a class-wide limit 5, singly and in batches, in the pgx modes that work behind
// a transaction pooler (exec, simple protocol) and through database/sql; no
// group ever ends above its limit, and each ends exactly at it.
func TestExactThroughPgBouncer(t *testing.T) {
	testdb.Heavy(t)
	q := newQueue(t, legacy.PlainJobs, true)
	bouncer := testdb.PgBouncer(t, q.url)
	for _, m := range []struct {
		name string
		mode pgx.QueryExecMode
		sql  bool
	}{
		{"exec", pgx.QueryExecModeExec, false},
		{"simple_protocol", pgx.QueryExecModeSimpleProtocol, false},
		{"database_sql_exec", pgx.QueryExecModeExec, true},
	} {
		t.Run(m.name, func(t *testing.T) {
			ctx := t.Context()
			class := "pooler." + m.name
			limits := map[string]int{"one": 1, "three": 3}
			var admitted atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, 32)
			for w := range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cfg, err := pgx.ParseConfig(bouncer)
					if err != nil {
						errs <- err
						return
					}
					cfg.DefaultQueryExecMode = m.mode
					var db DB
					if m.sql {
						sdb := stdlib.OpenDB(*cfg)
						sdb.SetMaxOpenConns(1)
						defer sdb.Close()
						db = SQL(sdb)
					} else {
						pcfg, err := pgxpool.ParseConfig(bouncer)
						if err != nil {
							errs <- err
							return
						}
						pcfg.ConnConfig, pcfg.MaxConns = cfg, 1
						pool, err := pgxpool.NewWithConfig(ctx, pcfg)
						if err != nil {
							errs <- err
							return
						}
						defer pool.Close()
						db = Pgx(pool)
					}
					c, err := NewClient(db, legacy.PlainJobs.Layout)
					if err != nil {
						errs <- err
						return
					}
					for i := range 12 {
						var v any
						switch i % 3 {
						case 0:
							v = Limit("one", 1)
						case 1:
							v = Limit("three", 3)
						default:
							v = Limit("", 5) // class-wide: every job of the class
						}
						jobs := []Job{{Class: class, Value: v}}
						if i%4 == 3 { // a batch of every group, behind the pooler too
							jobs = []Job{{Class: class, Value: Limit("three", 3)}, {Class: class, Value: Limit("one", 1)}, {Class: class, Value: Limit("", 5)}, {Class: class, Value: Limit("three", 3)}}
						}
						res, err := c.EnqueueMany(ctx, jobs)
						if err != nil {
							errs <- fmt.Errorf("client %d: %w", w, err)
							return
						}
						for _, r := range res {
							if r.Inserted() {
								admitted.Add(1)
							}
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			var total int
			if err := q.pool.QueryRow(ctx, "SELECT count(*) FROM plainjobs_jobrequest WHERE job_class = $1", class).Scan(&total); err != nil {
				t.Fatal(err)
			}
			// The class-wide limit 5 counts the keyed jobs too: once the
			// groups hold 4, one keyless job fits; keyed jobs are admitted
			// up to their own limits whatever the class holds.
			for key, limit := range limits {
				var n int
				if err := q.pool.QueryRow(ctx, "SELECT count(*) FROM plainjobs_jobrequest WHERE job_class = $1 AND concurrency_key = $2", class, key).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != limit {
					t.Errorf("group %s::%s holds %d jobs, want exactly its limit %d", class, key, n, limit)
				}
			}
			var keyless int
			if err := q.pool.QueryRow(ctx, "SELECT count(*) FROM plainjobs_jobrequest WHERE job_class = $1 AND concurrency_key = ''", class).Scan(&keyless); err != nil {
				t.Fatal(err)
			}
			if keyless > 5 || int64(total) != admitted.Load() {
				t.Errorf("%d keyless jobs (class-wide limit 5), %d rows for %d admissions", keyless, total, admitted.Load())
			}
		})
	}
}
