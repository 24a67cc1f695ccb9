package dependents_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/migrate-unique/migrate-unique/internal/testdb"
	"github.com/migrate-unique/migrate-unique/migrations"
	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

const keyTrigger = `
CREATE FUNCTION jobs_key_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.unique_key = '' THEN  -- an empty key means none
        NEW.unique_key := NULL;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER jobs_key_check BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_key_check();`

func TestTriggerFunctionNamingTheKeyIsRefused(t *testing.T) {
	url := queue(t, legacy.SingleTable, keyTrigger)
	expectRefused(t, url, legacy.SingleTable, `function "public"."jobs_key_check"()`, `trigger "jobs_key_check" on "public"."jobs"`, `record "new" has no field "unique_key"`, "to_jsonb(NEW)")
}

func TestTriggerFunctionInAQuotedSchemaIsNamedQuoted(t *testing.T) {
	url := queue(t, legacy.TeamQueue, `
CREATE FUNCTION "Billing Queue"."Key Check"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM "Billing Queue"."JobRequests" r WHERE r."unique_key" = NEW."unique_key";
    RETURN NEW;
END $$;
CREATE TRIGGER "Key Check" BEFORE INSERT ON "Billing Queue"."JobRequests" FOR EACH ROW EXECUTE FUNCTION "Billing Queue"."Key Check"();`)
	expectRefused(t, url, legacy.TeamQueue, `function "Billing Queue"."Key Check"()`, `trigger "Key Check" on "Billing Queue"."JobRequests"`)
}

func TestFunctionNamingTheQueueAndTheKeyIsRefused(t *testing.T) {
	for name, setup := range map[string]string{
		"sql string body": `CREATE FUNCTION enqueue(k text) RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO jobs (job_type, unique_key) VALUES ('email.send', k) RETURNING id $$;`,
		"plpgsql procedure": `CREATE PROCEDURE purge(k text) LANGUAGE plpgsql AS $$
BEGIN DELETE FROM public.jobs WHERE unique_key = k; END $$;`,
		"dynamic sql": `CREATE FUNCTION pending(k text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN EXECUTE 'SELECT count(*) FROM jobs WHERE unique_key = $1' INTO n USING k; RETURN n; END $$;`,
	} {
		t.Run(name, func(t *testing.T) {
			// The advice offers a SQL-standard body only where there is one.
			advice := "BEGIN ATOMIC"
			if testdb.Major(t) < 14 {
				advice = "rewrite it without naming the column"
			}
			url := queue(t, legacy.SingleTable, setup)
			expectRefused(t, url, legacy.SingleTable, `reads the queue table "public"."jobs" and names unique_key`, advice)
		})
	}
}

func TestFunctionsThatDoNotNameTheKeyAsCodeAreCarried(t *testing.T) {
	url := queue(t, legacy.SingleTable, `
CREATE TABLE other (id int, unique_key text);
-- names the column, but of another table: not the queue's business
CREATE FUNCTION other_keys() RETURNS SETOF text LANGUAGE sql AS $$ SELECT unique_key FROM other $$;
-- names the queue but the key only in a comment and inside a longer word
CREATE FUNCTION count_jobs() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    -- unique_key is not read here; no_unique_key_here neither
    RETURN (SELECT count(*) FROM jobs);
END $$;
-- reads the key as a value, whatever the column is called: the documented way
-- to keep a trigger working across the rename
CREATE FUNCTION jobs_key_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE k text := coalesce(to_jsonb(NEW)->>'concurrency_key', to_jsonb(NEW)->>'unique_key');
BEGIN
    IF k = '' THEN
        NEW := jsonb_populate_record(NEW, jsonb_build_object('concurrency_key', NULL, 'unique_key', NULL));
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER jobs_key_check BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_key_check();`)
	expectCarried(t, url, legacy.SingleTable, insertJob)
	// The trigger still runs after the round trip.
	exec(t, url, "INSERT INTO jobs (job_type, unique_key) VALUES ('empty.key', '')")
	var n int
	if err := testdbConn(t, url).QueryRow(context.Background(), "SELECT count(*) FROM jobs WHERE job_type = 'empty.key' AND unique_key IS NULL").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the trigger did not run after down: %d rows, %v", n, err)
	}
}

