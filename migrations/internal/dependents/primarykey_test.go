package dependents_test

import (
	"testing"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestPrimaryKeyOnTheKeyIsRefused(t *testing.T) {
	url := queue(t, legacy.TeamQueue, `
ALTER TABLE "Billing Queue".job_processes DROP CONSTRAINT job_processes_pkey;
DELETE FROM "Billing Queue".job_processes WHERE unique_key IS NULL;
ALTER TABLE "Billing Queue".job_processes ADD CONSTRAINT "Processes PK" PRIMARY KEY (kind, unique_key);`)
	expectRefused(t, url, legacy.TeamQueue, `the primary key "Processes PK" of "Billing Queue"."job_processes"`, "includes unique_key")
}
