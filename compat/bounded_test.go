package compat

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// The bounded-cost matrix (SPEC 3 and 5): in every collation of the key
// column, every pgx execution mode and database/sql, on a fresh connection
// (custom plans) and after it (generic plans), with statistics taken before
// a burst and after it, for a class that is nine tenths of the table,
// admission and no-overlap stay exact and every admission statement, as it
// was sent, reads at most limit rows of each active table. The plans are
// the server's own: auto_explain logs each executed statement's EXPLAIN
// (ANALYZE, BUFFERS) and sends it to the client as a notice.

// boundedCollation is a key-column ordering the matrix runs in.
type boundedCollation struct {
	name string
	opts []testdb.Option
	// column, when set, is the key column's own COLLATE clause.
	column string
	// create, when set, creates the column's collation first.
	create string
}

// legacyQueue returns a fresh database in the collation holding plain-jobs'
// legacy tables, and an admin connection to it.
func (coll boundedCollation) legacyQueue(t *testing.T) (string, *pgx.Conn) {
	t.Helper()
	ctx := t.Context()
	url := testdb.New(t, coll.opts...)
	if err := legacy.PlainJobs.LoadURL(ctx, url, 0); err != nil {
		t.Fatal(err)
	}
	admin := testdb.Connect(t, url)
	if coll.create != "" {
		if _, err := admin.Exec(ctx, coll.create); err != nil {
			t.Fatalf("%v; the server must see the OS locale en_US.UTF-8 (Debian: locales, locale-gen; .ci/run installs it)", err)
		}
	}
	if coll.column != "" {
		for _, tbl := range []string{"plainjobs_jobrequest", "plainjobs_jobprocess", "plainjobs_jobresult"} {
			if _, err := admin.Exec(ctx, `ALTER TABLE `+tbl+` ALTER COLUMN unique_key TYPE varchar(255) COLLATE `+coll.column); err != nil {
				t.Fatal(err)
			}
		}
	}
	return url, admin
}

// boundedCollations are the key-column orderings the matrix runs in.
var boundedCollations = []boundedCollation{
	{name: "C"},
	{name: "ICU-database", opts: []testdb.Option{testdb.ICU("en-US")}},
	{name: "libc-en_US-database", opts: []testdb.Option{testdb.Libc("en_US.UTF-8")}},
	{name: "ICU-column", column: `"en-US-x-icu"`},
	{name: "libc-en_US-column", column: `"en_US_libc"`, create: `CREATE COLLATION "en_US_libc" (provider = libc, locale = 'en_US.UTF-8')`},
}

// execModes are pgx's execution modes; "database/sql" is pgx's stdlib.
var execModes = []struct {
	name string
	mode pgx.QueryExecMode
}{
	{"cache_statement", pgx.QueryExecModeCacheStatement},
	{"cache_describe", pgx.QueryExecModeCacheDescribe},
	{"describe_exec", pgx.QueryExecModeDescribeExec},
	{"exec", pgx.QueryExecModeExec},
	{"simple_protocol", pgx.QueryExecModeSimpleProtocol},
	{"database/sql", pgx.QueryExecModeCacheStatement},
}

const (
	hotClass  = "bounded.Hot"
	rareClass = "bounded.Rare"
	hotKey    = "hk"
	schedBase = "rep"
)

// boundedHistory is the queue as its statistics last saw it: 2,000 jobs of
// fifty other classes, a hundred keys each.
func boundedHistory(ctx context.Context, t *testing.T, conn *pgx.Conn) {
	t.Helper()
	for _, tbl := range []string{"plainjobs_jobrequest", "plainjobs_jobprocess"} {
		extra, extraVal := "", ""
		if tbl == "plainjobs_jobprocess" {
			extra, extraVal = ", job_request_uuid", ", gen_random_uuid()"
		}
		if _, err := conn.Exec(ctx, `INSERT INTO `+tbl+` (created_at, uuid, job_class, source, priority, queue, retries, retry_attempt, unique_key`+extra+`)
SELECT now(), gen_random_uuid(), 'old.C' || (i % 50), 'test', 0, 'default', 0, 0, 'k' || i`+extraVal+` FROM generate_series(1, 2000) i`); err != nil {
			t.Fatal(err)
		}
	}
}

