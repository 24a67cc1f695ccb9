-- migrate-unique's own version table (never schema_migrations): one row per
-- layout, with the unique rules the cutover dropped so that down can restore
-- them exactly, and the step a run is about to take (recorded before each
-- step, so that status tells a half-done up from a half-done down), the
-- version schema up --expand made and the overrides down --drain set.
SET LOCAL search_path = pg_catalog, pg_temp;
CREATE TABLE IF NOT EXISTS "public"."migrate_unique_version" (
    layout text PRIMARY KEY,
    state text NOT NULL CHECK (state IN ('migrating', 'migrated', 'rolling back', 'expanded')),
    tool_version text NOT NULL,
    saved jsonb NOT NULL DEFAULT '[]',
    updated_at timestamptz NOT NULL DEFAULT now(),
    step text NULL,
    step_started_at timestamptz NULL,
    version_schema text NULL,
    drained jsonb NULL
);
ALTER TABLE "public"."migrate_unique_version" ADD COLUMN IF NOT EXISTS step text NULL, ADD COLUMN IF NOT EXISTS step_started_at timestamptz NULL,
    ADD COLUMN IF NOT EXISTS version_schema text NULL, ADD COLUMN IF NOT EXISTS drained jsonb NULL;
-- A table made by an older version of the tool knows no 'expanded' state.
ALTER TABLE "public"."migrate_unique_version" DROP CONSTRAINT IF EXISTS migrate_unique_version_state_check,
    ADD CONSTRAINT migrate_unique_version_state_check CHECK (state IN ('migrating', 'migrated', 'rolling back', 'expanded'));
INSERT INTO "public"."migrate_unique_version" (layout, state, tool_version)
VALUES ('two-table:plainjobs_jobrequest,plainjobs_jobprocess,plainjobs_jobresult', 'migrating', '0.1.0')
ON CONFLICT (layout) DO UPDATE SET state = 'migrating', tool_version = EXCLUDED.tool_version, updated_at = now()
WHERE "public"."migrate_unique_version".state <> 'migrated';
