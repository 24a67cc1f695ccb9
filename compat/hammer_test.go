package compat

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// hammerGroup is one kind of job the hammer enqueues.
type hammerGroup struct {
	class string
	value keyedJob
}

// TestHammerNoGroupExceedsItsLimit: 64 goroutines, each on its own
// connection, enqueue thousands of jobs into keyed groups with limits 0, 1,
// 3 and 10 and into classes with class-wide limits (one mixed with keyed
// jobs), and into groups whose limit only an override in concurrency_limits
// sets (keyed and class-wide), singly, in batches (mixed ones of up to
// eight jobs, and repeats of one group) and in their own transactions,
// while a worker
// moves and finishes jobs. After every admission an observer connection
// checks every group against its limit; at the end the rows agree with what
// was admitted and finished.
func TestHammerNoGroupExceedsItsLimit(t *testing.T) {
	hammer(t, []hammerGroup{
		{"hammer.A", limited("k0", 0)}, {"hammer.A", limited("k1", 1)},
		{"hammer.A", limited("k3", 3)}, {"hammer.A", limited("k10", 10)},
		{"hammer.A", keyedJob{}}, // keyless, unlimited: no check, shared class lock only
		{"hammer.B", limited("", 3)},
		{"hammer.C", limited("", 10)}, {"hammer.C", keyedJob{key: "free"}}, {"hammer.C", limited("one", 1)},
		{"hammer.D", keyedJob{key: "ov"}}, {"hammer.D", keyedJob{key: "free"}},
	}, map[[2]string]int{
		{"hammer.A", "k3"}: 2, // an override below the code's limit
		{"hammer.D", "ov"}: 5, // a keyed group limited by its override alone
	})
}

// TestHammerOverrides is the hammer on groups whose limits only overrides
// set: a keyed group, and a class-wide limit on keyless jobs that have none
// in code while keyed jobs of the class are inserted. Nothing else is in
// the queue, so the worker side keeps freeing their slots and admissions
// keep racing at the limit.
func TestHammerOverrides(t *testing.T) {
	hammer(t, []hammerGroup{
		{"hammer.D", keyedJob{key: "ov"}},
		{"hammer.E", keyedJob{}}, {"hammer.E", keyedJob{}}, {"hammer.E", limited("k", 2)},
	}, map[[2]string]int{
		{"hammer.D", "ov"}: 5,
		{"hammer.E", ""}:   10,
	})
}

