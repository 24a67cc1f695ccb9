package admission

import (
	"os"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
)

func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }

// TestRunIsExactAndLeavesNothingBehind runs a small benchmark: nothing is
// admitted beyond the limit, every ratio is measured, and the scratch schema
// is gone afterwards.
func TestRunIsExactAndLeavesNothingBehind(t *testing.T) {
	testdb.Heavy(t)
	url := testdb.New(t)
	r, err := Run(t.Context(), url, Options{BacklogRows: 2000, Samples: 5, ContentionClients: 16, ThroughputJobs: 400, BatchSize: 20, BatchJobs: 400})
	if err != nil {
		t.Fatal(err)
	}
	if r.OverAdmitted != 0 || r.ContentionAdmitted != r.ContentionLimit {
		t.Fatalf("contention: %d admitted with limit %d, over %d", r.ContentionAdmitted, r.ContentionLimit, r.OverAdmitted)
	}
	if r.BacklogGroupRows != 200 || r.ThroughputAdmittedJobs != 400 {
		t.Fatalf("backlog group %d rows, throughput admitted %d", r.BacklogGroupRows, r.ThroughputAdmittedJobs)
	}
	ratios := map[string]float64{"backlog": r.BacklogLatencyRatio, "naive": r.NaiveBacklogLatencyRatio, "throughput": r.ThroughputRatioVsInsert, "batch": r.BatchRatioVsInsertMany,
		"stale": r.Stale.BacklogLatencyRatio, "stale naive": r.Stale.NaiveBacklogLatencyRatio}
	for _, m := range r.ByMode {
		ratios[m.Mode] = m.BacklogLatencyRatio
		ratios[m.Mode+" naive"] = m.NaiveBacklogLatencyRatio
	}
	if r.BatchJobs != 400 || len(r.BatchRatios) != 5 {
		t.Errorf("batch run: %d jobs, %d pairs; want 400 and 5", r.BatchJobs, len(r.BatchRatios))
	}
	if len(r.ByMode) != 6 {
		t.Errorf("%d execution modes measured, want 6", len(r.ByMode))
	}
	for name, v := range ratios {
		if !(v > 0) {
			t.Errorf("%s ratio %v not measured", name, v)
		}
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
