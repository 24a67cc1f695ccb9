package dependents_test

import (
	"context"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

// TestGeneratedColumnsAreCarried runs on every version; it also checks
// which form of the dependency the catalog holds, so that both of the
// check's branches are known to be exercised: from the column's pg_attrdef
// entry (15 and later), or from the generated column itself (13, 14).
func TestGeneratedColumnsAreCarried(t *testing.T) {
	url := queue(t, legacy.SingleTable, `ALTER TABLE jobs ADD COLUMN key_hash text GENERATED ALWAYS AS (md5(unique_key)) STORED;`)
	var fromColumn bool
	if err := testdb.Connect(t, url).QueryRow(context.Background(), `SELECT EXISTS (
    SELECT 1 FROM pg_depend d JOIN pg_attribute a ON a.attrelid = d.objid AND a.attnum = d.objsubid
    JOIN pg_attribute k ON k.attrelid = d.refobjid AND k.attnum = d.refobjsubid
    WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
      AND d.objid = 'jobs'::regclass AND a.attname = 'key_hash' AND k.attname = 'unique_key')`).Scan(&fromColumn); err != nil {
		t.Fatal(err)
	}
	if want := testdb.Major(t) < 15; fromColumn != want {
		t.Fatalf("PostgreSQL %d records the dependency from the generated column: %v, want %v", testdb.Major(t), fromColumn, want)
	}
	expectCarried(t, url, legacy.SingleTable, insertJob, `generated column "public"."jobs"."key_hash" is computed from the key column: carried`)
}
