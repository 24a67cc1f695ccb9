package compat

import (
	"database/sql/driver"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/migrate-unique/migrate-unique/internal/layout"
)

// The exact admission statements for plain-jobs' migrated tables: a keyed
// job with limit 2 (one lock statement: the class lock shared, then the
// group lock; then count and insert), and the class-wide lock statement.
const (
	wantClassLock = `SELECT CASE WHEN $1::boolean AND ($2::boolean OR s.o <> '') THEN pg_advisory_xact_lock($3)::text ELSE pg_advisory_xact_lock_shared($3)::text END FROM (SELECT set_config($5, coalesce((SELECT concurrency_limit::text FROM "public"."concurrency_limits" WHERE group_name = $4), ''), true) AS o OFFSET 0) s`
	wantGroupLock = `SELECT pg_advisory_xact_lock_shared($1)::text, CASE WHEN $2::boolean OR s.o <> '' THEN pg_advisory_xact_lock($3)::text END FROM (SELECT set_config($5, coalesce((SELECT concurrency_limit::text FROM "public"."concurrency_limits" WHERE group_name = $4), ''), true) AS o OFFSET 0) s`
	wantAdmit     = `WITH lim AS (
    SELECT coalesce(nullif(current_setting($1), '')::integer, $2::integer) AS n
), active AS (
    SELECT a.t, a.id FROM lim, LATERAL (SELECT u.t, u.id FROM (
        (SELECT 'plainjobs_jobrequest' AS t, "id" AS id FROM "public"."plainjobs_jobrequest" WHERE "job_class" = $3 AND "concurrency_key" = $4 LIMIT lim.n)
        UNION ALL
        (SELECT 'plainjobs_jobprocess' AS t, "id" AS id FROM "public"."plainjobs_jobprocess" WHERE "job_class" = $3 AND "concurrency_key" = $4 LIMIT lim.n)
    ) u LIMIT lim.n) a WHERE lim.n IS NOT NULL
), c AS (
    SELECT count(*) AS n, coalesce(string_agg(t || ':' || id::text, ','), '') AS holders FROM active
), ins AS (
    INSERT INTO "public"."plainjobs_jobrequest" ("job_class", "concurrency_key", "parameters", "priority", "queue", "retries", "retry_attempt", "start_at", "created_at", "uuid", "source", "trace_id", "span_id")
    SELECT $5, $6, $7::jsonb, $8, $9, $10, $11, $12::timestamptz, now(), gen_random_uuid(), $13, $14, $15
    FROM lim, c WHERE lim.n IS NULL OR c.n < lim.n
    RETURNING "id" AS r_id, "uuid"::text AS r_uuid
)
SELECT lim.n, c.n, c.holders, ins.r_id, ins.r_uuid FROM lim CROSS JOIN c LEFT JOIN ins ON true`
	// The class-wide form: a keyless job with limit 3 takes the class lock
	// exclusively and counts the whole class.
	wantClassWideAdmit = `WITH lim AS (
    SELECT coalesce(nullif(current_setting($1), '')::integer, $2::integer) AS n
), active AS (
    SELECT a.t, a.id FROM lim, LATERAL (SELECT u.t, u.id FROM (
        (SELECT 'plainjobs_jobrequest' AS t, "id" AS id FROM "public"."plainjobs_jobrequest" WHERE "job_class" = $3 LIMIT lim.n)
        UNION ALL
        (SELECT 'plainjobs_jobprocess' AS t, "id" AS id FROM "public"."plainjobs_jobprocess" WHERE "job_class" = $3 LIMIT lim.n)
    ) u LIMIT lim.n) a WHERE lim.n IS NOT NULL
), c AS (
    SELECT count(*) AS n, coalesce(string_agg(t || ':' || id::text, ','), '') AS holders FROM active
), ins AS (
    INSERT INTO "public"."plainjobs_jobrequest" ("job_class", "concurrency_key", "parameters", "priority", "queue", "retries", "retry_attempt", "start_at", "created_at", "uuid", "source", "trace_id", "span_id")
    SELECT $4, $5, $6::jsonb, $7, $8, $9, $10, $11::timestamptz, now(), gen_random_uuid(), $12, $13, $14
    FROM lim, c WHERE lim.n IS NULL OR c.n < lim.n
    RETURNING "id" AS r_id, "uuid"::text AS r_uuid
)
SELECT lim.n, c.n, c.holders, ins.r_id, ins.r_uuid FROM lim CROSS JOIN c LEFT JOIN ins ON true`
)

// plainJobsCatalog is what the catalog query returns for plain-jobs'
// migrated tables (the columns the runtime reads).
func plainJobsCatalog() *sqlmock.Rows {
	rows := sqlmock.NewRows([]string{"relname", "attname", "format_type", "attnotnull", "atthasdef", "maxlen", "collation"})
	common := [][]driver.Value{
		{"id", "bigint", true, true, 0, ""},
		{"job_class", "character varying(255)", true, false, 255, "C.UTF-8"},
		{"concurrency_key", "character varying(255)", true, true, 255, "C.UTF-8"},
	}
	for _, tbl := range []string{"plainjobs_jobrequest", "plainjobs_jobprocess", "plainjobs_jobresult"} {
		for _, c := range common {
			rows.AddRow(append([]driver.Value{tbl}, c...)...)
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
		rows.AddRow(append([]driver.Value{"plainjobs_jobrequest"}, c...)...)
	}
	rows.AddRow("concurrency_limits", "group_name", "text", true, false, 0, "C.UTF-8")
	return rows
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
	mock.ExpectQuery(catalogQuery).
		WithArgs("public", "plainjobs_jobrequest", "plainjobs_jobprocess", "plainjobs_jobresult", "concurrency_limits").
		WillReturnRows(plainJobsCatalog())

	// A keyed job, limit 2: admitted.
	mock.ExpectBegin()
	mock.ExpectExec(wantGroupLock).
		WithArgs(int64(-744096600792446844), true, int64(7527929927103732752), "app.jobs.ChargeJob::charge-7", "migrate_unique.override_1").
		WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectQuery(wantAdmit).
		WithArgs("migrate_unique.override_1", 2, "app.jobs.ChargeJob", "charge-7",
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
	mock.ExpectExec(wantClassLock).
		WithArgs(true, true, int64(-744096600792446844), "app.jobs.ChargeJob", "migrate_unique.override_0").
		WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectQuery(wantClassWideAdmit).
		WithArgs("migrate_unique.override_0", 3, "app.jobs.ChargeJob",
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
	if err := mock.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
}
