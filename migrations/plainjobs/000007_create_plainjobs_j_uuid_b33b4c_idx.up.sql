-- plain-jobs 0.38's migration 0007 creates this index; built online here.
CREATE INDEX CONCURRENTLY "plainjobs_j_uuid_b33b4c_idx" ON "public"."plainjobs_jobresult" ("uuid");
