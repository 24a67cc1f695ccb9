-- Fills the team queue: SET migrate_unique.seed_rows = N first (N requests,
-- N/10 processes). Keyless jobs store NULL, as the UNIQUE constraint needs.
-- Scheduled jobs are a year ahead, so that they are still in the future when
-- a test copies a template database seeded long ago.
WITH p AS (SELECT current_setting('migrate_unique.seed_rows')::int AS n)
INSERT INTO "Billing Queue"."JobRequests" (kind, unique_key, args, priority, queue, retries, retry_attempt, start_at, created_at)
SELECT (ARRAY['invoice.send', 'invoice.charge', 'ledger.sync'])[i % 3 + 1],
       CASE WHEN i % 2 = 0 THEN 'customer-' || i END,
       jsonb_build_object('customer', i), (i % 3)::smallint,
       (ARRAY['default', 'billing'])[i % 2 + 1],
       3, CASE WHEN i % 10 = 5 THEN 1 ELSE 0 END,
       CASE WHEN i % 10 = 7 THEN now() + make_interval(years => 1, mins => i % 90 + 1) END,
       now() - make_interval(secs => i)
FROM p, generate_series(1, p.n) AS i;

WITH p AS (SELECT current_setting('migrate_unique.seed_rows')::int AS n)
INSERT INTO "Billing Queue".job_processes (uuid, kind, unique_key, args, retries, retry_attempt, worker, started_at)
SELECT gen_random_uuid(), (ARRAY['invoice.send', 'invoice.charge', 'ledger.sync'])[i % 3 + 1],
       CASE WHEN i % 2 = 0 THEN 'running-' || i END,
       jsonb_build_object('customer', i), 3, 0, 'worker-' || (i % 4), now() - make_interval(secs => i % 120)
FROM p, generate_series(1, greatest(p.n / 10, 1)) AS i;
