package dependents_test

import (
	"testing"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestReplicaIdentityOnTheUniqueRuleIsRefused(t *testing.T) {
	url := queue(t, legacy.TeamQueue, `
DELETE FROM "Billing Queue"."JobRequests" WHERE unique_key IS NULL;
ALTER TABLE "Billing Queue"."JobRequests" ALTER COLUMN unique_key SET NOT NULL;
ALTER TABLE "Billing Queue"."JobRequests" REPLICA IDENTITY USING INDEX "JobRequests_Kind_UniqueKey_uniq";
CREATE PUBLICATION queue_pub FOR TABLE "Billing Queue"."JobRequests";`)
	expectRefused(t, url, legacy.TeamQueue, `table "Billing Queue"."JobRequests" has REPLICA IDENTITY USING INDEX "Billing Queue"."JobRequests_Kind_UniqueKey_uniq"`,
		`ALTER TABLE "Billing Queue"."JobRequests" REPLICA IDENTITY DEFAULT`)
}
