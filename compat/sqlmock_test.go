package compat

import (
	"database/sql/driver"
	"strings"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/migrate-unique/migrate-unique/internal/qualify"
	"github.com/migrate-unique/migrate-unique/layout"
)

// The exact admission statements for plain-jobs' migrated tables, as
// written; the statements sent are these with every function, operator and
// type qualified with pg_catalog (qualify.Must), which the pins apply.
const (
	// A keyed job: one lock statement (the class's lock shared, then the
	// group's), then the count and insert, which reads the group's override.
	wantGroupLock = wantGuard + `pg_advisory_xact_lock_shared($1::pg_catalog.int8), pg_advisory_xact_lock($2::pg_catalog.int8)`
	// The guard opens the first statement of every admission: the
	// isolation check, the lock wait, then the planner settings that leave
	// the counting index's ordered scan as the only plan.
	wantGuard = `SELECT CASE WHEN current_setting('transaction_isolation') <> 'read committed' THEN current_setting('migrate_unique.enqueue_needs_read_committed') END, ` +
		`set_config('lock_timeout', '5000ms', true), set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true), ` +
		`set_config('enable_sort', 'off', true), set_config('enable_incremental_sort', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true), `
	wantAdmit = `WITH c AS (
    SELECT min(l.n) AS lim, count(u.id) AS n, coalesce(string_agg(u.t || ':' || u.id::text, ','), '') AS holders
    FROM (SELECT coalesce((SELECT min(concurrency_limit) FROM "public"."concurrency_limits" WHERE group_name = ANY (ARRAY[$1, split_part($1, '::', 1) || '::'])), $2::integer) AS n OFFSET 0) l
    LEFT JOIN LATERAL (
        (SELECT 'plainjobs_jobrequest' AS t, "id" AS id FROM "public"."plainjobs_jobrequest" WHERE "job_class" = ANY (ARRAY[$3::text]) AND "concurrency_key" >= $4 AND "concurrency_key" <= $4 ORDER BY "job_class", "concurrency_key" LIMIT coalesce(l.n, 0))
        UNION ALL
        (SELECT 'plainjobs_jobprocess' AS t, "id" AS id FROM "public"."plainjobs_jobprocess" WHERE "job_class" = ANY (ARRAY[$3::text]) AND "concurrency_key" >= $4 AND "concurrency_key" <= $4 ORDER BY "job_class", "concurrency_key" LIMIT coalesce(l.n, 0))
    ) u ON true
), ins AS (
    INSERT INTO "public"."plainjobs_jobrequest" ("job_class", "concurrency_key", "parameters", "priority", "queue", "retries", "retry_attempt", "start_at", "created_at", "uuid", "source", "trace_id", "span_id")
    SELECT $5, $6, $7::jsonb, $8, $9, $10, $11, $12::timestamptz, now(), gen_random_uuid(), $13, $14, $15
    FROM c WHERE c.lim IS NULL OR c.n < c.lim
    RETURNING "id" AS r_id, "uuid"::text AS r_uuid
)
SELECT c.lim, c.n, c.holders, ins.r_id, ins.r_uuid FROM c LEFT JOIN ins ON true`
	// A keyless job with a limit in code: the class lock exclusive.
	wantClassLock = wantGuard + `pg_advisory_xact_lock($1::pg_catalog.int8)`
	// A keyless job without a limit in code: the class's override decides
	// the lock's mode, so the lock statement reads it and carries it to the
	// count in a transaction-local setting.
	wantCarryLock = wantGuard + `CASE WHEN s.o <> '' THEN pg_advisory_xact_lock($1::int8)::text ELSE pg_advisory_xact_lock_shared($1::int8)::text END FROM (SELECT set_config($3::text, coalesce((SELECT min(concurrency_limit) FROM "public"."concurrency_limits" WHERE group_name = ANY (ARRAY[$2, split_part($2, '::', 1) || '::']))::text, ''), true) AS o OFFSET 0) s`
	// A keyed job without a limit in code: the group's lock only when the
	// group has an override.
	wantKeyedCarryLock = wantGuard + `pg_advisory_xact_lock_shared($1::int8)::text, CASE WHEN s.o <> '' THEN pg_advisory_xact_lock($2::int8)::text END FROM (SELECT set_config($4::text, coalesce((SELECT min(concurrency_limit) FROM "public"."concurrency_limits" WHERE group_name = ANY (ARRAY[$3, split_part($3, '::', 1) || '::']))::text, ''), true) AS o OFFSET 0) s`
)

