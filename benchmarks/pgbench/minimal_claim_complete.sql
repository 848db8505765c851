-- Claim up to :batch ready rows of the minimal table in one transaction, complete them in a
-- second one: the least SQL a worker that commits its claim can send. Two commits per batch.
WITH claimed AS (
    UPDATE minimal_job SET status = 'running'
    WHERE id IN (
        SELECT id FROM minimal_job WHERE status = 'queued' AND run_at <= now()
        ORDER BY run_at, id LIMIT :batch FOR UPDATE SKIP LOCKED)
    RETURNING id)
SELECT coalesce(array_agg(id), '{}') AS ids FROM claimed
\gset
UPDATE minimal_job SET status = 'done' WHERE id = ANY(:ids::bigint[]);
