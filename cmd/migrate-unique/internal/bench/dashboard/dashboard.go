// Package dashboard measures the groups page of `migrate-unique
// concurrency serve` on a large queue (by default 10,000 groups and
// 100,000 queued jobs, in a scratch schema of its own), beside its
// baseline from the same run: the read `concurrency status --json` makes
// on the same data. It backs `migrate-unique bench dashboard`.
package dashboard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/scratch"
	web "github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/dashboard"
	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/groupstatus"
	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// Options configures Run.
type Options struct {
	// Groups and Jobs are the queue's size: groups with slot rows, and
	// queued jobs spread over them (a twentieth as many running).
	Groups, Jobs int
	// Runs is the number of timed requests of each kind, after a warm-up.
	Runs int
	// Out receives the progress and figure lines.
	Out io.Writer
}

// Figure is one measured kind of request.
type Figure struct {
	// MedianMillis and MinMillis are the wall time of a request, as the
	// server saw it (connect excluded).
	MedianMillis float64 `json:"median_ms"`
	MinMillis    float64 `json:"min_ms"`
	// GoCPUMillis and PostgresCPUMillis are the CPU time per request of
	// this process and of the PostgreSQL backend that served it (null
	// when the backend's /proc entry cannot be read: another machine).
	GoCPUMillis       float64  `json:"go_cpu_ms"`
	PostgresCPUMillis *float64 `json:"postgres_cpu_ms"`
	// ServerCPUMillis is GoCPUMillis plus PostgresCPUMillis: the server
	// time of a request on a machine with a core to spare (null with
	// PostgresCPUMillis).
	ServerCPUMillis *float64 `json:"server_cpu_ms"`
	// Bytes is the answer's size.
	Bytes int `json:"bytes"`
}

// Result is the run's figures (the --json line).
type Result struct {
	Groups int `json:"groups"`
	Jobs   int `json:"queued_jobs"`
	Runs   int `json:"runs"`
	// Page is GET / (the groups page, first page of 100 groups by
	// pressure); API is GET /api/groups (its refresh); Baseline is the
	// read of `concurrency status --json` (groupstatus.Read and the JSON
	// encoding of every group).
	Page     Figure `json:"groups_page"`
	API      Figure `json:"api_groups"`
	Baseline Figure `json:"baseline_status_json"`
	// PageRatio is Page's median over Baseline's; PageCPURatio is Page's
	// CPU time per request (Go and PostgreSQL) over Baseline's, null when
	// the backends' CPU time could not be read.
	PageRatio    float64  `json:"page_ratio_to_baseline"`
	PageCPURatio *float64 `json:"page_cpu_ratio_to_baseline"`
	// Load is /proc/loadavg (what uptime shows) when the run ended.
	Load string `json:"load"`
}

