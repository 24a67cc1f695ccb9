package groupstatus_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/scratch"
	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/groupstatus"
	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }

// TestCountAllMatchesCountStar counts a few groups (index probes) and many
// (one aggregate pass) and checks every count against count(*): keyed and
// keyless groups, a group with no job, queued and running jobs.
func TestCountAllMatchesCountStar(t *testing.T) {
	ctx := t.Context()
	url := testdb.New(t)
	q, err := scratch.New(ctx, url, "count_test", legacy.PlainJobs)
	if err != nil {
		t.Fatal(err)
	}
	l := q.Layout
	conn := testdb.Connect(t, url)
	if _, err := conn.Exec(ctx, `INSERT INTO `+l.Table(l.RequestsTable)+` (created_at, uuid, job_class, priority, source, queue, retries, retry_attempt, concurrency_key)
SELECT now(), gen_random_uuid(), 'C' || (i % 3), 0, 's', 'default', 0, 0, CASE WHEN i % 5 = 0 THEN '' ELSE 'k-' || (i % 40) END FROM generate_series(1, 2000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO `+l.Table(l.ProcessesTable)+` (created_at, uuid, job_class, priority, source, queue, retries, retry_attempt, concurrency_key, job_request_uuid, started_at)
SELECT now(), gen_random_uuid(), 'C' || (i % 3), 0, 's', 'default', 0, 0, 'k-' || (i % 7), gen_random_uuid(), now() FROM generate_series(1, 300) i`); err != nil {
		t.Fatal(err)
	}
	counter, note := groupstatus.NewCounter(ctx, conn, l)
	if counter == nil {
		t.Fatal(note)
	}
	var all []groupstatus.Group
	for c := range 4 { // C3 has no job
		all = append(all, groupstatus.Group{Group: fmt.Sprintf("C%d", c), Class: fmt.Sprintf("C%d", c)})
		for k := range 45 { // k-40 .. k-44 have no job
			all = append(all, groupstatus.Group{Group: fmt.Sprintf("C%d::k-%d", c, k), Class: fmt.Sprintf("C%d", c), Key: fmt.Sprintf("k-%d", k)})
		}
	}
	want := func(table, class, key string) int64 {
		var n int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+l.Table(table)+` WHERE job_class = $1 AND ($2 = '' OR concurrency_key = $2)`, class, key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, groups := range [][]groupstatus.Group{all[:3], all} { // probes, then the aggregate
		counts, err := counter.CountAll(ctx, conn, groups)
		if err != nil {
			t.Fatal(err)
		}
		nonzero := 0
		for i, g := range groups {
			q, r := want(l.RequestsTable, g.Class, g.Key), want(l.ProcessesTable, g.Class, g.Key)
			if counts[i].Queued != q || counts[i].Running != r {
				t.Errorf("%d groups: %s counted %d queued, %d running; count(*) says %d, %d", len(groups), g.Group, counts[i].Queued, counts[i].Running, q, r)
			}
			if q > 0 {
				nonzero++
			}
		}
		if nonzero < len(groups)/2 {
			t.Fatalf("%d groups: only %d have jobs; the test would prove little", len(groups), nonzero)
		}
	}
}
