-- Forget this layout; drop the version table once no layout is left in it.
SET LOCAL search_path = pg_catalog, pg_temp;
DO $migrate_unique$
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    IF to_regclass('"public"."migrate_unique_version"') IS NOT NULL THEN
        DELETE FROM "public"."migrate_unique_version" WHERE layout = 'two-table:plainjobs_jobrequest,plainjobs_jobprocess,plainjobs_jobresult';
        IF NOT EXISTS (SELECT 1 FROM "public"."migrate_unique_version") THEN
            DROP TABLE "public"."migrate_unique_version";
        END IF;
    END IF;
END
$migrate_unique$;
