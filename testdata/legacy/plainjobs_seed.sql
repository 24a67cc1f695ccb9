-- Fills plain-jobs' tables. Rows: SET migrate_unique.seed_rows = N first
-- (N pending requests, N/10 running processes, N/5 finished results).
-- Half the requests carry a key; every tenth is a retry sharing the key of
-- its original; every tenth is scheduled in the future (a year ahead, so that
-- it still is when a test copies a template database seeded long ago).
WITH p AS (SELECT current_setting('migrate_unique.seed_rows')::int AS n),
     classes AS (SELECT ARRAY['app.jobs.ChargeJob', 'app.jobs.SendEmail', 'app.jobs.SyncAccount', 'app.jobs.BuildReport'] AS c)
INSERT INTO plainjobs_jobrequest (created_at, uuid, job_class, parameters, priority, source, queue, retries, retry_attempt, unique_key, start_at, trace_id, span_id)
SELECT now() - make_interval(secs => i),
       gen_random_uuid(),
       c[(CASE WHEN i % 10 = 3 THEN i - 1 ELSE i END) % 4 + 1],
       CASE WHEN i % 7 = 0 THEN NULL ELSE jsonb_build_object('account_id', i, 'amount_cents', (i * 37) % 10000) END,
       i % 5,
       'seed',
       (ARRAY['default', 'high', 'low'])[i % 3 + 1],
       CASE WHEN i % 10 = 3 THEN 3 ELSE i % 4 END,
       CASE WHEN i % 10 = 3 THEN 1 ELSE 0 END,
       CASE WHEN i % 10 = 3 THEN 'key-' || (i - 1) WHEN i % 2 = 0 THEN 'key-' || i ELSE '' END,
       CASE WHEN i % 10 = 7 THEN now() + make_interval(years => 1, hours => i % 24 + 1) END,
       CASE WHEN i % 3 = 0 THEN md5(i::text) END,
       CASE WHEN i % 3 = 0 THEN left(md5((i * 7)::text), 16) END
FROM p, classes, generate_series(1, p.n) AS i;

WITH p AS (SELECT current_setting('migrate_unique.seed_rows')::int AS n),
     classes AS (SELECT ARRAY['app.jobs.ChargeJob', 'app.jobs.SendEmail', 'app.jobs.SyncAccount', 'app.jobs.BuildReport'] AS c)
INSERT INTO plainjobs_jobprocess (created_at, uuid, job_class, parameters, priority, source, queue, retries, retry_attempt, unique_key, trace_id, span_id, started_at, job_request_uuid)
SELECT now() - make_interval(secs => i + 60), gen_random_uuid(), c[i % 4 + 1],
       jsonb_build_object('account_id', i), i % 5, 'seed', 'default', 2, 0,
       CASE WHEN i % 2 = 0 THEN 'run-' || i ELSE '' END,
       NULL, NULL, now() - make_interval(secs => i % 300), gen_random_uuid()
FROM p, classes, generate_series(1, greatest(p.n / 10, 1)) AS i;

WITH p AS (SELECT current_setting('migrate_unique.seed_rows')::int AS n),
     classes AS (SELECT ARRAY['app.jobs.ChargeJob', 'app.jobs.SendEmail', 'app.jobs.SyncAccount', 'app.jobs.BuildReport'] AS c)
INSERT INTO plainjobs_jobresult (created_at, uuid, job_class, parameters, priority, source, queue, retries, retry_attempt, unique_key, trace_id, span_id, started_at, job_request_uuid, job_process_uuid, ended_at, error, status, retry_job_request_uuid)
SELECT now() - make_interval(secs => i + 3600), gen_random_uuid(), c[i % 4 + 1],
       jsonb_build_object('account_id', i), i % 5, 'seed', 'default',
       CASE WHEN i % 4 = 0 THEN 0 ELSE 3 END, 0,
       -- finished rows repeat the keys of active ones: they never count
       CASE WHEN i % 2 = 0 THEN 'key-' || (i * 2) ELSE '' END,
       NULL, NULL, now() - make_interval(secs => i + 3000), gen_random_uuid(), gen_random_uuid(),
       now() - make_interval(secs => i + 2900),
       CASE WHEN i % 4 = 0 THEN '' ELSE 'Traceback: boom' END,
       (ARRAY['SUCCESSFUL', 'ERRORED', 'CANCELLED', 'LOST'])[i % 4 + 1],
       NULL
FROM p, classes, generate_series(1, greatest(p.n / 5, 1)) AS i;
