-- A team's own two-table queue: a non-public schema, a mixed-case requests
-- table that needs quoting, a class column named kind, a nullable key and a
-- named UNIQUE constraint (not a bare index). The processes table has no key
-- index at all, and there is no results table.
CREATE SCHEMA "Billing Queue";
CREATE TABLE "Billing Queue"."JobRequests" (
    id bigserial PRIMARY KEY,
    uuid uuid NOT NULL DEFAULT gen_random_uuid(),
    kind text NOT NULL,
    unique_key text NULL,
    args jsonb NOT NULL DEFAULT '{}',
    priority smallint NOT NULL DEFAULT 0,
    queue text NOT NULL DEFAULT 'default',
    retries integer NOT NULL DEFAULT 0,
    retry_attempt integer NOT NULL DEFAULT 0,
    start_at timestamptz NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT "JobRequests_uuid_key" UNIQUE (uuid),
    CONSTRAINT "JobRequests_Kind_UniqueKey_uniq" UNIQUE (kind, unique_key)
);
CREATE INDEX "JobRequests_start_at_idx" ON "Billing Queue"."JobRequests" (start_at);
CREATE TABLE "Billing Queue".job_processes (
    id bigserial PRIMARY KEY,
    uuid uuid NOT NULL,
    kind text NOT NULL,
    unique_key text NULL,
    args jsonb NOT NULL DEFAULT '{}',
    priority smallint NOT NULL DEFAULT 0,
    queue text NOT NULL DEFAULT 'default',
    retries integer NOT NULL DEFAULT 0,
    retry_attempt integer NOT NULL DEFAULT 0,
    worker text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now()
);
