package dependents_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestViewsAreCarried(t *testing.T) {
	url := queue(t, legacy.SingleTable, `
CREATE VIEW pending_jobs AS SELECT id, job_type, unique_key FROM jobs WHERE status = 'pending';
CREATE MATERIALIZED VIEW "Key Counts" AS SELECT job_type, count(DISTINCT unique_key) AS keys FROM jobs GROUP BY job_type;`)
	expectCarried(t, url, legacy.SingleTable, func(col string) string {
		// The application enqueues through the view: its column keeps the
		// name unique_key whatever the table's column is called.
		return fmt.Sprintf("INSERT INTO pending_jobs (job_type, unique_key) VALUES ('email.send', 'view-%d'); REFRESH MATERIALIZED VIEW \"Key Counts\"; %s", keys.Add(1), insertJob(col))
	}, `view "public"."pending_jobs" reads the key column: carried`, `materialized view "public"."Key Counts" reads the key column: carried`, "a view column unique_key stays unique_key")
	var n int
	if err := testdbConn(t, url).QueryRow(context.Background(), "SELECT count(unique_key) FROM pending_jobs WHERE unique_key LIKE 'view-%'").Scan(&n); err != nil || n != 2 {
		t.Fatalf("reading the view's unique_key after the round trip: %d rows, %v", n, err)
	}
}
