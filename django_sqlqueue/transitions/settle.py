"""What a job's end does to the jobs that wait for it: the release of a workflow's children.

``settle(model, alias, finished)`` runs in the transaction that wrote the parents' final
statuses (``run/outcomes.write``, ``JobQuerySet.cancel``, the rescue), right after that write,
so a child is released at the commit of its last parent's outcome, or not at all if that
transaction rolls back. Exactly once, however the parents race:

1. The parents' edges not yet resolved are read with their rows locked and marked resolved.
   A parent's final status is written once (the outcome write is fenced on the claim token),
   and an edge is resolved once (``resolved_at IS NULL``), so a parent rescued, retried or
   finished again never counts twice.
2. The children's rows are locked in id order (two transactions releasing children of one
   chord lock them in the same order: no deadlock), then each child's ``parents_pending`` is
   lowered by its edges resolved here: an UPDATE of the locked row, so two parents finishing
   at once on two workers each lower it once, one after the other.
3. A child whose count reached 0 and is still ``waiting`` becomes ``queued``: the transaction
   that lowered the count to 0 is the only one that sees it there.

A parent that ended ``exhausted``, ``cancelled`` or ``expired`` cancels its waiting children
(``cancelled_by`` says which parent and how it ended), which cancels theirs in turn, unless the
edge has ``run_anyway``: then it counts as a success. A parent deleted before it finished
(``DELETED``: transitions/deleted.py) does the same. Jobs outside workflows never come here.
"""

from collections import defaultdict

from django.db import connections
from django.utils import timezone

from ..db import ops, returning
from ..enqueue import notify
from ..statuses import FINISHED_STATUSES, JobStatus


def edge_table(model):
    """The table of a workflow's edges (``JobDependency``), reached through the job model's own
    relation: the callers hand this layer the model, and it never imports the models."""
    return model._meta.get_field("child_links").related_model


def settle(model, alias: str, finished: dict) -> list:
    """Resolve the edges of ``finished`` ({job id: the final status just written}) and release
    or cancel their children, transitively; returns the ids of the children queued. Call it
    inside the transaction that wrote those statuses."""
    finished = {pk: status for pk, status in finished.items()
                if status in FINISHED_STATUSES or status == DELETED}
    jobs = model._default_manager.db_manager(alias)
    connection = connections[alias]
    driver = ops(connection)
    released = []
    while finished:
        now = timezone.now()
        # Locked in (child, id) order and marked resolved, in one statement where it can be;
        # then in that order here too (which failed parent a child's cancel names).
        statement = driver.resolve_edges(edge_table(model), parents=list(finished), now=now)
        edges = sorted(returning.fetch(connection, *statement),
                       key=lambda edge: (edge[1], edge[0]))
        if not edges:
            break
        counted, doomed = defaultdict(int), {}
        for _, child, parent, run_anyway in edges:
            if finished[parent] == JobStatus.SUCCEEDED or run_anyway:
                counted[child] += 1
            else:
                doomed.setdefault(child, parent)
        # Lock the children in id order before changing them (see the module's docstring),
        # reading what the changes below depend on: locked, the rows stay as read until commit.
        children = sorted({edge[1] for edge in edges})
        with connection.cursor() as cursor:
            cursor.execute(driver.lock_children(model, count=len(children)), children)
            locked = {pk: (pending, status, queue)
                      for pk, pending, status, queue in cursor.fetchall()}
        # One UPDATE per (count, released): a chain's step, or a chord's member, is one.
        changes, queued = defaultdict(list), []
        for child, count in counted.items():
            pending, status, queue = locked[child]
            lowered = count if pending >= count else 0  # never below 0
            release = (pending == lowered and status == JobStatus.WAITING
                       and child not in doomed)
            if lowered or release:
                changes[lowered, release].append(child)
            if release:
                queued.append((child, queue))
        for (lowered, release), children in changes.items():
            with connection.cursor() as cursor:
                cursor.execute(driver.release_children(model, count=len(children),
                                                       release=release), [lowered, *children])
        finished = _cancel(jobs, doomed, finished, now)
        if queued:
            released += [pk for pk, _ in queued]
            _wake(alias, {queue for _, queue in queued})
    return released


