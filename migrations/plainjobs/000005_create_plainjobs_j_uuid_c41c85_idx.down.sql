DROP INDEX CONCURRENTLY IF EXISTS "public"."plainjobs_j_uuid_c41c85_idx";
