package dependents_test

import (
	"testing"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestGeneratedColumnsAreCarried(t *testing.T) {
	url := queue(t, legacy.SingleTable, `ALTER TABLE jobs ADD COLUMN key_hash text GENERATED ALWAYS AS (md5(unique_key)) STORED;`)
	expectCarried(t, url, legacy.SingleTable, insertJob, `generated column "public"."jobs"."key_hash" is computed from the key column: carried`)
}
