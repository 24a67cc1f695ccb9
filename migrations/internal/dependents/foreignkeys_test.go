package dependents_test

import (
	"fmt"
	"testing"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestForeignKeyThroughTheUniqueRuleIsRefused(t *testing.T) {
	url := queue(t, legacy.TeamQueue, `
CREATE TABLE "Billing Queue".invoices (id serial PRIMARY KEY, kind text, job_key text,
    CONSTRAINT invoices_job_fk FOREIGN KEY (kind, job_key) REFERENCES "Billing Queue"."JobRequests" (kind, unique_key));`)
	expectRefused(t, url, legacy.TeamQueue, `foreign key "invoices_job_fk" on "Billing Queue"."invoices"`, `through the unique rule "Billing Queue"."JobRequests_Kind_UniqueKey_uniq"`,
		`ALTER TABLE "Billing Queue"."invoices" DROP CONSTRAINT "invoices_job_fk"`)
}

func TestForeignKeyFromTheKeyColumnIsCarried(t *testing.T) {
	url := queue(t, legacy.SingleTable, `
CREATE TABLE known_keys (key text PRIMARY KEY);
INSERT INTO known_keys SELECT DISTINCT unique_key FROM jobs WHERE unique_key IS NOT NULL;
INSERT INTO known_keys SELECT 'new-' || i FROM generate_series(1, 100000) AS i;
ALTER TABLE jobs ADD CONSTRAINT jobs_key_known FOREIGN KEY (unique_key) REFERENCES known_keys (key);`)
	expectCarried(t, url, legacy.SingleTable, insertJob, `foreign key "public"."jobs" "jobs_key_known" (FOREIGN KEY (unique_key) REFERENCES public.known_keys(key)) starts from the key column: carried`)
	// Still enforced.
	exec(t, url, "DO $$ BEGIN INSERT INTO jobs (job_type, unique_key) VALUES ('x', 'unknown'); RAISE 'accepted'; EXCEPTION WHEN foreign_key_violation THEN NULL; END $$")
	_ = fmt.Sprint()
}
