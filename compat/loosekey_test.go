package compat

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// looseKeyColumns turns the key column of plain-jobs' migrated tables into
// one whose equality is not byte equality: citext, or varchar in a
// nondeterministic ICU collation that ignores case.
var looseKeyColumns = map[string][]string{
	"citext": {
		"CREATE EXTENSION IF NOT EXISTS citext WITH SCHEMA public",
		"ALTER TABLE plainjobs_jobrequest ALTER COLUMN concurrency_key TYPE public.citext",
		"ALTER TABLE plainjobs_jobprocess ALTER COLUMN concurrency_key TYPE public.citext",
		"ALTER TABLE plainjobs_jobresult ALTER COLUMN concurrency_key TYPE public.citext",
	},
	"nondeterministic ICU": {
		"CREATE COLLATION public.case_insensitive (provider = icu, locale = 'und-u-ks-level2', deterministic = false)",
		`ALTER TABLE plainjobs_jobrequest ALTER COLUMN concurrency_key TYPE varchar(255) COLLATE public.case_insensitive`,
		`ALTER TABLE plainjobs_jobprocess ALTER COLUMN concurrency_key TYPE varchar(255) COLLATE public.case_insensitive`,
		`ALTER TABLE plainjobs_jobresult ALTER COLUMN concurrency_key TYPE varchar(255) COLLATE public.case_insensitive`,
	},
}

// TestLooseKeysAreExactUnderConcurrency: with a key column whose equality
// ignores case, the old unique rule allowed one active job for Acct-7,
// ACCT-7 and acct-7 together. One at a time the runtime agrees, and from 16
// goroutines, each on its own connection, enqueueing the three spellings
// (singly and in batches) at limit 1 and 2 while jobs finish, the group
// never holds more than its limit: an observer counts the group with the
// column's own equality after every admission.
func TestLooseKeysAreExactUnderConcurrency(t *testing.T) {
	testdb.Heavy(t)
	for name, ddl := range looseKeyColumns {
		t.Run(name, func(t *testing.T) {
			q := newQueue(t, legacy.PlainJobs, true)
			ctx := t.Context()
			for _, stmt := range ddl {
				if _, err := q.pool.Exec(ctx, stmt); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			c, err := NewClient(Pgx(q.pool), q.l.Layout)
			if err != nil {
				t.Fatal(err)
			}
			// One at a time.
			for i, key := range []string{"Acct-7", "ACCT-7", "acct-7"} {
				res, err := c.Enqueue(ctx, Job{Class: "loose.A", Value: limited(key, 1)})
				if err != nil {
					t.Fatal(err)
				}
				if res.Inserted() != (i == 0) {
					t.Fatalf("%s at limit 1 after %d spellings: inserted %v; the old unique rule allowed exactly one", key, i, res.Inserted())
				}
			}

			spellings := []string{"Acct-7", "ACCT-7", "acct-7", "aCCT-7"}
			const workers, rounds = 16, 40
			pool, err := pgxpool.New(ctx, q.url)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			pool.Config().MaxConns = workers + 2
			active := func(class string) (int, error) {
				var n int
				err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM plainjobs_jobrequest WHERE job_class = $1 AND concurrency_key = 'acct-7')
  + (SELECT count(*) FROM plainjobs_jobprocess WHERE job_class = $1 AND concurrency_key = 'acct-7')`, class).Scan(&n)
				return n, err
			}
			var admitted, skipped atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), 7))
					for r := range rounds {
						class, limit := "loose.B", 1
						if w%2 == 1 {
							class, limit = "loose.C", 2
						}
						var err error
						if r%5 == 4 {
							var res []Result
							res, err = c.EnqueueMany(ctx, []Job{
								{Class: class, Value: limited(spellings[rng.IntN(len(spellings))], limit)},
								{Class: class, Value: limited(spellings[rng.IntN(len(spellings))], limit)},
								{Class: class, Value: limited("other", limit)},
							})
							for _, x := range res {
								if x.Inserted() {
									admitted.Add(1)
								} else {
									skipped.Add(1)
								}
							}
						} else {
							var res Result
							res, err = c.Enqueue(ctx, Job{Class: class, Value: limited(spellings[rng.IntN(len(spellings))], limit)})
							if res.Inserted() {
								admitted.Add(1)
							} else {
								skipped.Add(1)
							}
						}
						if err != nil {
							errs <- err
							return
						}
						n, err := active(class)
						if err != nil {
							errs <- err
							return
						}
						if n > limit {
							errs <- fmt.Errorf("worker %d round %d: %s::acct-7 holds %d active jobs in all its spellings, limit %d", w, r, class, n, limit)
							return
						}
						if rng.IntN(3) == 0 {
							// A job finishes.
							if _, err := pool.Exec(ctx, `DELETE FROM plainjobs_jobrequest WHERE id = (SELECT id FROM plainjobs_jobrequest WHERE job_class = $1 ORDER BY random() LIMIT 1)`, class); err != nil {
								errs <- err
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if admitted.Load() == 0 || skipped.Load() == 0 {
				t.Fatalf("admitted %d, skipped %d: the hammer did not race at the limit", admitted.Load(), skipped.Load())
			}
			t.Logf("%s: %d admitted, %d skipped", name, admitted.Load(), skipped.Load())
		})
	}
}
