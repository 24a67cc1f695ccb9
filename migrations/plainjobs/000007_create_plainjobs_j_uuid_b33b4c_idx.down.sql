DROP INDEX CONCURRENTLY IF EXISTS "public"."plainjobs_j_uuid_b33b4c_idx";
