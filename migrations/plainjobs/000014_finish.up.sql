SET LOCAL search_path = pg_catalog, pg_temp;
UPDATE "public"."migrate_unique_version" SET state = 'migrated', tool_version = '0.1.0', updated_at = now(), step = NULL, step_started_at = NULL WHERE layout = 'two-table:plainjobs_jobrequest,plainjobs_jobprocess,plainjobs_jobresult';
