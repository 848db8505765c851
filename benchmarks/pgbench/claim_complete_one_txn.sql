-- The floor: claim :batch rows of one queue and complete them in the same transaction, one commit
-- per batch. No real worker can work like this (the claim must be committed before the job runs);
-- it shows what one WAL flush per batch costs.
BEGIN;
WITH claim AS (SELECT gen_random_uuid() AS token),  -- one token per claim, as runworker does
claimed AS (
    UPDATE django_sqlqueue_job SET status = 'running', claimed_by = 'pgbench', claimed_at = now(),
        lease_expires_at = now() + interval '30 seconds', claim_token = (SELECT token FROM claim),
        attempts = attempts + 1
    WHERE id IN (
        SELECT id FROM django_sqlqueue_job
        WHERE run_at <= now() AND status IN ('queued', 'failed')
            AND (expires_at IS NULL OR expires_at > now())
            AND queue IN ('default')
        ORDER BY priority DESC, run_at ASC, id ASC
        LIMIT :batch FOR UPDATE SKIP LOCKED)
    RETURNING id, claim_token)
SELECT coalesce(array_agg(id), '{}') AS ids, min(claim_token::text) AS token FROM claimed
\gset
UPDATE django_sqlqueue_job SET status = 'succeeded', result = 'null', finished_at = now(),
    lease_expires_at = NULL
WHERE id = ANY(:ids::bigint[]) AND status = 'running' AND claim_token = NULLIF(:token, '')::uuid;
COMMIT;