// boundedBacklog loads the burst, after the statistics were taken (the
// hot group's rows and the schedule's last, so that a scan of the class in
// insertion order would read the rest of the class first): 40,000 requests and 4,000 processes of
// the hot class (a tenth of each in the hot group, a tenth occurrences of
// one schedule), the rest other keys, some of which sort inside the
// schedule's range in a non-bytewise collation (other case, other
// punctuation).
func boundedBacklog(ctx context.Context, t *testing.T, conn *pgx.Conn) {
	t.Helper()
	for _, tbl := range []string{"plainjobs_jobrequest", "plainjobs_jobprocess"} {
		n := 40000
		extra := ", start_at"
		extraVal := ", NULL"
		if tbl == "plainjobs_jobprocess" {
			n, extra, extraVal = 4000, ", job_request_uuid", ", gen_random_uuid()"
		}
		if _, err := conn.Exec(ctx, `ALTER TABLE `+tbl+` SET (autovacuum_enabled = false)`); err != nil {
			t.Fatal(err)
		}
		_, err := conn.Exec(ctx, `INSERT INTO `+tbl+` (created_at, uuid, job_class, source, priority, queue, retries, retry_attempt, concurrency_key`+extra+`)
SELECT now(), gen_random_uuid(), $1, 'test', 0, 'default', 0, 0, CASE
    WHEN i % 10 = 0 THEN $2
    WHEN i % 10 = 1 THEN $3 || (1700000000 + 60 * i)::text
    WHEN i % 10 = 2 THEN 'Rep:scheduled:' || i
    WHEN i % 10 = 3 THEN 'rep-scheduled-' || i
    WHEN i % 10 = 4 THEN 'rep:scheduledx' || i
    ELSE 'k' || i END`+extraVal+`
FROM generate_series(1, $4) i
ORDER BY i % 10 IN (0, 1), i`, hotClass, hotKey, SchedulePrefix(schedBase), n)
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `INSERT INTO plainjobs_jobrequest (created_at, uuid, job_class, source, priority, queue, retries, retry_attempt, concurrency_key)
VALUES (now(), gen_random_uuid(), $1, 'test', 0, 'default', 0, 0, 'r')`, rareClass); err != nil {
		t.Fatal(err)
	}
}

// explained collects the plans auto_explain sends as notices.
type explained struct {
	mu    sync.Mutex
	plans []map[string]any
	err   error
}

func (e *explained) onNotice(_ *pgconn.PgConn, n *pgconn.Notice) {
	i := strings.Index(n.Message, "plan:\n")
	if i < 0 {
		return
	}
	var p map[string]any
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := json.Unmarshal([]byte(n.Message[i+len("plan:\n"):]), &p); err != nil {
		e.err = fmt.Errorf("auto_explain notice: %w", err)
		return
	}
	e.plans = append(e.plans, p)
}

func (e *explained) take() ([]map[string]any, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ps, err := e.plans, e.err
	e.plans, e.err = nil, nil
	return ps, err
}

