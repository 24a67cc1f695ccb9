-- A single-table queue: one jobs table with a status column and a nullable
-- key, unique only among active states; finished rows may repeat a key.
CREATE TABLE jobs (
    id bigserial PRIMARY KEY,
    job_type text NOT NULL,
    payload jsonb NOT NULL DEFAULT '{}',
    status text NOT NULL DEFAULT 'pending',
    unique_key text NULL,
    run_at timestamptz NOT NULL DEFAULT now(),
    attempt integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL DEFAULT 5,
    lease_until timestamptz NULL,
    worker_id text NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz NULL,
    last_error text NULL,
    CONSTRAINT jobs_status_check CHECK (status IN ('pending', 'running', 'paused', 'done', 'failed', 'cancelled'))
);
CREATE UNIQUE INDEX jobs_active_unique_key ON jobs (job_type, unique_key) WHERE status IN ('pending', 'running', 'paused');
CREATE INDEX jobs_status_run_at_idx ON jobs (status, run_at);
