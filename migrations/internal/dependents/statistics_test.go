package dependents_test

import (
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestExtendedStatisticsAreCarried(t *testing.T) {
	setup := `
CREATE STATISTICS jobs_type_key (ndistinct, dependencies) ON job_type, unique_key FROM jobs;
CREATE STATISTICS jobs_key_lower ON (lower(unique_key)) FROM jobs;
ANALYZE jobs;`
	want := []string{`extended statistics "public"."jobs_type_key" cover the key column: carried`, `extended statistics "public"."jobs_key_lower"`}
	if testdb.Major(t) < 14 {
		testdb.Adapted(t, "no statistics on expressions before PostgreSQL 14: the column statistics only")
		setup = `
CREATE STATISTICS jobs_type_key (ndistinct, dependencies) ON job_type, unique_key FROM jobs;
ANALYZE jobs;`
		want = want[:1]
	}
	url := queue(t, legacy.SingleTable, setup)
	expectCarried(t, url, legacy.SingleTable, func(col string) string { return insertJob(col) + "; ANALYZE jobs" }, want...)
}
