package main

import (
	"context"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
)

// plan lists what depends on the key column, exits 1 when up would refuse,
// up refuses before any change, and once the operator has dealt with the
// refused object the same commands go through.
func TestPlanAndUpReportWhatDependsOnTheKeyColumn(t *testing.T) {
	db := plainJobsDB(t)
	conn := testdb.Connect(t, db)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `
CREATE FUNCTION request_key_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.unique_key IS NULL THEN NEW.unique_key := ''; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER request_key_check BEFORE INSERT ON plainjobs_jobrequest FOR EACH ROW EXECUTE FUNCTION request_key_check();
CREATE FUNCTION "keys of`+"\n"+`requests"() RETURNS SETOF text LANGUAGE sql AS $$ SELECT unique_key FROM plainjobs_jobrequest $$;
CREATE VIEW pending_keys AS SELECT job_class, unique_key FROM plainjobs_jobrequest;`); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "plan", "--database", db)
	if code != 1 || !strings.Contains(errOut, "up would refuse") {
		t.Fatalf("plan: exit %d, want 1\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`refused: function "public"."request_key_check"() (trigger "request_key_check" on "public"."plainjobs_jobrequest") names unique_key`,
		`refused: function "public"."keys of\u000arequests"() reads the queue table "public"."plainjobs_jobrequest"`,
		`note: view "public"."pending_keys" reads the key column: carried`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan's output lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = runCLI(t, "up", "--database", db)
	if code != 1 || !strings.Contains(errOut, "nothing was changed") || !strings.Contains(errOut, `"public"."request_key_check"()`) || strings.Contains(out, "step 1/") {
		t.Fatalf("up: exit %d, want a refusal before any step\n%s%s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, "status", "--database", db); code != 0 || !strings.Contains(out, "state:    legacy") || !strings.Contains(out, "up would refuse") {
		t.Errorf("status after the refusal: exit %d\n%s", code, out)
	}
	// The operator drops the trigger (to create it again after up) and the
	// function; the view is carried.
	if _, err := conn.Exec(ctx, `DROP TRIGGER request_key_check ON plainjobs_jobrequest; DROP FUNCTION "keys of`+"\n"+`requests"()`); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "up", "--database", db); code != 0 || !strings.Contains(out, "note: view") {
		t.Fatalf("up: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := conn.Exec(ctx, `SELECT job_class, unique_key FROM pending_keys`); err != nil {
		t.Errorf("the view after up: %v", err)
	}
}
