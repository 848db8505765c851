-- The bare claim-and-complete SQL of a django-sqlqueue worker, without Python. run.py makes one
-- script per variant from this text (PGBENCH_SCRIPTS there), filling in:
--   $queue_condition: empty for the default worker's claim (every queue: it walks the partial
--     index sqlqueue_job_ready_any_queue in claim order), or a queue for `runworker --queue
--     default` (it walks sqlqueue_job_ready);
--   $begin / $commit: empty, so the claim commits on its own and a second transaction completes
--     the batch (the fenced outcome UPDATE, once for the batch: two commits per :batch jobs, as
--     a worker runs); or BEGIN / COMMIT around both, the floor no real worker can reach (a claim
--     must be committed before its job runs).
$begin
WITH claim AS (SELECT gen_random_uuid() AS token),  -- one token per claim, as runworker does
claimed AS (
    UPDATE django_sqlqueue_job SET status = 'running', claimed_by = 'pgbench', claimed_at = now(),
        lease_expires_at = now() + interval '30 seconds', claim_token = (SELECT token FROM claim),
        attempts = attempts + 1
    WHERE id IN (
        SELECT id FROM django_sqlqueue_job
        WHERE run_at <= now() AND status IN ('queued', 'failed')
            AND (expires_at IS NULL OR expires_at > now())
            $queue_condition
        ORDER BY priority DESC, run_at ASC, id ASC
        LIMIT :batch FOR UPDATE SKIP LOCKED)
    RETURNING id, claim_token)
SELECT coalesce(array_agg(id), '{}') AS ids, min(claim_token::text) AS token FROM claimed
\gset
UPDATE django_sqlqueue_job SET status = 'succeeded', result = 'null', finished_at = now(),
    lease_expires_at = NULL
WHERE id = ANY(:ids::bigint[]) AND status = 'running' AND claim_token = NULLIF(:token, '')::uuid;
$commit