def _cancel(jobs, doomed: dict, finished: dict, now) -> dict:
    """Cancel the waiting children in ``doomed`` ({child: the parent that failed}); returns
    them as newly finished, {id: cancelled}, for their own children."""
    by_parent = defaultdict(list)
    for child, parent in doomed.items():
        by_parent[parent].append(child)
    cancelled = {}
    for parent, children in by_parent.items():
        waiting = jobs.filter(pk__in=children, status=JobStatus.WAITING)
        ids = list(waiting.values_list("pk", flat=True))
        if ids:
            jobs.filter(pk__in=ids, status=JobStatus.WAITING).update(
                status=JobStatus.CANCELLED, finished_at=now,
                cancelled_by=f"{CANCELLED_BY_PARENT}{parent} {_how(finished[parent])}")
            cancelled.update(dict.fromkeys(ids, JobStatus.CANCELLED))
    return cancelled


def _how(status) -> str:
    return "was deleted before it finished" if status == DELETED else f"ended {status}"


def _wake(alias: str, queues: set) -> None:
    """Wake workers for the queued children at commit, as an insert of new jobs does."""
    connection = connections[alias]
    if notify.sends_notify(connection):
        ops(connection).notify(notify.CHANNEL, sorted(queues))
    notify.wake_in_process_after_commit(alias)


#: What ``settle`` is given for a parent deleted before it finished (not a status a row can
#: have): its waiting children are cancelled as by a parent that failed for good.
DELETED = "deleted"

#: How ``_cancel`` signs the children it cancels (``cancelled_by``): ``resume`` takes back only
#: those.
CANCELLED_BY_PARENT = "workflow: parent job "


def resume(model, alias: str, retried: list) -> list:
    """Put back to ``waiting`` the jobs that the end of ``retried`` (jobs queued again by
    ``retry_now``, in this transaction) had cancelled, and theirs in turn; returns their ids.

    A child comes back only if it never started (cancelled by this module, not by a person) and
    no other parent of it ended failed for good without ``run_anyway``: else it stays
    cancelled (its edges to the retried parents are unresolved all the same). A child that
    comes back has its ``parents_pending`` counted again from its unresolved edges, under its
    row lock, so a parent of it finishing at the same moment is counted once, before or after
    (``settle`` locks the child too)."""
    jobs = model._default_manager.db_manager(alias)
    dependencies = edge_table(model)._default_manager.db_manager(alias)
    resumed, frontier = [], set(retried)
    while frontier:
        edges = list(dependencies.filter(parent_id__in=list(frontier), resolved_at__isnull=False)
                     .values_list("pk", "child_id"))
        children = list(jobs.filter(
            pk__in=sorted({child for _, child in edges}), status=JobStatus.CANCELLED,
            cancel_requested_at__isnull=True, cancelled_by__startswith=CANCELLED_BY_PARENT,
        ).order_by("pk").select_for_update().values_list("pk", flat=True))
        back = []
        for child in children:
            failed_elsewhere = dependencies.filter(
                child_id=child, resolved_at__isnull=False, run_anyway=False,
            ).exclude(parent_id__in=list(frontier)).exclude(parent__status=JobStatus.SUCCEEDED)
            if not failed_elsewhere.exists():
                back.append(child)
        # Open again for every child cancelled by the cascade, resumed now or not: a retried
        # parent's next end counts for it again (a child held back by another failed parent
        # comes back when that one is retried in turn, this parent counted).
        dependencies.filter(pk__in=[pk for pk, child in edges if child in set(children)]
                            ).update(resolved_at=None)
        for child in back:
            pending = dependencies.filter(child_id=child, resolved_at__isnull=True).count()
            jobs.filter(pk=child).update(status=JobStatus.WAITING, finished_at=None,
                                         cancelled_by=None, parents_pending=pending)
        resumed += back
        frontier = set(back)
    return resumed
