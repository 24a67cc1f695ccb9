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

// partitionedJobs is the single-table queue of legacy.SingleTable,
// partitioned by creation time, its unique rule including the partition key
// as PostgreSQL requires.
const partitionedJobs = `
CREATE TABLE jobs (
    id bigserial,
    job_type text NOT NULL,
    payload jsonb NOT NULL DEFAULT '{}',
    status text NOT NULL DEFAULT 'pending',
    unique_key text NULL,
    run_at timestamptz NOT NULL DEFAULT now(),
    attempt integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL DEFAULT 5,
    lease_until timestamptz NULL,
    worker_id text NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz NULL,
    last_error text NULL,
    PRIMARY KEY (id, created_at),
    CONSTRAINT jobs_type_key_created UNIQUE (job_type, unique_key, created_at)
) PARTITION BY RANGE (created_at);
CREATE TABLE jobs_old PARTITION OF jobs FOR VALUES FROM (MINVALUE) TO ('2026-01-01');
CREATE TABLE jobs_now PARTITION OF jobs FOR VALUES FROM ('2026-01-01') TO (MAXVALUE);
INSERT INTO jobs (job_type, unique_key, created_at) SELECT 'email.send', 'k-' || i, now() - make_interval(days => i * 30) FROM generate_series(1, 40) AS i;`

// A partitioned queue whose unique rule is a constraint has no online way
// back: refused before any change.
func TestPartitionedQueueWithAUniqueConstraintIsRefused(t *testing.T) {
	url := testdb.New(t)
	exec(t, url, partitionedJobs)
	expectRefused(t, url, legacy.SingleTable, `table "public"."jobs" is partitioned (PARTITION BY RANGE (created_at), partitions "public"."jobs_now", "public"."jobs_old")`,
		`its unique rule is a constraint, "jobs_type_key_created" (UNIQUE (job_type, unique_key, created_at))`, "ADD CONSTRAINT ... USING INDEX does not run there", `"Partitioned and inherited tables"`)
	exec(t, url, insertJob("unique_key"))
}

func TestPartitionIsRefused(t *testing.T) {
	url := testdb.New(t)
	exec(t, url, partitionedJobs)
	s := legacy.SingleTable
	s.Layout.JobsTable = "jobs_now"
	var err error
	if s.Resolved, err = s.Layout.Resolve(); err != nil {
		t.Fatal(err)
	}
	expectRefused(t, url, s, `table "public"."jobs_now" is a partition of "public"."jobs"`)
}

func TestInheritanceIsRefusedWhereItReachesTheKey(t *testing.T) {
	t.Run("children", func(t *testing.T) {
		url := queue(t, legacy.SingleTable, `CREATE TABLE jobs_archive (archived_at timestamptz) INHERITS (jobs);`)
		expectRefused(t, url, legacy.SingleTable, `table "public"."jobs" has inheritance children ("public"."jobs_archive")`)
	})
	t.Run("key inherited from a parent", func(t *testing.T) {
		url := queue(t, legacy.SingleTable, `CREATE TABLE keyed (unique_key text); ALTER TABLE jobs INHERIT keyed;`)
		expectRefused(t, url, legacy.SingleTable, `table "public"."jobs" inherits its key column from "public"."keyed"`)
	})
	t.Run("other columns inherited", func(t *testing.T) {
		url := queue(t, legacy.SingleTable, `CREATE TABLE stamped (created_at timestamptz NOT NULL DEFAULT now()); ALTER TABLE jobs INHERIT stamped;`)
		expectCarried(t, url, legacy.SingleTable, insertJob)
	})
}

// An up of an earlier version failed on a partitioned queue after creating
// its version table (the report). Status must not send the operator
// to run up again, up refuses before changing anything more, and down
// clears what the stopped run left.
func TestStatusAfterAnUpThatStoppedOnAPartitionedQueue(t *testing.T) {
	ctx := context.Background()
	s := legacy.SingleTable
	url := queue(t, s, "")
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{StopAfterStep: 1}); !errors.Is(err, migrations.ErrStopped) {
		t.Fatalf("up stopped after step 1: %v", err)
	}
	exec(t, url, "DROP TABLE jobs;"+partitionedJobs)
	st, err := migrations.Status(ctx, url, s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != migrations.PartlyMigrated || len(st.UpRefusals) == 0 || strings.Contains(st.Next, "run up") || !strings.Contains(st.Next, "run down") {
		t.Fatalf("status: state %s, next %q, up refusals %q; want partly migrated, down next, up refused", st.State, st.Next, st.UpRefusals)
	}
	before := readState(t, url, s)
	var pe *migrations.PreflightError
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); !errors.As(err, &pe) || !strings.Contains(err.Error(), "is partitioned") {
		t.Fatalf("up: %v, want the partitioned refusal", err)
	}
	if after := readState(t, url, s); after.String() != before.String() {
		t.Errorf("a refused up changed the database:\nbefore: %s\nafter:  %s", before, after)
	}
	if _, err := migrations.Down(ctx, url, s.Layout, migrations.Options{}); err != nil {
		t.Fatalf("down: %v", err)
	}
	st, err = migrations.Status(ctx, url, s.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != migrations.Legacy || readState(t, url, s).versionTable {
		t.Fatalf("after down: state %s, %s; want legacy without the version table", st.State, readState(t, url, s))
	}
	exec(t, url, insertJob("unique_key"))
}

