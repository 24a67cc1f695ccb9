-- plain-jobs 0.38's migration 0007 creates this index; built online here.
CREATE INDEX CONCURRENTLY "plainjobs_j_uuid_c41c85_idx" ON "public"."plainjobs_jobrequest" ("uuid");
