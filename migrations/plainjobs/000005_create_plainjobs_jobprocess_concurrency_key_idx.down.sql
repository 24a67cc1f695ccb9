DROP INDEX CONCURRENTLY IF EXISTS "public"."plainjobs_jobprocess_concurrency_key_idx";
