-- The way back, in one short transaction: attach the rebuilt unique indexes
-- as the constraints they were, and rename the key column back.
SET LOCAL search_path = pg_catalog, pg_temp;
DO $migrate_unique$
DECLARE
    t pg_catalog.regclass;
    e pg_catalog.jsonb;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    PERFORM set_config('lock_timeout', '2000ms', true);
    LOCK TABLE "public"."plainjobs_jobrequest", "public"."plainjobs_jobprocess", "public"."plainjobs_jobresult" IN ACCESS EXCLUSIVE MODE;
    FOR e IN SELECT jsonb_array_elements(v.saved) FROM "public"."migrate_unique_version" v WHERE v.layout = 'two-table:plainjobs_jobrequest,plainjobs_jobprocess,plainjobs_jobresult' LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_class i JOIN pg_class t ON t.relnamespace = i.relnamespace JOIN pg_index x ON x.indexrelid = i.oid
                       WHERE t.oid = (e->>'table')::regclass AND i.relname = e->>'index' AND x.indisvalid) THEN
            RAISE EXCEPTION 'the unique rule % on % has not been rebuilt: build it first (%), or roll back with migrate-unique down',
                e->>'index', e->>'table', e->>'rebuild';
        END IF;
        IF e->>'constraint' IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM pg_constraint WHERE conrelid = (e->>'table')::regclass AND conname = e->>'constraint') THEN
            EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I UNIQUE USING INDEX %I%s', e->>'table', e->>'constraint', e->>'index',
                CASE WHEN (e->>'deferred')::boolean THEN ' DEFERRABLE INITIALLY DEFERRED'
                     WHEN (e->>'deferrable')::boolean THEN ' DEFERRABLE' ELSE '' END);
        END IF;
    END LOOP;
    FOREACH t IN ARRAY ARRAY['"public"."plainjobs_jobrequest"', '"public"."plainjobs_jobprocess"', '"public"."plainjobs_jobresult"']::regclass[] LOOP
        IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = t AND attname = 'concurrency_key' AND NOT attisdropped)
           AND NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = t AND attname = 'unique_key' AND NOT attisdropped) THEN
            EXECUTE format('ALTER TABLE %s RENAME COLUMN %I TO %I', t, 'concurrency_key', 'unique_key');
        END IF;
    END LOOP;
    -- plain-jobs 0.37's name for the index.
    IF to_regclass('"public"."plainjobs_j_concurr_ad4464_idx"') IS NOT NULL THEN
        IF to_regclass('"public"."plainjobs_j_unique__67172c_idx"') IS NULL THEN
            ALTER INDEX "public"."plainjobs_j_concurr_ad4464_idx" RENAME TO "plainjobs_j_unique__67172c_idx";
        ELSE
            DROP INDEX "public"."plainjobs_j_concurr_ad4464_idx";
        END IF;
    END IF;
    -- plain-jobs 0.37's name for the index.
    IF to_regclass('"public"."job_concurrency_key"') IS NOT NULL THEN
        IF to_regclass('"public"."job_class_unique_key"') IS NULL THEN
            ALTER INDEX "public"."job_concurrency_key" RENAME TO "job_class_unique_key";
        ELSE
            DROP INDEX "public"."job_concurrency_key";
        END IF;
    END IF;
    -- plain-jobs 0.37's name for the index.
    IF to_regclass('"public"."plainjobs_j_concurr_c10926_idx"') IS NOT NULL THEN
        IF to_regclass('"public"."plainjobs_j_unique__42f6a6_idx"') IS NULL THEN
            ALTER INDEX "public"."plainjobs_j_concurr_c10926_idx" RENAME TO "plainjobs_j_unique__42f6a6_idx";
        ELSE
            DROP INDEX "public"."plainjobs_j_concurr_c10926_idx";
        END IF;
    END IF;
    -- plain-jobs 0.37's name for the index.
    IF to_regclass('"public"."job_request_concurrency_key"') IS NOT NULL THEN
        IF to_regclass('"public"."job_request_class_unique_key"') IS NULL THEN
            ALTER INDEX "public"."job_request_concurrency_key" RENAME TO "job_request_class_unique_key";
        ELSE
            DROP INDEX "public"."job_request_concurrency_key";
        END IF;
    END IF;
    UPDATE "public"."migrate_unique_version" SET state = 'rolling back', saved = '[]', updated_at = now() WHERE layout = 'two-table:plainjobs_jobrequest,plainjobs_jobprocess,plainjobs_jobresult';
END
$migrate_unique$;