// loadAutoExplain makes every statement of the session log its plan with
// actual rows and buffers, to the client.
func loadAutoExplain(ctx context.Context, conn *pgx.Conn) error {
	for _, stmt := range []string{
		"LOAD 'auto_explain'",
		"SET auto_explain.log_min_duration = 0",
		"SET auto_explain.log_analyze = on",
		"SET auto_explain.log_buffers = on",
		"SET auto_explain.log_timing = off",
		"SET auto_explain.log_format = json",
		"SET auto_explain.log_level = notice",
		"SET client_min_messages = notice",
	} {
		if _, err := conn.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// scanRead is what one scan node of an active table read.
type scanRead struct {
	node, index, table string
	rows, blocks       float64
}

// activeScans lists the scan nodes of plans that read the active tables
// (by relation, or by one of their indexes for bitmap index scans).
func activeScans(plans []map[string]any, tables, indexes map[string]bool) []scanRead {
	var out []scanRead
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		typ, _ := n["Node Type"].(string)
		rel, _ := n["Relation Name"].(string)
		idx, _ := n["Index Name"].(string)
		if strings.Contains(typ, "Scan") && (tables[rel] || indexes[idx]) {
			num := func(k string) float64 { f, _ := n[k].(float64); return f }
			loops := max(num("Actual Loops"), 1)
			out = append(out, scanRead{node: typ, index: idx, table: rel,
				rows:   (num("Actual Rows") + num("Rows Removed by Filter") + num("Rows Removed by Index Recheck")) * loops,
				blocks: num("Shared Hit Blocks") + num("Shared Read Blocks")})
		}
		kids, _ := n["Plans"].([]any)
		for _, k := range kids {
			if m, ok := k.(map[string]any); ok {
				walk(m)
			}
		}
	}
	for _, p := range plans {
		if root, ok := p["Plan"].(map[string]any); ok {
			walk(root)
		}
	}
	return out
}

// boundedCase is one admission the matrix checks, over and over.
type boundedCase struct {
	name    string
	class   string
	value   func(run string, i int) any
	limit   int // rows each active table may give at most
	blocked bool
}

var boundedCases = []boundedCase{
	{name: "keyed-blocked", class: hotClass, value: func(string, int) any { return Limit(hotKey, 3) }, limit: 3, blocked: true},
	{name: "keyed-admitted", class: hotClass, value: func(run string, i int) any { return Limit(fmt.Sprintf("fresh-%s-%d", run, i), 3) }, limit: 3},
	{name: "class-blocked", class: hotClass, value: func(string, int) any { return Limit("", 5) }, limit: 5, blocked: true},
	{name: "class-admitted", class: rareClass, value: func(string, int) any { return Limit("", 1000000) }, limit: 1000000},
	{name: "no-overlap-blocked", class: hotClass, value: func(_ string, i int) any {
		return Scheduled(Limit(schedBase, 1), time.Unix(1600000000+60*int64(i), 0), NoOverlap())
	}, limit: 1, blocked: true},
	{name: "no-overlap-admitted", class: hotClass, value: func(run string, i int) any {
		return Scheduled(Limit(fmt.Sprintf("re%s%d", run, i), 1), time.Unix(1600000000, 0), NoOverlap())
	}, limit: 1},
}

func TestAdmissionIsBoundedInEveryConfiguration(t *testing.T) {
	for _, coll := range boundedCollations {
		t.Run(coll.name, func(t *testing.T) {
			// Each collation has its own database; the time is the
			// server's round trips: run them side by side.
			t.Parallel()
			ctx := t.Context()
			url, admin := coll.legacyQueue(t)
			boundedHistory(ctx, t, admin)
			migrate(t, url, legacy.PlainJobs.Layout) // ends with ANALYZE
			boundedBacklog(ctx, t, admin)
			tables := map[string]bool{"plainjobs_jobrequest": true, "plainjobs_jobprocess": true}
			indexes := map[string]bool{}
			rows, err := admin.Query(ctx, `SELECT indexname FROM pg_indexes WHERE tablename IN ('plainjobs_jobrequest', 'plainjobs_jobprocess')`)
			if err != nil {
				t.Fatal(err)
			}
			names, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				indexes[n] = true
			}
			for _, stats := range []string{"stale", "fresh"} {
				if stats == "fresh" {
					if _, err := admin.Exec(ctx, "ANALYZE"); err != nil {
						t.Fatal(err)
					}
				}
				for _, m := range execModes {
					t.Run(stats+"/"+strings.ReplaceAll(m.name, "/", "_"), func(t *testing.T) {
						runBoundedCases(t, url, stats+m.name, m.name, m.mode, tables, indexes)
					})
				}
			}
		})
	}
}

