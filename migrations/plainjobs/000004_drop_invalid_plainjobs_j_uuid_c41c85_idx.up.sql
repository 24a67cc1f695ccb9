-- An invalid leftover of an interrupted build would make the next file fail: drop it first.
DROP INDEX CONCURRENTLY IF EXISTS "public"."plainjobs_j_uuid_c41c85_idx";
