package dashboard_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"

	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/dashboard"
	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/bench/scratch"
	web "github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/dashboard"
	"github.com/migrate-unique/migrate-unique/cmd/migrate-unique/internal/groupstatus"
	"github.com/migrate-unique/migrate-unique/compat"
	"github.com/migrate-unique/migrate-unique/internal/pgurl"
	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/layout"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }

// envInt is the environment variable name as a number, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// BenchmarkGroupsPage measures the groups page (GET /, the first 100
// groups by pressure) on a queue of 10,000 groups and 100,000 queued jobs
// (MIGRATE_UNIQUE_BENCH_GROUPS, MIGRATE_UNIQUE_BENCH_JOBS), beside its
// baseline from the same run: the read of `concurrency status --json`
// (groupstatus.Read and its JSON) on the same data. Besides the wall time
// per request (ns/op), each reports its CPU time: go-ms/op, this process's
// (the server, and the page's HTTP client), and pg-ms/op, the PostgreSQL
// backend's that served it (local server only). The goal is the
// page under 300 ms of server time. `migrate-unique bench dashboard`
// measures the same from the command line.
//
//	go test -run '^$' -bench GroupsPage -benchtime 10x ./cmd/migrate-unique/internal/dashboard/
func BenchmarkGroupsPage(b *testing.B) {
	ctx := b.Context()
	url := testdb.New(b)
	q, err := scratch.New(ctx, url, "bench_groups_page", legacy.PlainJobs)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = q.Drop(context.Background()) })
	l := q.Layout
	conn, err := pgurl.Connect(ctx, url, "groups page benchmark")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(context.Background()) })
	if err := dashboard.Fill(ctx, conn, l, envInt("MIGRATE_UNIQUE_BENCH_GROUPS", 10000), envInt("MIGRATE_UNIQUE_BENCH_JOBS", 100000)); err != nil {
		b.Fatal(err)
	}
	pidOf := func(app string) int {
		var pid int
		if err := conn.QueryRow(ctx, `SELECT pid FROM pg_catalog.pg_stat_activity WHERE application_name OPERATOR(pg_catalog.=) $1 AND datname OPERATOR(pg_catalog.=) pg_catalog.current_database() ORDER BY backend_start DESC LIMIT 1`, app).Scan(&pid); err != nil {
			b.Fatal(err)
		}
		return pid
	}
	// run times f b.N times after a warm-up and reports the CPU time per
	// op of the backend of application app.
	run := func(b *testing.B, app string, f func() error) {
		if err := f(); err != nil { // warm up (and connect)
			b.Fatal(err)
		}
		pid := pidOf(app)
		start, goStart := dashboard.BackendCPU(pid), dashboard.ProcessCPU()
		b.ResetTimer()
		for range b.N {
			if err := f(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64((dashboard.ProcessCPU()-goStart).Microseconds())/1000/float64(b.N), "go-ms/op")
		if end := dashboard.BackendCPU(pid); start >= 0 && end >= 0 {
			b.ReportMetric(float64((end-start).Microseconds())/1000/float64(b.N), "pg-ms/op")
		}
	}

	b.Run("baseline_status_json", func(b *testing.B) {
		slots, err := compat.NewSlots(compat.Pgx(conn), layout.Layout{Schema: l.Schema, RequestsTable: layout.PlainJobsRequests}, compat.SlotsOptions{})
		if err != nil {
			b.Fatal(err)
		}
		run(b, "groups page benchmark", func() error {
			rep, err := groupstatus.Read(ctx, conn, slots, l, "")
			if err != nil {
				return err
			}
			return json.NewEncoder(io.Discard).Encode(rep)
		})
	})
	b.Run("groups_page", func(b *testing.B) {
		srv, err := web.New(web.Options{URL: url, Layout: l})
		if err != nil {
			b.Fatal(err)
		}
		defer srv.Close()
		ts := httptest.NewServer(srv)
		defer ts.Close()
		jar, _ := cookiejar.New(nil)
		client := &http.Client{Jar: jar}
		get := func(path string) error {
			resp, err := client.Get(ts.URL + path)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("GET %s: %s: %.300s", path, resp.Status, body)
			}
			return nil
		}
		if err := get("/login?token=" + srv.Token()); err != nil {
			b.Fatal(err)
		}
		run(b, "migrate-unique concurrency serve", func() error { return get("/") })
	})
}
