-- plain-jobs' migrations after 0007 that run SQL, as plain runs them on the
-- schema 0007 leaves (plainjobs_0007.sql), rendered by hand like
-- plainjobs.sql (RemoveIndex is DROP INDEX IF EXISTS, RenameIndex is
-- ALTER INDEX ... RENAME TO; AlterModelOptions runs nothing):
--   0008_alter_jobrequest_options.py (commit 11253fbe1c3ff8edd05ae9bdb7d5b9a4bf17b04e, plain-jobs 0.46.3): no statement
--   0009_remove_jobprocess_plainjobs_j_job_cla_19f3c1_idx_and_more.py
--     (commit 262ad569d5df95a3534e11292ef20f3a22bd9007, plain-jobs 0.46.4)
--   0010_rename_plainjobs_j_created_04fbb8_idx_plainjobs_jobprocess_created_at_idx_and_more.py
--     (commit 74aa8b76aa4056e8650fda8a35037ef6cfdf6b42, plain-jobs 0.46.5)
-- in github.com/dropseed/plain, plain-jobs/plain/jobs/migrations/. 0010 gives
-- plainjobs_j_concurr_c10926_idx the name plainjobs_jobrequest_concurrency_key_idx
-- (and the processes' one plainjobs_jobprocess_concurrency_key_idx): an index
-- of that name left by `up` would make it fail (42P07). From plain-jobs 0.47.1
-- on, those files no longer hold AddIndex/RenameIndex operations (commit
-- c58b4ba1fec984a5e7861054eeebad95c23eb4a1): indexes converge on `plain
-- postgres sync` instead. The tests run this file after `up` and after 0007.
-- 0009_remove_jobprocess_plainjobs_j_job_cla_19f3c1_idx_and_more
DROP INDEX IF EXISTS "plainjobs_j_job_cla_19f3c1_idx";
DROP INDEX IF EXISTS "plainjobs_j_job_cla_a18abf_idx";
-- 0010_rename_plainjobs_j_created_04fbb8_idx_plainjobs_jobprocess_created_at_idx_and_more
ALTER INDEX "plainjobs_j_created_04fbb8_idx" RENAME TO "plainjobs_jobprocess_created_at_idx";
ALTER INDEX "plainjobs_j_queue_d07d21_idx" RENAME TO "plainjobs_jobprocess_queue_idx";
ALTER INDEX "plainjobs_j_concurr_ad4464_idx" RENAME TO "plainjobs_jobprocess_concurrency_key_idx";
ALTER INDEX "plainjobs_j_started_5cd62a_idx" RENAME TO "plainjobs_jobprocess_started_at_idx";
ALTER INDEX "plainjobs_j_job_req_32b6eb_idx" RENAME TO "plainjobs_jobprocess_job_request_uuid_idx";
ALTER INDEX "plainjobs_j_trace_i_9f93c8_idx" RENAME TO "plainjobs_jobprocess_trace_id_idx";
ALTER INDEX "plainjobs_j_uuid_cd8cd3_idx" RENAME TO "plainjobs_jobprocess_uuid_idx";
ALTER INDEX "plainjobs_j_priorit_fd4fac_idx" RENAME TO "plainjobs_jobrequest_priority_idx";
ALTER INDEX "plainjobs_j_created_1eeb20_idx" RENAME TO "plainjobs_jobrequest_created_at_idx";
ALTER INDEX "plainjobs_j_queue_b34b5a_idx" RENAME TO "plainjobs_jobrequest_queue_idx";
ALTER INDEX "plainjobs_j_start_a_f3b8da_idx" RENAME TO "plainjobs_jobrequest_start_at_idx";
ALTER INDEX "plainjobs_j_concurr_c10926_idx" RENAME TO "plainjobs_jobrequest_concurrency_key_idx";
ALTER INDEX "plainjobs_j_trace_i_194003_idx" RENAME TO "plainjobs_jobrequest_trace_id_idx";
ALTER INDEX "plainjobs_j_uuid_c41c85_idx" RENAME TO "plainjobs_jobrequest_uuid_idx";
ALTER INDEX "plainjobs_j_created_7978bf_idx" RENAME TO "plainjobs_jobresult_created_at_idx";
ALTER INDEX "plainjobs_j_job_pro_751a64_idx" RENAME TO "plainjobs_jobresult_job_process_uuid_idx";
ALTER INDEX "plainjobs_j_started_6fb2ce_idx" RENAME TO "plainjobs_jobresult_started_at_idx";
ALTER INDEX "plainjobs_j_ended_a_648f25_idx" RENAME TO "plainjobs_jobresult_ended_at_idx";
ALTER INDEX "plainjobs_j_status_1ef683_idx" RENAME TO "plainjobs_jobresult_status_idx";
ALTER INDEX "plainjobs_j_job_req_3ddecf_idx" RENAME TO "plainjobs_jobresult_job_request_uuid_idx";
ALTER INDEX "plainjobs_j_job_cla_8791b4_idx" RENAME TO "plainjobs_jobresult_job_class_idx";
ALTER INDEX "plainjobs_j_queue_0a2178_idx" RENAME TO "plainjobs_jobresult_queue_idx";
ALTER INDEX "plainjobs_j_trace_i_02f370_idx" RENAME TO "plainjobs_jobresult_trace_id_idx";
ALTER INDEX "plainjobs_j_uuid_b33b4c_idx" RENAME TO "plainjobs_jobresult_uuid_idx";