// The documented way through for a rule that is a constraint: the
// operator builds the counting index per partition and attaches it to one
// created ON ONLY the partitioned table, and runs the cutover by hand; up
// then finishes (runtime tables, the skip column, the state). Down rolls
// back what up did (no rule was saved: the operator adds the constraint
// again); a counting index dropped by hand meanwhile is drift up repairs.
func TestPartitionedQueueMigratedByHandThenUp(t *testing.T) {
	ctx := context.Background()
	s := legacy.SingleTable
	url := testdb.New(t)
	exec(t, url, partitionedJobs)
	for _, sql := range []string{
		`CREATE INDEX CONCURRENTLY jobs_old_concurrency_key_idx ON jobs_old (job_type, unique_key) WHERE status IN ('pending', 'running', 'paused')`,
		`CREATE INDEX CONCURRENTLY jobs_now_concurrency_key_idx ON jobs_now (job_type, unique_key) WHERE status IN ('pending', 'running', 'paused')`,
		`CREATE INDEX jobs_concurrency_key_idx ON ONLY jobs (job_type, unique_key) WHERE status IN ('pending', 'running', 'paused')`,
		`ALTER INDEX jobs_concurrency_key_idx ATTACH PARTITION jobs_old_concurrency_key_idx`,
		`ALTER INDEX jobs_concurrency_key_idx ATTACH PARTITION jobs_now_concurrency_key_idx`,
		`BEGIN; SET LOCAL lock_timeout = '2s'; ALTER TABLE jobs RENAME COLUMN unique_key TO concurrency_key; ALTER TABLE jobs DROP CONSTRAINT jobs_type_key_created; COMMIT`,
	} {
		exec(t, url, sql)
	}
	plan, err := migrations.Plan(ctx, url, s.Layout)
	if err != nil || hasFinding(plan.Findings, true) {
		t.Fatalf("plan: %v\n%s", err, findings(plan.Findings))
	}
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); err != nil {
		t.Fatalf("up after the hand-made index and cutover: %v", err)
	}
	exec(t, url, insertJob("concurrency_key"))
	// The counting index dropped by hand: drift, which up repairs on
	// every partition.
	exec(t, url, `DROP INDEX jobs_concurrency_key_idx`)
	st, err := migrations.Status(ctx, url, s.Layout)
	if err != nil || len(st.Drift) == 0 {
		t.Fatalf("status after the counting index was dropped: drift %q, %v", st.Drift, err)
	}
	if _, err := migrations.Up(ctx, url, s.Layout, migrations.Options{}); err != nil {
		t.Fatalf("up repairing a partitioned queue's counting index: %v", err)
	}
	if st, err = migrations.Status(ctx, url, s.Layout); err != nil || len(st.Drift) != 0 || st.State != migrations.Migrated {
		t.Fatalf("status after the repair: %s, drift %q, %v", st.State, st.Drift, err)
	}
	exec(t, url, insertJob("concurrency_key"))
	// Down renames the column back and removes what up added, the
	// counting index with every partition's.
	if _, err := migrations.Down(ctx, url, s.Layout, migrations.Options{}); err != nil {
		t.Fatalf("down: %v", err)
	}
	if st := readState(t, url, s); st.versionTable || !strings.Contains(strings.Join(st.columns, " "), "jobs.unique_key") || strings.Contains(st.String(), "concurrency_key_idx") {
		t.Fatalf("after down: %s", st)
	}
	exec(t, url, insertJob("unique_key"))
}

// partitionedResults partitions plain-jobs' results table by time.
const partitionedResults = `
ALTER TABLE plainjobs_jobresult RENAME TO plainjobs_jobresult_old;
CREATE TABLE plainjobs_jobresult (LIKE plainjobs_jobresult_old INCLUDING DEFAULTS INCLUDING IDENTITY) PARTITION BY RANGE (created_at);
CREATE TABLE plainjobs_jobresult_old_rows PARTITION OF plainjobs_jobresult FOR VALUES FROM (MINVALUE) TO ('2026-01-01');
CREATE TABLE plainjobs_jobresult_new_rows PARTITION OF plainjobs_jobresult FOR VALUES FROM ('2026-01-01') TO (MAXVALUE);
INSERT INTO plainjobs_jobresult SELECT * FROM plainjobs_jobresult_old;
DROP TABLE plainjobs_jobresult_old;
CREATE INDEX plainjobs_jobresult_unique_key ON plainjobs_jobresult (unique_key);`

