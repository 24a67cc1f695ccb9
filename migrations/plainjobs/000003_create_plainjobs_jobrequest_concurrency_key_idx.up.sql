CREATE INDEX CONCURRENTLY "plainjobs_jobrequest_concurrency_key_idx" ON "public"."plainjobs_jobrequest" ("job_class", "unique_key");
