-- plain-jobs 0.38.0's own migration from unique_key to concurrency_key, as
-- plain's migration executor runs it on the tables of plainjobs.sql (0.37.6):
--   plain-jobs/plain/jobs/migrations/0007_remove_jobrequest_plainjobs_jobrequest_unique_job_class_key_and_more.py
-- at github.com/dropseed/plain commit 01b6986d798b4df9f80370c8bcbbdbc1b66f4783
-- ("Job concurrency keys, deferring, field types"), released unchanged as
-- plain-jobs 0.38.0 by commit 8d4dae06b26d0533384646f9777ed5224574b936.
-- Rendered by hand with the schema editor of the same commit (see the header
-- of plainjobs.sql): RemoveConstraint of a conditional UniqueConstraint and
-- RemoveIndex are DROP INDEX IF EXISTS; RenameField is RENAME COLUMN;
-- AlterField IntegerField -> SmallIntegerField is ALTER COLUMN ... TYPE
-- smallint USING "col"::smallint (_alter_column_type_sql and _using_sql; the
-- effective default does not change, so no DEFAULT is set or dropped);
-- AlterField of status only adds a choice (choices is a non-db attribute), so
-- it runs nothing; AddIndex is CREATE INDEX, never CONCURRENTLY.
-- plain runs it in one transaction: every table is held ACCESS EXCLUSIVE while
-- the nine ALTER TYPEs rewrite it and its indexes, and the seven indexes are
-- built under that lock.
-- The tests apply it to a copy of plainjobs.sql and compare the result with
-- what `migrate-unique up` leaves (migrations/plainjobs0007_test.go).
DROP INDEX IF EXISTS "plainjobs_jobrequest_unique_job_class_key";
DROP INDEX IF EXISTS "plainjobs_j_unique__67172c_idx";
DROP INDEX IF EXISTS "job_class_unique_key";
DROP INDEX IF EXISTS "plainjobs_j_unique__42f6a6_idx";
DROP INDEX IF EXISTS "job_request_class_unique_key";
ALTER TABLE "plainjobs_jobprocess" RENAME COLUMN "unique_key" TO "concurrency_key";
ALTER TABLE "plainjobs_jobrequest" RENAME COLUMN "unique_key" TO "concurrency_key";
ALTER TABLE "plainjobs_jobresult" RENAME COLUMN "unique_key" TO "concurrency_key";
ALTER TABLE "plainjobs_jobprocess" ALTER COLUMN "priority" TYPE smallint USING "priority"::smallint;
ALTER TABLE "plainjobs_jobprocess" ALTER COLUMN "retries" TYPE smallint USING "retries"::smallint;
ALTER TABLE "plainjobs_jobprocess" ALTER COLUMN "retry_attempt" TYPE smallint USING "retry_attempt"::smallint;
ALTER TABLE "plainjobs_jobrequest" ALTER COLUMN "priority" TYPE smallint USING "priority"::smallint;
ALTER TABLE "plainjobs_jobrequest" ALTER COLUMN "retries" TYPE smallint USING "retries"::smallint;
ALTER TABLE "plainjobs_jobrequest" ALTER COLUMN "retry_attempt" TYPE smallint USING "retry_attempt"::smallint;
ALTER TABLE "plainjobs_jobresult" ALTER COLUMN "priority" TYPE smallint USING "priority"::smallint;
ALTER TABLE "plainjobs_jobresult" ALTER COLUMN "retries" TYPE smallint USING "retries"::smallint;
ALTER TABLE "plainjobs_jobresult" ALTER COLUMN "retry_attempt" TYPE smallint USING "retry_attempt"::smallint;
CREATE INDEX "plainjobs_j_concurr_ad4464_idx" ON "plainjobs_jobprocess" ("concurrency_key");
CREATE INDEX "plainjobs_j_uuid_cd8cd3_idx" ON "plainjobs_jobprocess" ("uuid");
CREATE INDEX "job_concurrency_key" ON "plainjobs_jobprocess" ("job_class", "concurrency_key");
CREATE INDEX "plainjobs_j_concurr_c10926_idx" ON "plainjobs_jobrequest" ("concurrency_key");
CREATE INDEX "plainjobs_j_uuid_c41c85_idx" ON "plainjobs_jobrequest" ("uuid");
CREATE INDEX "job_request_concurrency_key" ON "plainjobs_jobrequest" ("job_class", "concurrency_key");
CREATE INDEX "plainjobs_j_uuid_b33b4c_idx" ON "plainjobs_jobresult" ("uuid");
