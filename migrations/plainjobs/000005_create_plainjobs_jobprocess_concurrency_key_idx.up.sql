CREATE INDEX CONCURRENTLY "plainjobs_jobprocess_concurrency_key_idx" ON "public"."plainjobs_jobprocess" ("job_class", "unique_key");
