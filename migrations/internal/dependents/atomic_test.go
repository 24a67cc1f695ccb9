package dependents_test

import (
	"fmt"
	"testing"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestSQLStandardBodiesAreCarried(t *testing.T) {
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
