"""JobDependency: one edge of a workflow's graph, a child job waiting for a parent job
(docs/workflows.md)."""

from django.db import connections, models, router

from ..claim.rows import converted_rows
from ..db import ops


class JobDependency(models.Model):
    """``child`` runs only once ``parent`` has finished: when it succeeded, or whatever its end
    with ``run_anyway``; a parent that fails for good without it cancels the child.

    No foreign-key constraint in the database: finished jobs are deleted in batches by plain
    statements (the cleaner), and a child may outlive its pruned parents. ``resolved_at`` is
    set once, by the transaction that wrote the parent's final status (transitions/settle.py):
    that is what makes each edge count once towards the child's ``parents_pending``, however
    often the parent is rescued, retried or finished again."""

    id = models.BigAutoField(primary_key=True)
    child = models.ForeignKey("Job", on_delete=models.DO_NOTHING, db_constraint=False,
                              related_name="parent_links")
    parent = models.ForeignKey("Job", on_delete=models.DO_NOTHING, db_constraint=False,
                               related_name="child_links")
    # The parent's place among the child's parents: the order of parent_results() (a chord's
    # callback gets its group's results in the group's order).
    position = models.PositiveIntegerField(db_default=0)
    run_anyway = models.BooleanField(db_default=False)  # a parent's failure does not cancel
    resolved_at = models.DateTimeField(null=True, blank=True)  # when the parent finished

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["child", "parent"], name="sqlqueue_dependency_once"),
        ]

    def __str__(self):
        return f"job {self.child_id} after job {self.parent_id}"


def parent_results(job) -> list:
    """``job``'s parents' results in their order (``Job.parent_results``)."""
    # One query, its text built once (a chain's every step reads it): each edge with its
    # parent's result if it succeeded. A subquery, not a join: a pruned parent's edge stays (no
    # foreign key) and gives None in its place.
    model = type(job)
    alias = job._state.db or router.db_for_read(JobDependency, instance=job)
    connection = connections[alias]
    with connection.cursor() as cursor:
        cursor.execute(ops(connection).parent_results(model, JobDependency), [job.pk])
        return [value for (value,) in converted_rows(model, alias, cursor.fetchall(),
                                                      ("result",))]
