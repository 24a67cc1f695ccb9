-- Fills the jobs table: SET migrate_unique.seed_rows = N first. Active rows
-- (pending, running, paused) have distinct keys per type; finished rows
-- (done, failed, cancelled) repeat the keys of active ones. Future times are a
-- year ahead (scheduled jobs, running jobs' leases), so that they still are
-- when a test copies a template database seeded long ago.
WITH p AS (SELECT current_setting('migrate_unique.seed_rows')::int AS n)
INSERT INTO jobs (job_type, payload, status, unique_key, run_at, attempt, lease_until, worker_id, created_at, finished_at, last_error)
SELECT (ARRAY['email.send', 'report.build', 'sync.account'])[i % 3 + 1],
       jsonb_build_object('id', i),
       s.status,
       CASE WHEN i % 3 = 1 THEN NULL
            WHEN s.status IN ('pending', 'running', 'paused') THEN 'k-' || i
            ELSE 'k-' || (i - i % 6) END,
       CASE WHEN i % 10 IN (6, 7) THEN now() + make_interval(years => 1, mins => i % 60 + 1) ELSE now() - make_interval(secs => i) END,
       CASE WHEN s.status = 'failed' THEN 5 ELSE i % 3 END,
       CASE WHEN s.status = 'running' THEN now() + interval '1 year' END,
       CASE WHEN s.status = 'running' THEN 'worker-' || (i % 8) END,
       now() - make_interval(secs => i),
       CASE WHEN s.status IN ('done', 'failed', 'cancelled') THEN now() - make_interval(secs => i / 2) END,
       CASE WHEN s.status = 'failed' THEN 'boom' END
FROM p, generate_series(1, p.n) AS i,
     LATERAL (SELECT (ARRAY['pending', 'running', 'paused', 'done', 'failed', 'cancelled', 'pending', 'done'])[i % 8 + 1] AS status) s;
