"""A workflow's job deleted before it finished: the jobs waiting for it are settled.

A parent that never finishes would leave its children ``waiting`` for ever: nothing else
resolves their edges. So deleting a workflow's job (``Job.delete()``, a queryset's
``delete()``, the admin's delete action, which calls it) settles its children in the same
transaction as a cancelled parent would: each waiting child is cancelled, ``cancelled_by``
saying "workflow: parent job 12 was deleted before it finished", and so are theirs in turn,
unless the edge has ``run_anyway`` (then it counts as done, and the child's result for that
parent is None). A job deleted after it finished changes nothing: its edges were resolved when
it finished.

The deleted parents' edges are kept (resolved): a child released through ``run_anyway`` reads
its parents' results by position. The deleted children's edges go with them. Rows deleted
another way (raw SQL, ``delete_in_batches`` of unfinished jobs) are found by the maintenance
step ``worker/maintenance/orphans.py``, which calls ``settle_deleted`` for parents gone.
"""

from .settle import DELETED, edge_table, settle


def settle_deleted(model, alias: str, ids) -> list:
    """Settle the jobs waiting for the jobs ``ids``, just deleted in this transaction (or gone),
    and drop the edges of those that were children; returns the ids of the children queued
    (through ``run_anyway``). Call it inside the transaction that deleted them."""
    ids, released = list(ids), []
    dependencies = edge_table(model)._default_manager
    for start in range(0, len(ids), CHUNK):  # a statement's parameters are bounded (SQLite)
        chunk = ids[start:start + CHUNK]
        released += settle(model, alias, dict.fromkeys(chunk, DELETED))
        dependencies.db_manager(alias).filter(child_id__in=chunk).delete()
    return released


#: Deleted jobs settled per round of statements.
CHUNK = 500
