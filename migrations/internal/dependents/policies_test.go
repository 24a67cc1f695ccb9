package dependents_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestRowLevelSecurityPoliciesAreCarried(t *testing.T) {
	url := queue(t, legacy.SingleTable, `
ALTER TABLE jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY no_reserved_keys ON jobs USING (true) WITH CHECK (unique_key IS NULL OR unique_key NOT LIKE 'reserved-%');`)
	// The policy binds the application's role, not the superuser.
	asApp := appRole(t, url, "GRANT SELECT, INSERT ON jobs TO %[1]s; GRANT USAGE ON SEQUENCE jobs_id_seq TO %[1]s")
	expectCarried(t, url, legacy.SingleTable, func(col string) string {
		if err := asApp(insertJob(col)); err != nil {
			t.Errorf("the application role's insert naming %s: %v", col, err)
		}
		err := asApp(fmt.Sprintf("INSERT INTO jobs (job_type, %s) VALUES ('x', 'reserved-%d')", col, keys.Add(1)))
		if err == nil || !strings.Contains(err.Error(), "row-level security") {
			t.Errorf("a reserved key naming %s: %v, want the policy's refusal", col, err)
		}
		return "SELECT 1"
	}, `policy "no_reserved_keys" on "public"."jobs" (row-level security) reads the key column: carried`)
}
