package compat

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/lib/pq"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// driverClient is one driver's client, created before the migration, and
// what its enqueues saw.
type driverClient struct {
	name    string
	c       *Client
	workers int // a single *pgx.Conn serves one goroutine at a time
	ops     atomic.Int64
	mu      sync.Mutex
	errs    []error
}

func (d *driverClient) fail(err error) {
	d.mu.Lock()
	d.errs = append(d.errs, err)
	d.mu.Unlock()
}

// driverClients opens one client per driver on url: pgx's pool and a single
// pgx connection, database/sql over pgx's stdlib (its default statement
// cache) and over lib/pq.
func driverClients(t *testing.T, url string, l layout.Layout) []*driverClient {
	t.Helper()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	viaStdlib := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { viaStdlib.Close() })
	connector, err := pq.NewConnector(url)
	if err != nil {
		t.Fatal(err)
	}
	viaPQ := sql.OpenDB(connector)
	t.Cleanup(func() { viaPQ.Close() })
	var out []*driverClient
	for _, d := range []struct {
		name    string
		db      DB
		workers int
	}{
		{"pgx pool", Pgx(pool), 4},
		{"pgx conn", Pgx(conn), 1},
		{"database/sql pgx stdlib", SQL(viaStdlib), 4},
		{"database/sql lib/pq", SQL(viaPQ), 4},
	} {
		c, err := NewClient(d.db, l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &driverClient{name: d.name, c: c, workers: d.workers})
	}
	return out
}

// TestEveryDriverFollowsTheMigration: clients of every driver, created
// before up, enqueue limit-1 jobs of many keys from many goroutines before,
// during and after up and then down. Each client reads the catalog again
// when a statement finds it stale (after up the column unique_key is gone,
// after down concurrency_key), so not one enqueue fails, with at most the
// one retry the recovery does; no key ever has more than one active job;
// and every job reported inserted is there.
func TestEveryDriverFollowsTheMigration(t *testing.T) {
	ctx := t.Context()
	s := legacy.PlainJobs
	url := testdb.New(t)
	if err := s.LoadURL(ctx, url, 0); err != nil {
		t.Fatal(err)
	}
	clients := driverClients(t, url, s.Layout)

	var next atomic.Int64
	var inserted sync.Map // key -> *atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, d := range clients {
		for range d.workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					// About eight enqueues race for each key, from every
					// driver, and new keys keep coming in every phase.
					key := "k" + strconv.FormatInt(next.Add(1)/8, 10)
					r, err := d.c.Enqueue(ctx, Job{Class: "drivers", Value: legacyJob{key}})
					if err != nil {
						d.fail(fmt.Errorf("key %s: %w", key, err))
						continue
					}
					d.ops.Add(1)
					if r.Inserted() {
						n, _ := inserted.LoadOrStore(key, new(atomic.Int64))
						n.(*atomic.Int64).Add(1)
					}
				}
			}()
		}
	}
	// progress waits until every client has enqueued 20 more jobs.
	progress := func(phase string) {
		t.Helper()
		base := map[*driverClient]int64{}
		for _, d := range clients {
			base[d] = d.ops.Load()
		}
		deadline := time.Now().Add(2 * time.Minute)
		for _, d := range clients {
			for d.ops.Load() < base[d]+20 {
				if time.Now().After(deadline) {
					close(stop)
					wg.Wait()
					t.Fatalf("%s: %s made no progress: %v", phase, d.name, d.errs)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	keyColumns := func(want string) {
		t.Helper()
		for _, d := range clients {
			d.c.mu.Lock()
			got := ""
			if d.c.schema != nil {
				got = d.c.schema.keyCol
			}
			d.c.mu.Unlock()
			if got != want {
				t.Errorf("%s: the client's view of the key column is %q, want %q (it did not read the catalog again)", d.name, got, want)
			}
		}
	}

	total := func() (n int64) {
		for _, d := range clients {
			n += d.ops.Load()
		}
		return n
	}
	// migrate runs up or down under the enqueues, some of which it sees.
	migrate := func(direction string, do func(context.Context, string, layout.Layout, migrations.Options) (*migrations.Report, error)) {
		t.Helper()
		before := total()
		if _, err := do(ctx, url, s.Layout, migrations.Options{}); err != nil {
			t.Fatalf("%s under the enqueues: %v", direction, err)
		}
		t.Logf("%s: %d enqueues while it ran", direction, total()-before)
		if total() == before {
			t.Fatalf("no enqueue finished while %s ran", direction)
		}
	}

	progress("before up")
	keyColumns(layout.LegacyKeyColumn)
	migrate("up", migrations.Up)
	progress("after up")
	keyColumns(layout.KeyColumn)
	migrate("down", migrations.Down)
	progress("after down")
	keyColumns(layout.LegacyKeyColumn)
	close(stop)
	wg.Wait()

	for _, d := range clients {
		for _, err := range d.errs {
			t.Errorf("%s: an enqueue failed: %v", d.name, err)
		}
	}
	rows, err := testdb.Connect(t, url).Query(ctx, `SELECT unique_key, count(*) FROM plainjobs_jobrequest WHERE job_class = 'drivers' GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int64{}
	for rows.Next() {
		var key string
		var n int64
		if err := rows.Scan(&key, &n); err != nil {
			t.Fatal(err)
		}
		stored[key] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	keys := 0
	inserted.Range(func(k, v any) bool {
		keys++
		if n := v.(*atomic.Int64).Load(); n != 1 || stored[k.(string)] != 1 {
			t.Errorf("key %s: %d enqueues inserted, %d rows stored; want 1 and 1", k, n, stored[k.(string)])
		}
		delete(stored, k.(string))
		return true
	})
	for k, n := range stored {
		t.Errorf("key %s: %d rows stored that no enqueue reported inserted", k, n)
	}
	t.Logf("%d enqueues of %d keys across up and down", total(), keys)
}
