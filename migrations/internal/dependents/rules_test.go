package dependents_test

import (
	"context"
	"testing"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestRulesAreCarried(t *testing.T) {
	url := queue(t, legacy.SingleTable, `
CREATE TABLE enqueued (key text);
CREATE RULE log_key AS ON INSERT TO jobs DO ALSO INSERT INTO enqueued VALUES (NEW.unique_key);`)
	expectCarried(t, url, legacy.SingleTable, insertJob, `rule "log_key" on "public"."jobs" reads the key column: carried`)
	var n int
	if err := testdbConn(t, url).QueryRow(context.Background(), "SELECT count(*) FROM enqueued WHERE key LIKE 'new-%'").Scan(&n); err != nil || n != 2 {
		t.Fatalf("the rule logged %d keys (%v), want the 2 inserts'", n, err)
	}
}
