DROP INDEX CONCURRENTLY IF EXISTS "public"."plainjobs_jobrequest_concurrency_key_idx";
