package dependents_test

import (
	"testing"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// Column privileges are kept by column number: carried, without a note
// (there is no check file for them).
func TestColumnPrivilegesAreCarried(t *testing.T) {
	url := queue(t, legacy.SingleTable, "")
	asApp := appRole(t, url, "GRANT SELECT (id, job_type, unique_key), INSERT (job_type, unique_key) ON jobs TO %[1]s; GRANT USAGE ON SEQUENCE jobs_id_seq TO %[1]s")
	expectCarried(t, url, legacy.SingleTable, func(col string) string {
		if err := asApp(insertJob(col) + "; SELECT " + col + " FROM jobs LIMIT 1"); err != nil {
			t.Errorf("the application role naming %s: %v", col, err)
		}
		if err := asApp("SELECT status FROM jobs LIMIT 1"); err == nil {
			t.Errorf("the application role read a column it was not granted")
		}
		return "SELECT 1"
	})
}
