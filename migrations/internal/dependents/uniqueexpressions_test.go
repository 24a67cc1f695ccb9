package dependents_test

import (
	"testing"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestUniqueIndexOnAnExpressionOfTheKeyIsRefused(t *testing.T) {
	url := queue(t, legacy.SingleTable, `CREATE UNIQUE INDEX jobs_key_ci ON jobs (job_type, lower(unique_key)) WHERE status = 'pending';`)
	expectRefused(t, url, legacy.SingleTable, `unique index "public"."jobs_key_ci" on "public"."jobs"`, "expression of unique_key", `DROP INDEX CONCURRENTLY "public"."jobs_key_ci"`)
}

func TestUniqueIndexWithTheKeyOnlyInItsPredicateIsNotRefused(t *testing.T) {
	url := queue(t, legacy.SingleTable, `CREATE UNIQUE INDEX jobs_one_unkeyed ON jobs (id) WHERE unique_key IS NULL;`)
	expectCarried(t, url, legacy.SingleTable, insertJob, `index "public"."jobs_one_unkeyed" reads the key column in an expression or its predicate: carried`)
}
