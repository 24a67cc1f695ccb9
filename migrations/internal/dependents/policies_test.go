package dependents_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestRowLevelSecurityPoliciesAreCarried(t *testing.T) {
	url := queue(t, legacy.SingleTable, `
ALTER TABLE jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY no_reserved_keys ON jobs USING (true) WITH CHECK (unique_key IS NULL OR unique_key NOT LIKE 'reserved-%');`)
	// The policy binds the application's role, not the superuser.
	conn := testdbConn(t, url)
	ctx := context.Background()
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	role := pgx.Identifier{db + "_app"}.Sanitize()
	exec(t, url, "CREATE ROLE "+role+" NOLOGIN; GRANT SELECT, INSERT ON jobs TO "+role+"; GRANT USAGE ON SEQUENCE jobs_id_seq TO "+role)
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role)
	})
	asApp := func(sql string) error {
		_, err := conn.Exec(ctx, "SET ROLE "+role+"; "+sql+"; RESET ROLE")
		if err != nil {
			_, _ = conn.Exec(ctx, "RESET ROLE")
		}
		return err
	}
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
