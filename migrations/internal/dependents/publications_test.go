package dependents_test

import (
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestPublicationsAreCarriedAndTheSubscriberIsNamed(t *testing.T) {
	setup := `
CREATE PUBLICATION jobs_pub FOR TABLE jobs (id, job_type, status, unique_key) WHERE (id > 0);
CREATE PUBLICATION everything FOR ALL TABLES;
CREATE PUBLICATION public_schema FOR TABLES IN SCHEMA public;`
	want := []string{`publication "jobs_pub" publishes "public"."jobs": carried`, `publication "everything"`, `publication "public_schema"`, "RENAME COLUMN unique_key TO concurrency_key on the subscriber's table"}
	if testdb.Major(t) < 15 {
		testdb.Adapted(t, "no column lists, row filters or FOR TABLES IN SCHEMA before PostgreSQL 15: a whole-table publication and FOR ALL TABLES")
		setup = `
CREATE PUBLICATION jobs_pub FOR TABLE jobs;
CREATE PUBLICATION everything FOR ALL TABLES;`
		want = []string{want[0], want[1], want[3]}
	}
	url := queue(t, legacy.SingleTable, setup)
	expectCarried(t, url, legacy.SingleTable, func(col string) string {
		// Updates and deletes go on: the replica identity is the primary key.
		return insertJob(col) + "; UPDATE jobs SET status = 'running' WHERE id = (SELECT max(id) FROM jobs); DELETE FROM jobs WHERE id = (SELECT max(id) FROM jobs)"
	}, want...)
}
