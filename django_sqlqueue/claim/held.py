"""Which of its claims a worker still holds, read back from the database.

A worker knows a held job by its claim (id and claim token, ``worker/pool.py``); the database
normally agrees, since every claim commits before the worker sees its rows. A failover to an
asynchronous standby breaks that: the claims the old primary committed in its last moments,
before the standby received them, are gone, and on the new primary those jobs are ready again,
or already claimed by another worker. A worker that started such a job after the failover would
run it beside the other worker, and nothing could fence it (the row no longer has its token).
So once its database was in trouble, a worker reads back its claims before it starts another
held job (``Pool``), and drops the ones it lost.

The other way round, a claim can commit while its reply is lost: the database restarted, or the
connection broke, after the claim's commit and before the worker read its rows. The claim then
failed for the worker, which never holds those jobs; the database has them running under its
name. Left alone, they wait for their leases to run out, and the rescue counts each as an
interruption (its worker "lost"), for an outage. So after a claim that failed that way, the
worker reads back the jobs running under its name that it does not hold (``unheld``), and gives
them back.
"""

from ..db.pieces import running_by_id
from ..statuses import JobStatus


def still_held(jobs, worker_id: str, claims) -> set:
    """Of ``claims`` (``(id, claim token)`` pairs), those the database still gives to
    ``worker_id``: the job is running, claimed by it, under that token. ``jobs``: a queryset of
    the job model on the worker's database. One query, by primary key."""
    claims = list(claims)
    if not claims:
        return set()
    rows = (jobs.filter(pk__in=[pk for pk, _ in claims], status=running_by_id(),
                        claimed_by=worker_id)
            .values_list("pk", "claim_token"))
    found = set(rows)
    return {claim for claim in claims if claim in found}


def unheld(jobs, worker_id: str, claims) -> list:
    """The jobs the database has running under ``worker_id``'s name but under none of its
    ``claims`` (the ``(id, claim token)`` pairs it holds): those of a claim whose reply it never
    got. ``jobs``: a queryset of the job model on the worker's database. One query."""
    held = set(claims)
    running = jobs.filter(status=JobStatus.RUNNING, claimed_by=worker_id).order_by("pk")
    return [job for job in running if (job.pk, job.claim_token) not in held]