// hammer runs the hammer over groups, with overrides (group -> limit) set in
// concurrency_limits first.
func hammer(t *testing.T, groups []hammerGroup, overrides map[[2]string]int) {
	t.Helper()
	testdb.Heavy(t)
	q := newQueue(t, legacy.PlainJobs, true)
	ctx := t.Context()
	keyedLimit := map[[2]string]int{}
	classLimit := map[string]int{}
	for _, g := range groups {
		switch {
		case g.value.limited && g.value.key != "":
			keyedLimit[[2]string{g.class, g.value.key}] = g.value.limit
		case g.value.limited:
			classLimit[g.class] = g.value.limit
		}
	}
	for g, n := range overrides {
		if _, err := q.pool.Exec(ctx, `INSERT INTO `+q.l.Table(layout.LimitsTable)+` (group_name, concurrency_limit) VALUES ($1, $2)`,
			layout.GroupName(g[0], g[1]), n); err != nil {
			t.Fatal(err)
		}
		if g[1] == "" {
			classLimit[g[0]] = n
		} else {
			keyedLimit[g] = n
		}
	}

	const workers, attempts = 64, 50
	admitted := make(chan string, workers*attempts*2)
	var (
		mu       sync.Mutex
		inserted = map[[2]string]int{}
		skipped  int
	)
	var wg sync.WaitGroup
	errs := make(chan error, workers+2)
	// Every connection is opened before any worker starts, so a failed
	// connect ends the test with no worker still using a connection that
	// the cleanups close.
	conns := make([]*pgx.Conn, workers)
	clients := make([]*Client, workers)
	for w := range clients {
		conn, err := testdb.Dial(ctx, q.url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		conns[w] = conn
		// The invariant is the limit, not the lock wait: 64 writers on a
		// loaded 2-core CI machine once waited past the default 5 s
		// (PostgreSQL 14, .ci/run), which is ErrLockTimeout, not an
		// over-admission.
		if clients[w], err = NewClient(Pgx(conn), q.l.Layout, WithLockWait(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	// A failed check ends the test while workers run: the test's context
	// is cancelled first, then this waits for them before the cleanups
	// above close their connections.
	t.Cleanup(wg.Wait)
	for w, c := range clients {
		conn := conns[w]
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range attempts {
				n := 1
				switch i % 4 {
				case 0:
					n = 2 + rng.IntN(7) // a mixed batch, overlapping other workers' batches
				case 2:
					n = 2 + rng.IntN(3) // a batch that repeats one group (the fan-out shape)
				}
				jobs := make([]Job, n)
				fanOut := groups[rng.IntN(len(groups))]
				for j := range jobs {
					g := groups[rng.IntN(len(groups))]
					if i%4 == 2 {
						g = fanOut
					}
					jobs[j] = Job{Class: g.class, Value: g.value, Args: map[string]int{"worker": w, "attempt": i}}
				}
				var res []Result
				var err error
				if i%8 == 1 { // in the caller's transaction
					var tx pgx.Tx
					if tx, err = conn.Begin(ctx); err == nil {
						if res, err = c.EnqueueManyTx(ctx, Pgx(tx), jobs); err == nil {
							err = tx.Commit(ctx)
						} else {
							_ = tx.Rollback(ctx)
						}
					}
				} else {
					res, err = c.EnqueueMany(ctx, jobs)
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d attempt %d: %w", w, i, err)
					return
				}
				mu.Lock()
				for j, r := range res {
					if r.Inserted() {
						inserted[[2]string{jobs[j].Class, IdentityOf(jobs[j].Value).Key}]++
					} else {
						skipped++
					}
				}
				mu.Unlock()
				admitted <- fmt.Sprintf("worker %d attempt %d", w, i)
			}
		}()
	}

	// The worker side: moves pending jobs to running (one statement, so a
	// job never leaves the active set on the way) and finishes running ones.
	finished := map[[2]string]int{}
	stop := make(chan struct{})
	var side sync.WaitGroup
	side.Add(1)
	go func() {
		defer side.Done()
		conn, err := testdb.Dial(context.Background(), q.url)
		if err != nil {
			errs <- err
			return
		}
		defer conn.Close(context.Background())
		req, proc := q.l.Table(q.l.RequestsTable), q.l.Table(q.l.ProcessesTable)
		move := `WITH m AS (DELETE FROM ` + req + ` WHERE id IN (SELECT id FROM ` + req + ` ORDER BY random() LIMIT 3) RETURNING *)
INSERT INTO ` + proc + ` (created_at, uuid, job_class, parameters, priority, source, queue, retries, retry_attempt, concurrency_key, started_at, job_request_uuid)
SELECT now(), gen_random_uuid(), job_class, parameters, priority, source, queue, retries, retry_attempt, concurrency_key, now(), uuid FROM m`
		finish := `DELETE FROM ` + proc + ` WHERE id IN (SELECT id FROM ` + proc + ` ORDER BY random() LIMIT 2) RETURNING job_class, concurrency_key`
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := conn.Exec(context.Background(), move); err != nil {
				errs <- fmt.Errorf("move: %w", err)
				return
			}
			rows, err := conn.Query(context.Background(), finish)
			if err != nil {
				errs <- fmt.Errorf("finish: %w", err)
				return
			}
			for rows.Next() {
				var class, key string
				if err := rows.Scan(&class, &key); err != nil {
					errs <- err
					return
				}
				finished[[2]string{class, key}]++
			}
			rows.Close()
		}
	}()

	observer := testdb.Connect(t, q.url)
	check := func(when string) {
		t.Helper()
		keyed, classes, keyless := q.activeCounts(t, observer)
		for g, lim := range keyedLimit {
			if keyed[g] > lim {
				t.Fatalf("%s: group %s has %d active jobs, limit %d", when, layout.GroupName(g[0], g[1]), keyed[g], lim)
			}
		}
		for class, lim := range classLimit {
			if keyless[class] > lim {
				t.Fatalf("%s: class %s has %d active keyless jobs, class-wide limit %d", when, class, keyless[class], lim)
			}
			if class == "hammer.B" && classes[class] > lim {
				t.Fatalf("%s: class %s has %d active jobs, class-wide limit %d", when, class, classes[class], lim)
			}
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	checks := 0
loop:
	for {
		select {
		case when := <-admitted:
			check("after " + when)
			checks++
		case err := <-errs:
			t.Fatal(err)
		case <-done:
			break loop
		}
	}
	for len(admitted) > 0 {
		check("after " + <-admitted)
		checks++
	}
	close(stop)
	side.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	check("at the end")

	// Final state: every admitted job is active or was finished by the worker.
	keyed, _, keyless := q.activeCounts(t, observer)
	total := 0
	for g, n := range inserted {
		total += n
		present := keyed[g]
		if g[1] == "" {
			present = keyless[g[0]]
		}
		if present+finished[g] != n {
			t.Errorf("group %s: admitted %d, but %d active + %d finished", layout.GroupName(g[0], g[1]), n, present, finished[g])
		}
	}
	if inserted[[2]string{"hammer.A", "k0"}] != 0 {
		t.Errorf("limit 0 admitted %d jobs", inserted[[2]string{"hammer.A", "k0"}])
	}
	for g := range overrides {
		if inserted[g] == 0 {
			t.Errorf("group %s admitted nothing: the hammer did not exercise its override", layout.GroupName(g[0], g[1]))
		}
	}
	if checks != workers*attempts || skipped == 0 || total == 0 {
		t.Fatalf("checks %d, admitted %d, skipped %d: the hammer did not exercise both outcomes", checks, total, skipped)
	}
	t.Logf("%d attempts, %d jobs admitted, %d skipped, %d checks", workers*attempts, total, skipped, checks)
}

// activeCounts counts active jobs by group, by class, and keyless by class.
func (q *queue) activeCounts(t *testing.T, conn *pgx.Conn) (keyed map[[2]string]int, classes, keyless map[string]int) {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT job_class, concurrency_key, count(*) FROM (
    SELECT job_class, concurrency_key FROM `+q.l.Table(q.l.RequestsTable)+`
    UNION ALL SELECT job_class, concurrency_key FROM `+q.l.Table(q.l.ProcessesTable)+`) a GROUP BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	keyed, classes, keyless = map[[2]string]int{}, map[string]int{}, map[string]int{}
	for rows.Next() {
		var class, key string
		var n int
		if err := rows.Scan(&class, &key, &n); err != nil {
			t.Fatal(err)
		}
		keyed[[2]string{class, key}] += n
		classes[class] += n
		if key == "" {
			keyless[class] += n
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return keyed, classes, keyless
}