// runBoundedCases runs every case seven times on one fresh connection (five
// custom plans, then generic ones where the mode prepares) and checks each
// outcome and each execution's plan.
func runBoundedCases(t *testing.T, url, run, modeName string, mode pgx.QueryExecMode, tables, indexes map[string]bool) {
	ctx := t.Context()
	var ex explained
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = mode
	cfg.OnNotice = ex.onNotice
	var db DB
	if modeName == "database/sql" {
		sdb := stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(loadAutoExplain))
		sdb.SetMaxOpenConns(1)
		t.Cleanup(func() { _ = sdb.Close() })
		db = SQL(sdb)
	} else {
		pcfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		pcfg.ConnConfig = cfg
		pcfg.MaxConns = 1
		pcfg.AfterConnect = loadAutoExplain
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		db = Pgx(pool)
	}
	c, err := NewClient(db, legacy.PlainJobs.Layout)
	if err != nil {
		t.Fatal(err)
	}
	// The catalog read and the connection's set-up are not under test.
	if _, err := c.loadSchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.take(); err != nil {
		t.Fatal(err)
	}
	for _, bc := range boundedCases {
		for i := range 7 {
			res, err := c.Enqueue(ctx, Job{Class: bc.class, Value: bc.value(run, i)})
			if err != nil {
				t.Fatalf("%s #%d: %v", bc.name, i, err)
			}
			if res.Inserted() == bc.blocked {
				t.Fatalf("%s #%d: inserted %v, want blocked %v (%+v)", bc.name, i, res.Inserted(), bc.blocked, res.Skipped)
			}
			plans, err := ex.take()
			if err != nil {
				t.Fatal(err)
			}
			scans := activeScans(plans, tables, indexes)
			if len(scans) < len(tables) {
				t.Fatalf("%s #%d: %d scans of the active tables in %d plans; auto_explain did not report the count", bc.name, i, len(scans), len(plans))
			}
			for _, s := range scans {
				// The limit's rows, plus the index's upper levels and one
				// leaf and heap page per row read.
				maxBlocks := float64(2*min(bc.limit, 100) + 8)
				if s.node != "Index Scan" || s.rows > float64(bc.limit) || s.blocks > maxBlocks {
					t.Errorf("%s #%d: %s on %s using %q read %v rows and %v blocks; want an Index Scan of at most %d rows and %v blocks",
						bc.name, i, s.node, s.table, s.index, s.rows, s.blocks, bc.limit, maxBlocks)
				}
			}
		}
	}
	runBoundedBatches(t, c, &ex, run, tables, indexes)
}

// runBoundedBatches checks the batch statements the way runBoundedCases
// checks single ones: each case as a batch of three (its group repeated, or
// three fresh groups: the fold by rank) and all the cases in one batch (the
// count kinds gated per job, a class-wide count after keyed jobs of its
// class: the fold by predecessors), seven times each on the same
// connection. A scan node runs once per job of its kind, so it may read
// what each of those jobs may read, and no more.
func runBoundedBatches(t *testing.T, c *Client, ex *explained, run string, tables, indexes map[string]bool) {
	t.Helper()
	ctx := t.Context()
	var batches [][]boundedCase
	for _, bc := range boundedCases {
		batches = append(batches, []boundedCase{bc, bc, bc})
	}
	batches = append(batches, boundedCases)
	for bi, cases := range batches {
		for i := range 7 {
			jobs := make([]Job, len(cases))
			rows, blocks := 0.0, 0.0
			for j, bc := range cases {
				jobs[j] = Job{Class: bc.class, Value: bc.value("b"+run+strconv.Itoa(bi), i*len(cases)+j)}
				rows += float64(bc.limit)
				blocks += float64(2*min(bc.limit, 100) + 8)
			}
			res, err := c.EnqueueMany(ctx, jobs)
			if err != nil {
				t.Fatalf("batch %d #%d: %v", bi, i, err)
			}
			for j, bc := range cases {
				if res[j].Inserted() == bc.blocked {
					t.Fatalf("batch %d #%d: %s: inserted %v, want blocked %v (%+v)", bi, i, bc.name, res[j].Inserted(), bc.blocked, res[j].Skipped)
				}
			}
			plans, err := ex.take()
			if err != nil {
				t.Fatal(err)
			}
			scans := activeScans(plans, tables, indexes)
			if len(scans) < len(tables) {
				t.Fatalf("batch %d #%d: %d scans of the active tables in %d plans; auto_explain did not report the count", bi, i, len(scans), len(plans))
			}
			for _, s := range scans {
				if s.node != "Index Scan" || s.rows > rows || s.blocks > blocks {
					t.Errorf("batch %d #%d: %s on %s using %q read %v rows and %v blocks; want an Index Scan of at most %v rows and %v blocks",
						bi, i, s.node, s.table, s.index, s.rows, s.blocks, rows, blocks)
				}
			}
		}
	}
}

