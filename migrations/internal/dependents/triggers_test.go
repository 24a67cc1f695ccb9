package dependents_test

import (
	"context"
	"testing"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestTriggerConditionsOnTheKeyAreCarried(t *testing.T) {
	url := queue(t, legacy.SingleTable, `
CREATE FUNCTION note_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.last_error := 'key changed'; RETURN NEW; END $$;
CREATE TRIGGER key_changed BEFORE UPDATE OF unique_key ON jobs FOR EACH ROW
    WHEN (NEW.unique_key IS DISTINCT FROM OLD.unique_key) EXECUTE FUNCTION note_change();`)
	expectCarried(t, url, legacy.SingleTable, func(col string) string {
		return insertJob(col) + "; UPDATE jobs SET " + col + " = " + col + " || '-changed' WHERE id = (SELECT max(id) FROM jobs)"
	}, `trigger "key_changed" on "public"."jobs" has a WHEN condition or an UPDATE OF list on the key column: carried`)
	var n int
	if err := testdbConn(t, url).QueryRow(context.Background(), "SELECT count(*) FROM jobs WHERE last_error = 'key changed'").Scan(&n); err != nil || n != 2 {
		t.Fatalf("the trigger fired %d times (%v), want once after up and once after down", n, err)
	}
}
