-- Drop the runtime's tables and column, but never while they hold operator
-- data (limit overrides, live slot leases, skip metadata).
SET LOCAL search_path = pg_catalog, pg_temp;
DO $migrate_unique$
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    PERFORM set_config('lock_timeout', '2000ms', true);
    IF to_regclass('"public"."concurrency_limits"') IS NOT NULL THEN
        IF NOT EXISTS (SELECT 1 FROM "public"."concurrency_limits" WHERE TRUE) THEN
            DROP TABLE "public"."concurrency_limits";
        END IF;
    END IF;
    IF to_regclass('"public"."concurrency_slots"') IS NOT NULL THEN
        IF NOT EXISTS (SELECT 1 FROM "public"."concurrency_slots" WHERE expires_at > now()) THEN
            DROP TABLE "public"."concurrency_slots";
        END IF;
    END IF;
    IF to_regclass('"public"."concurrency_reschedules"') IS NOT NULL THEN
        DROP TABLE "public"."concurrency_reschedules";
    END IF;
    IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '"public"."plainjobs_jobresult"'::regclass AND attname = 'concurrency_skip' AND NOT attisdropped) THEN
        IF NOT EXISTS (SELECT 1 FROM "public"."plainjobs_jobresult" WHERE "concurrency_skip" IS NOT NULL) THEN
            ALTER TABLE "public"."plainjobs_jobresult" DROP COLUMN "concurrency_skip";
        END IF;
    END IF;
END
$migrate_unique$;
