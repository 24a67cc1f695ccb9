package dependents_test

import (
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestOnConflictInferringTheUniqueRuleIsRefused(t *testing.T) {
	fn := `
CREATE FUNCTION enqueue_once(k text) RETURNS void LANGUAGE sql
BEGIN ATOMIC
    INSERT INTO jobs (job_type, unique_key) VALUES ('email.send', k)
    ON CONFLICT (job_type, unique_key) WHERE status IN ('pending', 'running', 'paused') DO NOTHING;
END;`
	atomic := testdb.Major(t) >= 14
	if !atomic {
		testdb.Adapted(t, "no BEGIN ATOMIC before PostgreSQL 14: the function's body is a string, refused as a text body naming the key; the rule is as on every version")
		fn = `
CREATE FUNCTION enqueue_once(k text) RETURNS void LANGUAGE sql AS $$
    INSERT INTO jobs (job_type, unique_key) VALUES ('email.send', k)
    ON CONFLICT (job_type, unique_key) WHERE status IN ('pending', 'running', 'paused') DO NOTHING $$;`
	}
	url := queue(t, legacy.SingleTable, fn+`
CREATE TABLE inbox (job_type text, k text);
CREATE RULE forward AS ON INSERT TO inbox DO INSTEAD
    INSERT INTO jobs (job_type, unique_key) VALUES (NEW.job_type, NEW.k)
    ON CONFLICT (job_type, unique_key) WHERE status IN ('pending', 'running', 'paused') DO NOTHING;`)
	if atomic {
		expectRefused(t, url, legacy.SingleTable, `function "public"."enqueue_once"(k text) has an INSERT ... ON CONFLICT on unique_key`, "42P10")
	} else {
		expectRefused(t, url, legacy.SingleTable, `function "public"."enqueue_once"(k text) reads the queue table "public"."jobs" and names unique_key`)
	}
	expectRefused(t, url, legacy.SingleTable, `rule "forward" on "public"."inbox" has an INSERT ... ON CONFLICT on unique_key`)
	plan := planFindings(t, url, legacy.SingleTable)
	if contains(plan, `"enqueue_once"(k text) has a SQL-standard body that reads the key column: carried`) {
		t.Errorf("the refused function is also noted as carried:\n%s", plan)
	}
}