var (
	// The class-wide count and insert: wantAdmit without the key, which
	// moves the row's parameters down by one.
	wantClassWideAdmit = strings.NewReplacer(
		` AND "concurrency_key" >= $4 AND "concurrency_key" <= $4`, "",
		`, "concurrency_key" LIMIT`, ` LIMIT`,
		"SELECT $5, $6, $7::jsonb, $8, $9, $10, $11, $12::timestamptz, now(), gen_random_uuid(), $13, $14, $15",
		"SELECT $4, $5, $6::jsonb, $7, $8, $9, $10, $11::timestamptz, now(), gen_random_uuid(), $12, $13, $14",
	).Replace(wantAdmit)
	// The carried forms read the setting in place of the table.
	wantCarryAdmit = strings.Replace(wantClassWideAdmit,
		`(SELECT min(concurrency_limit) FROM "public"."concurrency_limits" WHERE group_name = ANY (ARRAY[$1, split_part($1, '::', 1) || '::']))`,
		`CASE WHEN current_setting($1::text) <> '' THEN current_setting($1::text)::integer END`, 1)
	wantKeyedCarryAdmit = strings.Replace(wantAdmit,
		`(SELECT min(concurrency_limit) FROM "public"."concurrency_limits" WHERE group_name = ANY (ARRAY[$1, split_part($1, '::', 1) || '::']))`,
		`CASE WHEN current_setting($1::text) <> '' THEN current_setting($1::text)::integer END`, 1)
)

// plainJobsCatalog is what the catalog query returns for plain-jobs'
// migrated tables (the columns the runtime reads).
func plainJobsCatalog() *sqlmock.Rows {
	rows := sqlmock.NewRows([]string{"relname", "attname", "format_type", "attnotnull", "atthasdef", "maxlen", "collation", "c_index"})
	common := [][]driver.Value{
		{"id", "bigint", true, true, 0, ""},
		{"job_class", "character varying(255)", true, false, 255, "C.UTF-8"},
		{"concurrency_key", "character varying(255)", true, true, 255, "C.UTF-8"},
	}
	for _, tbl := range []string{"plainjobs_jobrequest", "plainjobs_jobprocess", "plainjobs_jobresult"} {
		for _, c := range common {
			rows.AddRow(append(append([]driver.Value{tbl}, c...), false)...)
		}
	}
	for _, c := range [][]driver.Value{
		{"parameters", "jsonb", false, false, 0, ""}, {"priority", "integer", true, true, 0, ""},
		{"queue", "character varying(255)", true, true, 255, "C.UTF-8"}, {"retries", "integer", true, true, 0, ""},
		{"retry_attempt", "integer", true, true, 0, ""}, {"start_at", "timestamp with time zone", false, false, 0, ""},
		{"created_at", "timestamp with time zone", true, false, 0, ""}, {"uuid", "uuid", true, false, 0, ""},
		{"source", "text", true, false, 0, "C.UTF-8"}, {"trace_id", "character varying(34)", false, false, 34, "C.UTF-8"},
		{"span_id", "character varying(18)", false, false, 18, "C.UTF-8"},
	} {
		rows.AddRow(append(append([]driver.Value{"plainjobs_jobrequest"}, c...), false)...)
	}
	rows.AddRow("concurrency_limits", "group_name", "text", true, false, 0, "C.UTF-8", false)
	return rows
}

// noRule is what the rule query returns for a migrated layout: no unique
// index on the key.
func noRule() *sqlmock.Rows {
	return sqlmock.NewRows([]string{"relname", "indisvalid", "col0", "col1", "pred"})
}

