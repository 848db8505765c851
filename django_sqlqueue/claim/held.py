"""Which of its claims a worker still holds, read back from the database.

A worker knows a held job by its claim (id and claim token, ``worker/pool.py``); the database
normally agrees, since every claim commits before the worker sees its rows. A failover to an
asynchronous standby breaks that: the claims the old primary committed in its last moments,
before the standby received them, are gone, and on the new primary those jobs are ready again,
or already claimed by another worker. A worker that started such a job after the failover would
run it beside the other worker, and nothing could fence it (the row no longer has its token).
So once its database was in trouble, a worker reads back its claims before it starts another
held job (``Pool``), and drops the ones it lost.
"""

from ..db.pieces import running_by_id


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
