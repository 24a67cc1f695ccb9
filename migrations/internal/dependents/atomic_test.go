package dependents_test

import (
	"fmt"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestSQLStandardBodiesAreCarried(t *testing.T) {
	if testdb.Major(t) < 14 {
		testdb.Adapted(t, "no SQL-standard function bodies (BEGIN ATOMIC, RETURN) before PostgreSQL 14: the same functions with string bodies are refused, and the advice does not offer BEGIN ATOMIC")
		url := queue(t, legacy.SingleTable, `
CREATE FUNCTION enqueue(k text) RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO jobs (job_type, unique_key) VALUES ('email.send', k) RETURNING id $$;
CREATE FUNCTION pending(k text) RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM jobs WHERE unique_key = k $$;`)
		expectRefused(t, url, legacy.SingleTable, `function "public"."enqueue"(k text) reads the queue table "public"."jobs" and names unique_key`, "rewrite it without naming the column")
		expectRefused(t, url, legacy.SingleTable, `function "public"."pending"(k text) reads the queue table "public"."jobs"`)
		if plan := planFindings(t, url, legacy.SingleTable); contains(plan, "BEGIN ATOMIC") {
			t.Errorf("the advice offers BEGIN ATOMIC, which this server lacks:\n%s", plan)
		}
		return
	}
	url := queue(t, legacy.SingleTable, `
CREATE FUNCTION enqueue(k text) RETURNS bigint LANGUAGE sql
BEGIN ATOMIC
    INSERT INTO jobs (job_type, unique_key) VALUES ('email.send', k) RETURNING id;
END;
CREATE FUNCTION pending(k text) RETURNS bigint LANGUAGE sql RETURN (SELECT count(*) FROM jobs WHERE unique_key = k);`)
	expectCarried(t, url, legacy.SingleTable, func(string) string {
		return fmt.Sprintf("SELECT enqueue('atomic-%d'), pending('x')", keys.Add(1))
	}, `function "public"."enqueue"(k text) has a SQL-standard body that reads the key column: carried`, `function "public"."pending"(k text)`)
}