// TestAdmissionStatementsArePinned pins the exact text and argument order
// of the admission statements, and the transaction around them, through
// database/sql.
func TestAdmissionStatementsArePinned(t *testing.T) {
	db, mock, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := NewClient(SQL(db), layout.PlainJobs())
	if err != nil {
		t.Fatal(err)
	}
	mock.ExpectQuery(marked(qualify.Must(catalogQuery))).
		WithArgs("public", "plainjobs_jobrequest", "plainjobs_jobprocess", "plainjobs_jobresult", "concurrency_limits", "job_class").
		WillReturnRows(plainJobsCatalog())
	mock.ExpectQuery(marked(ruleQuery)).
		WithArgs("public", "plainjobs_jobrequest", "job_class", "concurrency_key").
		WillReturnRows(noRule())

	// A keyed job, limit 2: admitted.
	mock.ExpectBegin()
	mock.ExpectExec(marked(qualify.Must(wantGroupLock))).
		WithArgs(int64(-744096600792446844), int64(7527929927103732752)).
		WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectQuery(marked(qualify.Must(wantAdmit))).
		WithArgs("app.jobs.ChargeJob::charge-7", 2, "app.jobs.ChargeJob", "charge-7",
			"app.jobs.ChargeJob", "charge-7", `{"amount_cents":700}`, 5, "default", 3, 0, nil, "compat", nil, nil).
		WillReturnRows(sqlmock.NewRows([]string{"n", "active", "holders", "r_id", "r_uuid"}).AddRow(2, 1, "plainjobs_jobprocess:9", 41, "9b2f6c1e-0000-4000-8000-000000000041"))
	mock.ExpectCommit()

	res, err := c.Enqueue(t.Context(), Job{Class: "app.jobs.ChargeJob", Value: limited("charge-7", 2), Args: map[string]int{"amount_cents": 700}, Priority: 5, Retries: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Inserted() || res.ID != 41 || res.UUID != "9b2f6c1e-0000-4000-8000-000000000041" {
		t.Fatalf("result %+v", res)
	}

	// A keyless job with a class-wide limit 3: the class lock exclusive, no
	// group lock, the class counted; blocked.
	mock.ExpectBegin()
	mock.ExpectExec(marked(qualify.Must(wantClassLock))).
		WithArgs(int64(-744096600792446844)).
		WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectQuery(marked(qualify.Must(wantClassWideAdmit))).
		WithArgs("app.jobs.ChargeJob", 3, "app.jobs.ChargeJob",
			"app.jobs.ChargeJob", "", nil, 0, "default", 0, 0, nil, "compat", nil, nil).
		WillReturnRows(sqlmock.NewRows([]string{"n", "active", "holders", "r_id", "r_uuid"}).AddRow(3, 3, "plainjobs_jobrequest:41,plainjobs_jobrequest:42,plainjobs_jobprocess:9", nil, nil))
	mock.ExpectCommit()
	res, err = c.Enqueue(t.Context(), Job{Class: "app.jobs.ChargeJob", Value: limited("", 3)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Inserted() || res.Skipped.Group != "app.jobs.ChargeJob" || res.Skipped.Limit != 3 || res.Skipped.Active != 3 || len(res.Skipped.Holders) != 3 {
		t.Fatalf("result %+v", res.Skipped)
	}

	// A keyless job without a limit: the carried override (here 1) blocks
	// it. Each table is read up to the limit, so the statement may return
	// more holders than the limit: the result reports the first ones.
	mock.ExpectBegin()
	mock.ExpectExec(marked(qualify.Must(wantCarryLock))).
		WithArgs(int64(-744096600792446844), "app.jobs.ChargeJob", "migrate_unique.override_0").
		WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectQuery(marked(qualify.Must(wantCarryAdmit))).
		WithArgs("migrate_unique.override_0", nil, "app.jobs.ChargeJob",
			"app.jobs.ChargeJob", "", nil, 0, "default", 0, 0, nil, "compat", nil, nil).
		WillReturnRows(sqlmock.NewRows([]string{"n", "active", "holders", "r_id", "r_uuid"}).AddRow(1, 2, "plainjobs_jobrequest:41,plainjobs_jobprocess:9", nil, nil))
	mock.ExpectCommit()
	res, err = c.Enqueue(t.Context(), Job{Class: "app.jobs.ChargeJob", Value: keyedJob{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Inserted() || res.Skipped.Limit != 1 || res.Skipped.Active != 1 || len(res.Skipped.Holders) != 1 || res.Skipped.Holders[0] != (JobRef{Table: "plainjobs_jobrequest", ID: 41}) {
		t.Fatalf("result %+v", res.Skipped)
	}

	// A keyed job without a limit: no override, so no group lock; admitted.
	mock.ExpectBegin()
	mock.ExpectExec(marked(qualify.Must(wantKeyedCarryLock))).
		WithArgs(int64(-744096600792446844), int64(7527929927103732752), "app.jobs.ChargeJob::charge-7", "migrate_unique.override_0").
		WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectQuery(marked(qualify.Must(wantKeyedCarryAdmit))).
		WithArgs("migrate_unique.override_0", nil, "app.jobs.ChargeJob", "charge-7",
			"app.jobs.ChargeJob", "charge-7", nil, 0, "default", 0, 0, nil, "compat", nil, nil).
		WillReturnRows(sqlmock.NewRows([]string{"n", "active", "holders", "r_id", "r_uuid"}).AddRow(nil, 0, "", 43, "9b2f6c1e-0000-4000-8000-000000000043"))
	mock.ExpectCommit()
	if res, err = c.Enqueue(t.Context(), Job{Class: "app.jobs.ChargeJob", Value: keyedJob{key: "charge-7"}}); err != nil || res.ID != 43 {
		t.Fatalf("result %+v, %v", res, err)
	}
	if err := mock.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
}