// Run creates the scratch queue, fills it, measures and drops it.
func Run(ctx context.Context, url string, o Options) (*Result, error) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	q, err := scratch.New(ctx, url, "migrate_unique_bench_dashboard_"+hex.EncodeToString(rnd[:]), legacy.PlainJobs)
	if err != nil {
		return nil, pgurl.RedactError(url, err)
	}
	defer q.Drop(context.Background()) //nolint:errcheck
	l := q.Layout
	fmt.Fprintf(o.Out, "dashboard benchmark: scratch schema %s on %s, %d groups, %d queued jobs, %d runs\n", l.Schema, pgurl.Describe(url), o.Groups, o.Jobs, o.Runs)
	conn, err := pgurl.Connect(ctx, url, "migrate-unique bench dashboard")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	start := time.Now()
	if err := Fill(ctx, conn, l, o.Groups, o.Jobs); err != nil {
		return nil, fmt.Errorf("fill the scratch queue: %w", pgurl.RedactError(url, err))
	}
	fmt.Fprintf(o.Out, "filled in %s\n", time.Since(start).Round(time.Millisecond))

	res := &Result{Groups: o.Groups, Jobs: o.Jobs, Runs: o.Runs}
	// The baseline: what `concurrency status --json` does once connected.
	slots, err := compat.NewSlots(compat.Pgx(conn), layout.Layout{Schema: l.Schema, RequestsTable: layout.PlainJobsRequests}, compat.SlotsOptions{})
	if err != nil {
		return nil, err
	}
	var basePID int
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_backend_pid()`).Scan(&basePID); err != nil {
		return nil, err
	}
	res.Baseline, err = measure(o.Runs, basePID, func() (int, error) {
		rep, err := groupstatus.Read(ctx, conn, slots, l, "")
		if err != nil {
			return 0, err
		}
		b, err := json.Marshal(rep)
		return len(b), err
	})
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", pgurl.RedactError(url, err))
	}

	// The dashboard, served on loopback, asked over HTTP.
	srv, err := web.New(web.Options{URL: url, Layout: l})
	if err != nil {
		return nil, err
	}
	ln, err := web.Listen("127.0.0.1:0", "")
	if err != nil {
		return nil, err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	defer func() {
		stop()
		<-served
	}()
	base := "http://" + ln.Addr().String()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: time.Minute}
	if _, err := get(client, base+"/login?token="+srv.Token()); err != nil {
		return nil, fmt.Errorf("log in: %w", err)
	}
	var pagePID int
	if err := conn.QueryRow(ctx, `SELECT pid FROM pg_catalog.pg_stat_activity WHERE application_name OPERATOR(pg_catalog.=) 'migrate-unique concurrency serve' AND datname OPERATOR(pg_catalog.=) pg_catalog.current_database() ORDER BY backend_start DESC LIMIT 1`).Scan(&pagePID); err != nil {
		return nil, fmt.Errorf("find the dashboard's backend: %w", err)
	}
	if res.Page, err = measure(o.Runs, pagePID, func() (int, error) { return get(client, base+"/") }); err != nil {
		return nil, fmt.Errorf("groups page: %w", err)
	}
	if res.API, err = measure(o.Runs, pagePID, func() (int, error) { return get(client, base+"/api/groups") }); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	res.PageRatio = res.Page.MedianMillis / res.Baseline.MedianMillis
	if res.Page.ServerCPUMillis != nil && res.Baseline.ServerCPUMillis != nil && *res.Baseline.ServerCPUMillis > 0 {
		r := *res.Page.ServerCPUMillis / *res.Baseline.ServerCPUMillis
		res.PageCPURatio = &r
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.Load = strings.TrimSpace(string(b))
	}
	line := func(name string, f Figure) {
		pg, both := "n/a", "n/a"
		if f.PostgresCPUMillis != nil {
			pg = strconv.FormatFloat(*f.PostgresCPUMillis, 'f', 1, 64) + " ms"
			both = strconv.FormatFloat(*f.ServerCPUMillis, 'f', 1, 64) + " ms"
		}
		fmt.Fprintf(o.Out, "%-32s median %7.1f ms, min %7.1f ms; CPU per request: Go %6.1f ms + PostgreSQL %s = %s; %d bytes\n", name, f.MedianMillis, f.MinMillis, f.GoCPUMillis, pg, both, f.Bytes)
	}
	line("baseline (status --json read)", res.Baseline)
	line("groups page GET /", res.Page)
	line("refresh GET /api/groups", res.API)
	cpuRatio, verdict := "n/a", "the page's server CPU time is not known (PostgreSQL on another machine)"
	if res.PageCPURatio != nil {
		cpuRatio = strconv.FormatFloat(*res.PageCPURatio, 'f', 2, 64)
		verdict = fmt.Sprintf("the page's server CPU time: %.1f ms per request", *res.Page.ServerCPUMillis)
		if *res.Page.ServerCPUMillis < 300 {
			verdict += " (under the goal of 300 ms)"
		} else {
			verdict += " (over the goal of 300 ms)"
		}
	}
	fmt.Fprintf(o.Out, "groups page / baseline: median wall %.2f, CPU %s; %s; load average %s\n", res.PageRatio, cpuRatio, verdict, res.Load)
	return res, nil
}

// Fill writes groups groups into the queue of l (1 to 3 slot rows each, a
// seventh with an expired lease, a tenth with an override of 1, a fifth
// with 3 rescheduled jobs), jobs queued jobs spread over them in 4
// classes, and a twentieth as many running, then ANALYZEs the tables.
// Group k is bench.Class<k%4>::k-<k>.
func Fill(ctx context.Context, conn *pgx.Conn, l layout.Resolved, groups, jobs int) error {
	group := `'bench.Class' || (k % 4) || '::k-' || k`
	stmts := []string{
		`INSERT INTO ` + l.Table(l.RequestsTable) + ` (created_at, uuid, job_class, priority, source, queue, retries, retry_attempt, concurrency_key)
