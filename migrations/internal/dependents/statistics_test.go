package dependents_test

import (
	"testing"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestExtendedStatisticsAreCarried(t *testing.T) {
	url := queue(t, legacy.SingleTable, `
CREATE STATISTICS jobs_type_key (ndistinct, dependencies) ON job_type, unique_key FROM jobs;
CREATE STATISTICS jobs_key_lower ON (lower(unique_key)) FROM jobs;
ANALYZE jobs;`)
	expectCarried(t, url, legacy.SingleTable, func(col string) string { return insertJob(col) + "; ANALYZE jobs" },
		`extended statistics "public"."jobs_type_key" cover the key column: carried`, `extended statistics "public"."jobs_key_lower"`)
}
