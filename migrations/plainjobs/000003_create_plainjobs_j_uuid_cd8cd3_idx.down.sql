DROP INDEX CONCURRENTLY IF EXISTS "public"."plainjobs_j_uuid_cd8cd3_idx";