SELECT now() - make_interval(secs => i), gen_random_uuid(), 'bench.Class' || ((i % $1) % 4), 0, 'bench', 'default', 0, 0, 'k-' || (i % $1)
FROM generate_series(0, $2 - 1) i`,
		`INSERT INTO ` + l.Table(l.ProcessesTable) + ` (created_at, uuid, job_class, priority, source, queue, retries, retry_attempt, concurrency_key, job_request_uuid, started_at)
SELECT now(), gen_random_uuid(), 'bench.Class' || ((i % $1) % 4), 0, 'bench', 'default', 0, 0, 'k-' || (i % $1), gen_random_uuid(), now()
FROM generate_series(0, $2 / 20 - 1) i`,
		`INSERT INTO ` + l.Table(layout.SlotsTable) + ` (group_name, slot, job_id, worker_id, concurrency_limit, acquired_at, expires_at)
SELECT ` + group + `, s, 'job-' || k || '-' || s, 'worker-' || s, 2, now(), now() + CASE WHEN k % 7 = 0 AND s = 0 THEN interval '-1 minute' ELSE interval '1 hour' END
FROM generate_series(0, $1 - 1) k, generate_series(0, 2) s WHERE s <= k % 3 AND $2 >= 0`,
		`INSERT INTO ` + l.Table(layout.LimitsTable) + ` (group_name, concurrency_limit, reason)
SELECT ` + group + `, 1, 'bench override' FROM generate_series(0, $1 - 1) k WHERE k % 10 = 0 AND $2 >= 0`,
		`INSERT INTO ` + l.Table(layout.ReschedulesTable) + ` (job_id, group_name, reschedules, first_at, last_at)
SELECT 'waiting-' || k || '-' || n, ` + group + `, n + 1, now() - interval '1 hour', now() FROM generate_series(0, $1 - 1) k, generate_series(0, 2) n WHERE k % 5 = 0 AND $2 >= 0`,
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s, groups, jobs); err != nil {
			return err
		}
	}
	for _, t := range []string{l.RequestsTable, l.ProcessesTable, layout.SlotsTable, layout.LimitsTable, layout.ReschedulesTable} {
		if _, err := conn.Exec(ctx, `ANALYZE `+l.Table(t)); err != nil {
			return err
		}
	}
	return nil
}

func get(c *http.Client, url string) (int, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s: %.300s", url, resp.Status, b)
	}
	return len(b), nil
}

// measure runs f once to warm up, then runs times, and returns its wall
// time and the CPU time of this process and of PostgreSQL backend pid.
func measure(runs, pid int, f func() (int, error)) (Figure, error) {
	var fig Figure
	if _, err := f(); err != nil {
		return fig, err
	}
	walls := make([]float64, 0, runs)
	goStart, pgStart := ProcessCPU(), BackendCPU(pid)
	for range runs {
		t := time.Now()
		n, err := f()
		if err != nil {
			return fig, err
		}
		walls = append(walls, float64(time.Since(t).Microseconds())/1000)
		fig.Bytes = n
	}
	goEnd, pgEnd := ProcessCPU(), BackendCPU(pid)
	sort.Float64s(walls)
	fig.MedianMillis, fig.MinMillis = walls[len(walls)/2], walls[0]
	fig.GoCPUMillis = float64((goEnd - goStart).Microseconds()) / 1000 / float64(runs)
	if pgStart >= 0 && pgEnd >= 0 {
		v := float64((pgEnd - pgStart).Microseconds()) / 1000 / float64(runs)
		both := fig.GoCPUMillis + v
		fig.PostgresCPUMillis, fig.ServerCPUMillis = &v, &both
	}
	return fig, nil
}

// ProcessCPU is this process's user and system CPU time.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BackendCPU is a local PostgreSQL backend's user and system CPU time from
// /proc (clock ticks of 10 ms), or -1 when it cannot be read.
func BackendCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return -1
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}