// A partitioned results table has no counting index and no unique rule
// (plain-jobs' 0007 skips its uuid index on a partitioned table): the
// rename and the skip-metadata column reach every partition, and it is
// migrated both ways.
func TestPartitionedResultsTableIsMigrated(t *testing.T) {
	url := queue(t, legacy.PlainJobs, partitionedResults)
	expectCarried(t, url, legacy.PlainJobs, func(col string) string {
		return `INSERT INTO plainjobs_jobresult (created_at, uuid, job_class, source, priority, queue, retries, retry_attempt, ` + col + `, job_request_uuid, job_process_uuid, ended_at, error, status)
VALUES (now(), gen_random_uuid(), 'app.Send', '', 0, 'default', 0, 0, 'r-` + col + `', gen_random_uuid(), gen_random_uuid(), now(), '', 'SUCCESSFUL')`
	})
}

// A partition's own unique index on the key, not part of a rule of the
// partitioned table, would outlive the cutover: refused.
func TestPartitionsOwnUniqueIndexIsRefused(t *testing.T) {
	url := testdb.New(t)
	exec(t, url, partitionedJobs+`
ALTER TABLE jobs DROP CONSTRAINT jobs_type_key_created;
CREATE UNIQUE INDEX jobs_now_own_key ON jobs_now (job_type, unique_key);`)
	expectRefused(t, url, legacy.SingleTable, `partition "public"."jobs_now" has its own unique index "public"."jobs_now_own_key"`, "DROP INDEX CONCURRENTLY")
}

// The checks around the queue run on every partition: a trigger on one
// partition only, whose function names the key column, is refused as one
// on the table would be; a replica identity on a partition's index of the
// unique rule too.
func TestChecksRunOnEveryPartition(t *testing.T) {
	indexRule := partitionedJobs + `
ALTER TABLE jobs DROP CONSTRAINT jobs_type_key_created;
CREATE UNIQUE INDEX jobs_type_key_created ON jobs (job_type, unique_key, created_at);`
	t.Run("trigger on a partition", func(t *testing.T) {
		url := testdb.New(t)
		exec(t, url, indexRule+`
CREATE FUNCTION stamp_key() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.unique_key := coalesce(NEW.unique_key, 'k'); RETURN NEW; END $$;
CREATE TRIGGER stamp BEFORE INSERT ON jobs_now FOR EACH ROW EXECUTE FUNCTION stamp_key();`)
		expectRefused(t, url, legacy.SingleTable, `"public"."stamp_key"()`, `trigger "stamp" on "public"."jobs_now"`)
	})
	t.Run("replica identity on a partition's index of the rule", func(t *testing.T) {
		url := testdb.New(t)
		exec(t, url, indexRule+`
ALTER TABLE jobs ALTER COLUMN unique_key SET NOT NULL;
ALTER TABLE jobs_now REPLICA IDENTITY USING INDEX jobs_now_job_type_unique_key_created_at_idx;`)
		expectRefused(t, url, legacy.SingleTable, `table "public"."jobs_now" has REPLICA IDENTITY USING INDEX`)
	})
}

// A partition that is itself partitioned, or a foreign table, cannot get
// its index CONCURRENTLY and attached: refused before any change, naming
// it (sub-partitioned tables stay refused: docs/migration.md).
func TestSubPartitionAndForeignPartitionAreRefused(t *testing.T) {
	indexRule := partitionedJobs + `
ALTER TABLE jobs DROP CONSTRAINT jobs_type_key_created;
CREATE UNIQUE INDEX jobs_type_key_created ON jobs (job_type, unique_key, created_at);`
	t.Run("sub-partitioned", func(t *testing.T) {
		url := testdb.New(t)
		exec(t, url, indexRule+`
ALTER TABLE jobs DETACH PARTITION jobs_now;
CREATE TABLE jobs_next PARTITION OF jobs FOR VALUES FROM ('2026-01-01') TO (MAXVALUE) PARTITION BY RANGE (created_at);
CREATE TABLE jobs_next_rest PARTITION OF jobs_next DEFAULT;`)
		expectRefused(t, url, legacy.SingleTable, `has partitions whose index cannot be built CONCURRENTLY and attached: "public"."jobs_next" (itself partitioned)`)
	})
	t.Run("foreign table", func(t *testing.T) {
		url := testdb.New(t)
		exec(t, url, indexRule+`
ALTER TABLE jobs DETACH PARTITION jobs_now;
DROP INDEX jobs_type_key_created;
-- No unique index at all (PostgreSQL refuses a foreign partition under
-- one): the counting index is what the run would build on it.
ALTER TABLE jobs DROP CONSTRAINT jobs_pkey;
CREATE FOREIGN DATA WRAPPER mu_test_fdw;
CREATE SERVER mu_test_server FOREIGN DATA WRAPPER mu_test_fdw;
CREATE FOREIGN TABLE jobs_remote PARTITION OF jobs FOR VALUES FROM ('2026-01-01') TO (MAXVALUE) SERVER mu_test_server;`)
		expectRefused(t, url, legacy.SingleTable, `has partitions whose index cannot be built CONCURRENTLY and attached: "public"."jobs_remote" (a foreign table)`)
	})
}