func TestDownRefusesOverAFunctionWrittenAgainstConcurrencyKey(t *testing.T) {
	ctx := context.Background()
	url := queue(t, legacy.SingleTable, "")
	if _, err := migrations.Up(ctx, url, legacy.SingleTable.Layout, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	exec(t, url, strings.ReplaceAll(keyTrigger, "unique_key", "concurrency_key"))
	before := readState(t, url, legacy.SingleTable)
	_, err := migrations.Down(ctx, url, legacy.SingleTable.Layout, migrations.Options{})
	var pe *migrations.PreflightError
	if !errors.As(err, &pe) || !contains(err.Error(), `function "public"."jobs_key_check"()`, "after down renames the column to unique_key") {
		t.Fatalf("down: %v, want a refusal naming the trigger function", err)
	}
	if after := readState(t, url, legacy.SingleTable); after.String() != before.String() {
		t.Errorf("a refused down changed the database:\nbefore: %s\nafter:  %s", before, after)
	}
	exec(t, url, insertJob("concurrency_key"))
}

func TestFunctionTakingTheQueuesRowTypeIsRefused(t *testing.T) {
	url := queue(t, legacy.SingleTable, `CREATE FUNCTION key_of(j jobs) RETURNS text LANGUAGE sql AS $$ SELECT j.unique_key $$;`)
	expectRefused(t, url, legacy.SingleTable, `function "public"."key_of"(j public.jobs) reads the queue table "public"."jobs" and names unique_key`)
}

// A trigger function that names another table's unique_key is refused (the
// body is read by a heuristic); its comment can say it was checked, with a
// reason, and up goes on.
func TestAFunctionsCommentCanAcknowledgeIt(t *testing.T) {
	setup := `
CREATE TABLE tenants (unique_key text PRIMARY KEY, paused boolean NOT NULL DEFAULT false);
CREATE FUNCTION jobs_tenant_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM tenants WHERE tenants.unique_key = NEW.job_type AND paused) THEN
        RAISE 'tenant paused';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER jobs_tenant_check BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_tenant_check();`
	url := queue(t, legacy.SingleTable, setup)
	expectRefused(t, url, legacy.SingleTable, `function "public"."jobs_tenant_check"()`)
	exec(t, url, `COMMENT ON FUNCTION jobs_tenant_check() IS 'migrate-unique:ignore'`)
	expectRefused(t, url, legacy.SingleTable, `function "public"."jobs_tenant_check"()`) // a directive needs a reason
	exec(t, url, `COMMENT ON FUNCTION jobs_tenant_check() IS 'checked: migrate-unique:ignore reads tenants.unique_key, not the queue''s'`)
	expectCarried(t, url, legacy.SingleTable, insertJob, `function "public"."jobs_tenant_check"() names unique_key in its body, but its comment says "migrate-unique:ignore reads tenants.unique_key, not the queue's": not refused`)
}

// sql --database writes files that golang-migrate runs without this tool's
// preflight: it refuses the same way.
func TestFilesForADatabaseRefuseToo(t *testing.T) {
	url := queue(t, legacy.SingleTable, keyTrigger)
	_, err := migrations.FilesFor(context.Background(), url, legacy.SingleTable.Layout)
	var pe *migrations.PreflightError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), `function "public"."jobs_key_check"()`) {
		t.Fatalf("FilesFor: %v, want the refusal over the trigger function", err)
	}
}

// Reading the key as a value under the old name only would read NULL after
// the rename: refused too.
func TestTriggerReadingTheKeyAsAValueUnderTheOldNameOnlyIsRefused(t *testing.T) {
	url := queue(t, legacy.SingleTable, `
CREATE FUNCTION jobs_require_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF to_jsonb(NEW)->>'unique_key' IS NULL THEN RAISE 'a key is required'; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER jobs_require_key BEFORE INSERT ON jobs FOR EACH ROW WHEN (NEW.job_type = 'keyed') EXECUTE FUNCTION jobs_require_key();`)
	expectRefused(t, url, legacy.SingleTable, `function "public"."jobs_require_key"() (trigger "jobs_require_key" on "public"."jobs") names unique_key`)
}

// plan --down lists down's refusal, with its kind and object.
func TestPlanDownListsAFunctionWrittenAgainstConcurrencyKey(t *testing.T) {
	ctx := context.Background()
	url := queue(t, legacy.SingleTable, "")
	if _, err := migrations.Up(ctx, url, legacy.SingleTable.Layout, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	exec(t, url, strings.ReplaceAll(keyTrigger, "unique_key", "concurrency_key"))
	plan, err := migrations.PlanDown(ctx, url, legacy.SingleTable.Layout, migrations.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range plan.Findings {
		if f.Fatal && f.Kind == "function" && f.Object == `"public"."jobs_key_check"()` && strings.Contains(f.Message, "after down renames the column to unique_key") {
			return
		}
	}
	t.Fatalf("plan --down lists no refusal over the trigger function:\n%s", findings(plan.Findings))
}