// TestNoOverlapIsExactInEveryCollation: an occurrence of a schedule is
// admitted, the next one and the same one again are refused while it is
// active, whatever the key column's collation, next to keys that a
// non-bytewise collation sorts inside the schedule's range.
func TestNoOverlapIsExactInEveryCollation(t *testing.T) {
	for _, coll := range boundedCollations {
		t.Run(coll.name, func(t *testing.T) {
			t.Parallel() // a database each
			ctx := t.Context()
			url, _ := coll.legacyQueue(t)
			migrate(t, url, legacy.PlainJobs.Layout)
			pool, err := pgxpool.New(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			c, err := NewClient(Pgx(pool), legacy.PlainJobs.Layout)
			if err != nil {
				t.Fatal(err)
			}
			// Keys that ICU sorts among the schedule's: other case, other
			// punctuation, a longer base.
			for _, k := range []string{"Rep:scheduled:1", "rep-scheduled-1", "rep:scheduledx", "rep;scheduled:1", "rep:Scheduled:1", "repx:scheduled:1"} {
				if res, err := c.Enqueue(ctx, Job{Class: hotClass, Value: Limit(k, 1)}); err != nil || !res.Inserted() {
					t.Fatalf("neighbour %q: %+v, %v", k, res, err)
				}
			}
			at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
			enqueue := func(occ time.Time) Result {
				t.Helper()
				res, err := c.Enqueue(ctx, Job{Class: hotClass, Value: Scheduled(Limit(schedBase, 1), occ, NoOverlap())})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			if res := enqueue(at); !res.Inserted() {
				t.Fatalf("first occurrence refused: %+v", res.Skipped)
			}
			if res := enqueue(at.Add(time.Minute)); res.Inserted() {
				t.Fatal("the next occurrence was admitted while the first is active")
			}
			if res := enqueue(at); res.Inserted() {
				t.Fatal("the same occurrence was admitted twice")
			}
			var n int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM plainjobs_jobrequest WHERE concurrency_key LIKE 'rep:scheduled:%'`).Scan(&n); err != nil || n != 1 {
				t.Fatalf("%d occurrences stored, want 1 (%v)", n, err)
			}
		})
	}
}

var _ = sql.ErrNoRows

// TestSlotAcquisitionIsBounded: acquiring a slot of a group with limit 3
// whose limit was lowered from 1000 (its 1000 slot rows not swept yet)
// reads at most a few rows of the slot table, in every execution mode, with
// statistics that say such groups are the whole table (taken before 30,000
// slots of other groups were added) and after them; the group's status
// reads its own rows only.
func TestSlotAcquisitionIsBounded(t *testing.T) {
	ctx := t.Context()
	q := newQueue(t, legacy.PlainJobs, true)
	admin := testdb.Connect(t, q.url)
	// Each run's group had its limit lowered from 1000 to 3: 1000 slot
	// rows, released, that the sweep has not deleted yet. The statistics
	// are taken while those groups are the whole table.
	var groups []string
	for _, stats := range []string{"stale", "fresh"} {
		for _, m := range execModes {
			groups = append(groups, "slots.Hot::"+stats+m.name)
		}
	}
	for _, stmt := range []string{
		`ALTER TABLE concurrency_slots SET (autovacuum_enabled = false)`,
		`INSERT INTO concurrency_slots (group_name, slot, concurrency_limit, acquired_at)
		 SELECT gr, g, 1000, now() FROM unnest($1::text[]) gr, generate_series(0, 999) g`,
		`ANALYZE concurrency_slots`,
		`INSERT INTO concurrency_slots (group_name, slot, job_id, worker_id, concurrency_limit, acquired_at, expires_at)
		 SELECT 'slots.G' || (g / 10), g % 10, 'j' || g, 'w', 10, now(), now() + interval '1 hour' FROM generate_series(0, 29999) g`,
	} {
		var args []any
		if strings.Contains(stmt, "$1") {
			args = append(args, groups)
		}
		if _, err := admin.Exec(ctx, stmt, args...); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	tables := map[string]bool{"concurrency_slots": true}
	indexes := map[string]bool{}
	rows, err := admin.Query(ctx, `SELECT indexname FROM pg_indexes WHERE tablename = 'concurrency_slots'`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		indexes[n] = true
	}
	for _, stats := range []string{"stale", "fresh"} {
		if stats == "fresh" {
			if _, err := admin.Exec(ctx, "ANALYZE concurrency_slots"); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range execModes {
			t.Run(stats+"/"+strings.ReplaceAll(m.name, "/", "_"), func(t *testing.T) {
				var ex explained
				db := explainedDB(t, q.url, m.name, m.mode, &ex)
				s, err := NewSlots(db, legacy.PlainJobs.Layout, SlotsOptions{})
				if err != nil {
					t.Fatal(err)
				}
				group := "slots.Hot::" + stats + m.name
				for i := range 7 {
					l, ok, err := s.Acquire(ctx, group, 3, fmt.Sprint("job", i), "w", time.Minute)
					if err != nil || ok != (i < 3) {
						t.Fatalf("acquire #%d: %v, %v", i, ok, err)
					}
					_ = l
					plans, err := ex.take()
					if err != nil {
						t.Fatal(err)
					}
					scans := activeScans(plans, tables, indexes)
					if len(scans) == 0 {
						t.Fatalf("acquire #%d: no scan of the slot table in %d plans", i, len(plans))
					}
					for _, sc := range scans {
						if sc.node == "Seq Scan" || sc.rows > 10 || sc.blocks > 20 {
							t.Errorf("acquire #%d: %s using %q read %v rows and %v blocks; want an index range of a few rows", i, sc.node, sc.index, sc.rows, sc.blocks)
						}
					}
				}
				// Status of the group reads its own slot rows (every one is
				// listed), never the other groups'.
				if _, err := s.Status(ctx, group); err != nil {
					t.Fatal(err)
				}
				plans, err := ex.take()
				if err != nil {
					t.Fatal(err)
				}
				for _, sc := range activeScans(plans, tables, indexes) {
					if sc.node == "Seq Scan" || sc.rows > 1000+10 { // its rows, and the versions the acquisitions left
						t.Errorf("status: %s using %q read %v rows; want the group's 1000 (and a few dead versions) at most", sc.node, sc.index, sc.rows)
					}
				}
			})
		}
	}
}

// explainedDB is a handle on one fresh connection in the given mode whose
// statements' plans go to ex.
func explainedDB(t *testing.T, url, modeName string, mode pgx.QueryExecMode, ex *explained) DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = mode
	cfg.OnNotice = ex.onNotice
	if modeName == "database/sql" {
		sdb := stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(loadAutoExplain))
		sdb.SetMaxOpenConns(1)
		t.Cleanup(func() { _ = sdb.Close() })
		return SQL(sdb)
	}
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.ConnConfig = cfg
	pcfg.MaxConns = 1
	pcfg.AfterConnect = loadAutoExplain
	pool, err := pgxpool.NewWithConfig(t.Context(), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return Pgx(pool)
}
