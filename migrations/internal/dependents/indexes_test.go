package dependents_test

import (
	"testing"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestIndexesOnAnExpressionOrPredicateOfTheKeyAreCarried(t *testing.T) {
	url := queue(t, legacy.SingleTable, `
CREATE INDEX jobs_lower_key ON jobs (lower(unique_key));
CREATE INDEX jobs_keyed ON jobs (run_at) WHERE unique_key IS NOT NULL;`)
	expectCarried(t, url, legacy.SingleTable, insertJob,
		`index "public"."jobs_keyed" reads the key column in an expression or its predicate: carried`)
	expectNote(t, url, legacy.SingleTable, `index "public"."jobs_lower_key" reads the key column`)
}
