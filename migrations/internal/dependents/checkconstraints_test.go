package dependents_test

import (
	"context"
	"testing"

	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestCheckConstraintsAreCarried(t *testing.T) {
	url := queue(t, legacy.SingleTable, `ALTER TABLE jobs ADD CONSTRAINT key_not_blank CHECK (unique_key <> '');`)
	expectCarried(t, url, legacy.SingleTable, insertJob, `check constraint "key_not_blank" on "public"."jobs" reads the key column: carried`)
	// Still enforced on the renamed column.
	if _, err := migrations.Up(context.Background(), url, legacy.SingleTable.Layout, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := testdbConn(t, url).Exec(context.Background(), "INSERT INTO jobs (job_type, concurrency_key) VALUES ('x', '')"); err == nil {
		t.Fatal("a blank key was accepted after up: the check constraint was lost")
	}
}
