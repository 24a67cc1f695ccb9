package dependents_test

import (
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestOnConflictOnTheUniqueConstraintIsRefused(t *testing.T) {
	if testdb.Major(t) < 14 {
		testdb.Adapted(t, "no BEGIN ATOMIC before PostgreSQL 14, so no function depends on the constraint: a string body naming the key, refused as such")
		url := queue(t, legacy.TeamQueue, `
CREATE FUNCTION "Billing Queue".enqueue_once(k text) RETURNS void LANGUAGE sql AS $$
    INSERT INTO "Billing Queue"."JobRequests" (kind, unique_key) VALUES ('invoice', k)
    ON CONFLICT ON CONSTRAINT "JobRequests_Kind_UniqueKey_uniq" DO NOTHING $$;`)
		expectRefused(t, url, legacy.TeamQueue, `function "Billing Queue"."enqueue_once"(k text) reads the queue table "Billing Queue"."JobRequests" and names unique_key`)
		return
	}
	url := queue(t, legacy.TeamQueue, `
CREATE FUNCTION "Billing Queue".enqueue_once(k text) RETURNS void LANGUAGE sql
BEGIN ATOMIC
    INSERT INTO "Billing Queue"."JobRequests" (kind, unique_key) VALUES ('invoice', k)
    ON CONFLICT ON CONSTRAINT "JobRequests_Kind_UniqueKey_uniq" DO NOTHING;
END;`)
	expectRefused(t, url, legacy.TeamQueue, `function "Billing Queue".enqueue_once(pg_catalog.text) depends on the unique rule "Billing Queue"."JobRequests_Kind_UniqueKey_uniq"`, "2BP01")
	if plan := planFindings(t, url, legacy.TeamQueue); contains(plan, "SQL-standard body that reads the key column: carried") {
		t.Errorf("the refused function is also noted as carried:\n%s", plan)
	}
}
