package dashboard

import (
	"io"
	"os"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
)

func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }

// TestRunMeasuresAndLeavesNothingBehind runs a small benchmark: every
// figure is measured, the page is smaller than the baseline's JSON, and
// the scratch schema is gone afterwards.
func TestRunMeasuresAndLeavesNothingBehind(t *testing.T) {
	url := testdb.New(t)
	r, err := Run(t.Context(), url, Options{Groups: 300, Jobs: 3000, Runs: 2, Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]Figure{"page": r.Page, "api": r.API, "baseline": r.Baseline} {
		if !(f.MedianMillis > 0) || f.Bytes == 0 || f.PostgresCPUMillis == nil || f.ServerCPUMillis == nil || *f.ServerCPUMillis != f.GoCPUMillis+*f.PostgresCPUMillis {
			t.Errorf("%s not measured: %+v", name, f)
		}
	}
	if !(r.PageRatio > 0) || r.PageCPURatio == nil || r.Page.Bytes >= r.Baseline.Bytes || r.Load == "" {
		t.Errorf("ratio %v, page %d bytes, baseline %d", r.PageRatio, r.Page.Bytes, r.Baseline.Bytes)
	}
	conn := testdb.Connect(t, url)
	var schemas int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'migrate_unique_bench_%'`).Scan(&schemas); err != nil {
		t.Fatal(err)
	}
	if schemas != 0 {
		t.Fatalf("%d scratch schemas left behind", schemas)
	}
}
