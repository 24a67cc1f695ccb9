-- The skip-metadata column: a NULL column, so adding it rewrites no row.
SET LOCAL search_path = pg_catalog, pg_temp;
SELECT set_config('lock_timeout', '2000ms', true);
ALTER TABLE "public"."plainjobs_jobresult" ADD COLUMN IF NOT EXISTS "concurrency_skip" jsonb NULL;

