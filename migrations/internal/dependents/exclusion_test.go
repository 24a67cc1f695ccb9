package dependents_test

import (
	"testing"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestExclusionConstraintOnTheKeyIsRefused(t *testing.T) {
	url := queue(t, legacy.SingleTable, `ALTER TABLE jobs ADD CONSTRAINT one_pending_per_key EXCLUDE USING btree (job_type WITH =, unique_key WITH =) WHERE (status = 'pending');`)
	expectRefused(t, url, legacy.SingleTable, `exclusion constraint "one_pending_per_key" on "public"."jobs"`, "23P01", `ALTER TABLE "public"."jobs" DROP CONSTRAINT "one_pending_per_key"`)
}
