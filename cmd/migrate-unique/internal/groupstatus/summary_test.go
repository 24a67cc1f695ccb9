package groupstatus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	benchdashboard "github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/dashboard"
	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/scratch"
	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/groupstatus"
	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// summaryQueue is a scratch plain-jobs queue filled by the dashboard
// benchmark's Fill with groups groups and 10 jobs each, a paused class
// and a group with 12 rescheduled jobs, and a connection to it.
func summaryQueue(t *testing.T, url, name string, groups int, cfg func(*pgx.ConnConfig)) (layout.Resolved, *pgx.Conn, *compat.Slots) {
	t.Helper()
	ctx := t.Context()
	q, err := scratch.New(ctx, url, name, legacy.PlainJobs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Drop(context.Background()) })
	l := q.Layout
	c, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	c.RuntimeParams["search_path"] = "pg_catalog,pg_temp"
	if cfg != nil {
		cfg(c)
	}
	conn, err := pgx.ConnectConfig(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if err := benchdashboard.Fill(ctx, conn, l, groups, 10*groups); err != nil {
		t.Fatal(err)
	}
	slots, err := compat.NewSlots(compat.Pgx(conn), layout.Layout{Schema: l.Schema, RequestsTable: layout.PlainJobsRequests}, compat.SlotsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := slots.Overrides().PauseClass(ctx, "bench.Class1", "summary test"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO `+l.Table(layout.ReschedulesTable)+` (job_id, group_name, reschedules, first_at, last_at)
SELECT 'many-' || i, 'bench.Class2::k-2', i, pg_catalog.now(), pg_catalog.now() FROM pg_catalog.generate_series(1, 12) i`); err != nil {
		t.Fatal(err)
	}
	return l, conn, slots
}

// TestReadSummariesMatchesRead checks that the groups page's read reports,
// group by group, what `concurrency status --json`'s read shows: the same
// groups in the same order, limits and their sources, job counts (by
// index probes for a few groups, by one aggregate pass for many), slots
// held, expired and over the limit, rescheduled jobs; and the pauses and
// the queue note.
func TestReadSummariesMatchesRead(t *testing.T) {
	url := testdb.New(t)
	for _, groups := range []int{40, 400} { // under and over probeGroups
		t.Run(fmt.Sprint(groups), func(t *testing.T) {
			ctx := t.Context()
			l, conn, slots := summaryQueue(t, url, fmt.Sprintf("summary_%d", groups), groups, nil)
			rep, err := groupstatus.Read(ctx, conn, slots, l, "")
			if err != nil {
				t.Fatal(err)
			}
			sums, err := groupstatus.ReadSummaries(ctx, conn, slots, l)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Groups) <= groups || len(sums.Groups) != len(rep.Groups) {
				t.Fatalf("Read: %d groups (want more than the %d filled: the paused class), ReadSummaries: %d", len(rep.Groups), groups, len(sums.Groups))
			}
			if fmt.Sprint(sums.PausedClasses) != fmt.Sprint(rep.PausedClasses) || sums.QueueNote != rep.QueueNote {
				t.Errorf("pauses %v, note %q; Read: %v, %q", sums.PausedClasses, sums.QueueNote, rep.PausedClasses, rep.QueueNote)
			}
			jobs, capped := 0, 0
			for i, g := range rep.Groups {
				want, got := groupstatus.SummaryOf(g), sums.Groups[i]
				if got.Rescheduled < got.RescheduledJobs || got.Rescheduled > got.RescheduledJobs && got.RescheduledJobs != 10 {
					t.Errorf("%s: %d rescheduled jobs, %d listed", got.Group, got.Rescheduled, got.RescheduledJobs)
				}
				if got.Rescheduled > 10 {
					capped++
				}
				got.Rescheduled = want.Rescheduled
				if b1, b2 := jsonOf(t, got), jsonOf(t, want); b1 != b2 {
					t.Errorf("group #%d:\nReadSummaries %s\nRead          %s", i, b1, b2)
				}
				if got.Queued != nil {
					jobs += int(*got.Queued)
				}
			}
			if capped != 1 || jobs < 10*groups {
				t.Errorf("%d groups with more than 10 rescheduled jobs (want 1), %d queued jobs counted over the groups (want at least %d): the test would prove little", capped, jobs, 10*groups)
			}
		})
	}
}

func jsonOf(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// plans collects the plans auto_explain sends as notices.
type plans struct {
	mu  sync.Mutex
	all []map[string]any
	err error
}

func (p *plans) onNotice(_ *pgconn.PgConn, n *pgconn.Notice) {
	i := strings.Index(n.Message, "plan:\n")
	if i < 0 {
		return
	}
	var m map[string]any
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := json.Unmarshal([]byte(n.Message[i+len("plan:\n"):]), &m); err != nil {
		p.err = err
		return
	}
	p.all = append(p.all, m)
}

func (p *plans) take() ([]map[string]any, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	all, err := p.all, p.err
	p.all, p.err = nil, nil
	return all, err
}

// scan is what one scan node of a plan read.
type scan struct {
	node, table string
	loops, rows float64
}

// scansOf lists the scan nodes of plans that read one of tables (by
// name: the plans of a session that reads one queue's schema).
func scansOf(all []map[string]any, tables map[string]float64) []scan {
	var out []scan
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		typ, _ := n["Node Type"].(string)
		rel, _ := n["Relation Name"].(string)
		if _, ok := tables[rel]; ok && strings.Contains(typ, "Scan") {
			num := func(k string) float64 { f, _ := n[k].(float64); return f }
			loops := max(num("Actual Loops"), 1)
			out = append(out, scan{node: typ, table: rel, loops: loops,
				rows: (num("Actual Rows") + num("Rows Removed by Filter") + num("Rows Removed by Index Recheck")) * loops})
		}
		kids, _ := n["Plans"].([]any)
		for _, k := range kids {
			if m, ok := k.(map[string]any); ok {
				walk(m)
			}
		}
	}
	for _, p := range all {
		if root, ok := p["Plan"].(map[string]any); ok {
			walk(root)
		}
	}
	return out
}

// TestReadSummariesIsBounded checks the groups page's read the way the
// admission's bounded-cost tests check an enqueue, from the server's own
// plans (auto_explain, actual rows): at 200 and at 2,000 groups (10 jobs
// each) it makes the same statements, and each scan of a queue or runtime
// table runs once and reads at most that table's rows: no statement or
// probe per group, each table read at most once per mention, whatever
// the number of groups.
func TestReadSummariesIsBounded(t *testing.T) {
	url := testdb.New(t)
	var statements []int
	for _, groups := range []int{200, 2000} {
		ctx := t.Context()
		p := &plans{}
		schema := fmt.Sprintf("bounded_%d", groups)
		l, conn, slots := summaryQueue(t, url, schema, groups, func(c *pgx.ConnConfig) { c.OnNotice = p.onNotice })
		size := map[string]float64{}
		for _, table := range []string{l.RequestsTable, l.ProcessesTable, layout.SlotsTable, layout.LimitsTable, layout.ReschedulesTable} {
			var n float64
			if err := conn.QueryRow(ctx, `SELECT pg_catalog.count(*)::float8 FROM `+l.Table(table)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			size[table] = n
		}
		for _, stmt := range []string{
			"LOAD 'auto_explain'",
			"SET auto_explain.log_min_duration = 0",
			"SET auto_explain.log_analyze = on",
			"SET auto_explain.log_timing = off",
			"SET auto_explain.log_format = json",
			"SET auto_explain.log_level = notice",
			"SET client_min_messages = notice",
		} {
			if _, err := conn.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		if _, err := p.take(); err != nil {
			t.Fatal(err)
		}
		sums, err := groupstatus.ReadSummaries(ctx, conn, slots, l)
		if err != nil {
			t.Fatal(err)
		}
		all, err := p.take()
		if err != nil {
			t.Fatal(err)
		}
		if len(sums.Groups) <= groups {
			t.Fatalf("%d groups read, %d filled", len(sums.Groups), groups)
		}
		statements = append(statements, len(all))
		scans := scansOf(all, size)
		seen := map[string]bool{}
		for _, s := range scans {
			seen[s.table] = true
			if s.loops > 1 || s.rows > size[s.table] {
				t.Errorf("%d groups: a %s of %s ran %v times and read %v rows; the table holds %v", groups, s.node, s.table, s.loops, s.rows, size[s.table])
			}
		}
		for table := range size {
			if !seen[table] {
				t.Errorf("%d groups: no plan read %s (%d plans): auto_explain did not report it", groups, table, len(all))
			}
		}
		t.Logf("%d groups: %d statements, %d scans of the queue's tables", groups, len(all), len(scans))
	}
	if statements[0] != statements[1] {
		t.Errorf("the read made %d statements at 200 groups, %d at 2,000: its cost follows the number of groups", statements[0], statements[1])
	}
}
