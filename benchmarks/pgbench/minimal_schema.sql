-- The smallest job table that can still claim in order: the "physical limit" reference of
-- issue 7, next to django-sqlqueue's real table. One partial index on the ready rows.
CREATE TABLE minimal_job (
    id bigserial PRIMARY KEY,
    status text NOT NULL DEFAULT 'queued',
    run_at timestamptz NOT NULL DEFAULT now(),
    payload jsonb
);
CREATE INDEX minimal_job_ready ON minimal_job (run_at, id) WHERE status = 'queued';
