"""Building workflows and enqueueing them whole, spelled as Celery's canvas is.

``task.s(*args, **kwargs)`` is a :class:`Signature`: one job to be. ``chain(a, b, c)`` runs each
after the one before, which must have succeeded, passing its result as the first argument of
the next (``task.si(...)``: an immutable signature, given no result); ``group(a, b)`` runs them
side by side; ``chord(group, callback)`` runs the callback once every job of the group has
succeeded, with the list of their results, in the group's order, as its first argument.
:class:`Workflow` says any graph (a DAG) step by step. ``enqueue()`` inserts every job and every
edge in one transaction, the caller's if one is open (all of it or nothing);
``enqueue_on_commit()`` does it when the caller's transaction commits. A ``django.tasks`` task
of django-sqlqueue's backend is a step too: ``signature(task, args, kwargs)``.
"""

import contextlib
import uuid
from dataclasses import dataclass, field

from django.db import router, transaction

from ..enqueue.arguments import parent_results_given_first
from ..enqueue.inserting import bulk_enqueue
from ..exceptions import InvalidWorkflow
from ..statuses import JobStatus
from ..transitions import changes
from ..waiting import waiter

#: How a step receives its parents' results as its first argument (``Job.payload`` key
#: ``"parent_results"``; the runner reads it): the one parent's result, or the list of them.
ONE, LIST = "one", "list"


class Signature:
    """One job to be: a ``@job`` task, its arguments and enqueue options (``task.s(...)``)."""

    def __init__(self, task, args=(), kwargs=None, *, immutable=False, run_anyway=False,
                 options=None):
        self.task = task
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.immutable = immutable  # not given its parents' results
        self.run_anyway = run_anyway  # runs even if a parent fails for good
        self.options = dict(options or {})
        if "unique_key" in self.options:
            raise InvalidWorkflow(
                f"{getattr(task, 'name', task)!r}: a workflow's job cannot have a unique_key (a "
                "workflow is enqueued whole); deduplicate the workflow before enqueueing it.")

    def __repr__(self):
        return f"{getattr(self.task, 'name', self.task)}.s{self.args!r}"

    def _copy(self, **changes):
        values = {"task": self.task, "args": self.args, "kwargs": self.kwargs,
                  "immutable": self.immutable, "run_anyway": self.run_anyway,
                  "options": self.options, **changes}
        return Signature(values.pop("task"), **values)

    def using(self, **options) -> "Signature":
        """A copy with other enqueue options (``queue``, ``priority``, ``delay``...)."""
        self.task.using(**options)  # checks their names
        return self._copy(options={**self.options, **options})

    def set(self, *, run_anyway: bool) -> "Signature":
        """A copy that runs even if one of its parents fails for good (``run_anyway=True``:
        a compensation or "finally" step); by default such a failure cancels it."""
        return self._copy(run_anyway=run_anyway)

    def prepare(self):
        """The unsaved job (validated now, as ``task.prepare`` does)."""
        task = self.task.using(**self.options) if self.options else self.task
        if hasattr(task, "prepare"):  # a @job task
            return task.prepare(*self.args, **self.kwargs)
        for accepts, prepare in _preparers:
            if accepts(task):
                return prepare(task, self.args, self.kwargs)
        raise InvalidWorkflow(
            f"{task!r} is neither a @job task nor a django.tasks task of django-sqlqueue's "
            "backend: a workflow's steps are jobs of this queue.")

    def enqueue(self, *, using=None) -> "EnqueuedWorkflow":
        """A workflow of this one job."""
        return Workflow.of(self).enqueue(using=using)


#: How a task of another API becomes an unsaved job: ``(accepts(task), prepare(task, args,
#: kwargs))``; the django.tasks backend registers its own when it is imported.
_preparers: list = []


def register_preparer(accepts, prepare) -> None:
    """Let workflows take tasks that ``accepts(task)``, made into jobs by ``prepare``."""
    _preparers.append((accepts, prepare))


def signature(task, args=(), kwargs=None, *, immutable=False) -> Signature:
    """A step of ``task`` with these arguments, as ``task.s(*args, **kwargs)`` says it for a
    ``@job`` task (``immutable``: ``task.si``); for a ``django.tasks`` task, which has no
    ``s()``."""
    return Signature(task, args, kwargs, immutable=immutable)


class _Canvas:
    """A chain or a group of signatures and canvases."""

    def __init__(self, *items):
        if len(items) == 1 and not isinstance(items[0], (Signature, _Canvas)):
            items = tuple(items[0])  # group(iterable), as Celery allows
        if not items:
            raise InvalidWorkflow(f"an empty {type(self).__name__}: give it at least one step.")
        for item in items:
            if not isinstance(item, (Signature, _Canvas)):
                raise InvalidWorkflow(
                    f"{type(self).__name__}() takes signatures (task.s(...)), chains and "
                    f"groups, not {item!r}.")
        self.items = items

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(map(repr, self.items))})"

    def enqueue(self, *, using=None) -> "EnqueuedWorkflow":
        return Workflow.of(self).enqueue(using=using)

    def enqueue_on_commit(self, *, using=None) -> "Workflow":
        return Workflow.of(self).enqueue_on_commit(using=using)


class chain(_Canvas):  # noqa: N801 - named as Celery's
    """Each step after the one before has succeeded, given its result as first argument."""


class group(_Canvas):  # noqa: N801 - named as Celery's
    """Steps side by side; what follows a group in a chain waits for all of them and gets the
    list of their results."""


def chord(header, body) -> chain:
    """``body`` once every step of ``header`` (a group, or its steps) has succeeded, given the
    list of their results in the group's order."""
    return chain(header if isinstance(header, group) else group(header), body)


@dataclass(frozen=True)
class Step:
    """One job of a Workflow, as ``Workflow.add`` returns it, to name as a later step's
    parent."""

    workflow: "Workflow"
    index: int


@dataclass
class _Node:
    signature: Signature
    parents: list  # [(step index, run_anyway)]
    results: str | None  # ONE, LIST or None


@dataclass
class EnqueuedWorkflow:
    """What ``enqueue()`` made: the workflow's id and its jobs in the order they were added
    (a chain's: first to last)."""

    id: uuid.UUID
    jobs: list = field(default_factory=list)

    def final_jobs(self):
        """The jobs no other job of the workflow waits for: a chain's last, a chord's
        callback, a group's members."""
        return _job_model().objects.using(self.jobs[0]._state.db).filter(
            workflow_id=self.id, child_links__isnull=True).order_by("pk")

    def wait_finished(self, *, timeout: float | None) -> list:
        """Block until every one of ``final_jobs()`` has a final status, and return them read
        again (a chain's or a chord's: one job, ``[callback]``). A job of the workflow that
        fails for good cancels the jobs after it, so this returns then too. Raises
        ``WaitTimeout`` after ``timeout`` seconds (None: no limit)."""
        final = self.final_jobs()
        waiter.wait(final.model, final.db, list(final.values_list("pk", flat=True)),
                    timeout=timeout)
        return list(final)

    async def await_finished(self, *, timeout: float | None) -> list:
        """``wait_finished``'s async twin."""
        final = self.final_jobs()
        pks = [pk async for pk in final.values_list("pk", flat=True)]
        await waiter.await_(final.model, final.db, pks, timeout=timeout)
        return [job async for job in final]

    def cancel(self, *, by=None) -> int:
        """Cancel every unfinished job of the workflow, running ones included."""
        return changes.cancel(_job_model().objects.using(self.jobs[0]._state.db).filter(
            workflow_id=self.id), by=by)


class Workflow:
    """Any graph of jobs, step by step::

        flow = Workflow()
        a = flow.add(fetch.s(1))
        b = flow.add(fetch.s(2))
        flow.add(merge.s(), after=[a, b])  # merge(results_of_a_and_b)
        flow.enqueue()
    """

    def __init__(self):
        self._nodes: list[_Node] = []

    @classmethod
    def of(cls, canvas) -> "Workflow":
        """The workflow of a signature, chain or group."""
        flow = cls()
        flow._add_canvas(canvas, [], after_group=False)
        return flow

    def add(self, signature: Signature, *, after=(), run_anyway=False, results=None) -> Step:
        """Add a job that runs once every step of ``after`` has succeeded (or, for the steps in
        ``run_anyway``, or all if True, has ended in any way). ``results``: ``"one"`` gives it
        its first parent's result as first argument, ``"list"`` the list of its parents'
        results in the order of ``after``; by default none (it may read them with
        ``current_job().parent_results()``)."""
        if not isinstance(signature, Signature):
            raise InvalidWorkflow(f"Workflow.add() takes a signature (task.s(...)), not "
                                  f"{signature!r}.")
        if results not in (None, ONE, LIST):
            raise InvalidWorkflow(f"results={results!r}: give 'one', 'list' or None.")
        anyway = set(after) if run_anyway is True else set(run_anyway or ())
        parents = []
        for step in after:
            if not isinstance(step, Step) or step.workflow is not self:
                raise InvalidWorkflow(f"after={step!r}: name steps this workflow's add() "
                                      "returned.")
            if step.index not in {index for index, _ in parents}:
                parents.append((step.index, step in anyway or signature.run_anyway))
        self._nodes.append(_Node(signature, parents, results if parents else None))
        return Step(self, len(self._nodes) - 1)

    def _add_canvas(self, item, parents: list, *, after_group: bool) -> tuple:
        """Add ``item`` after ``parents`` (steps, the end of a group if ``after_group``);
        returns (the steps that end it, whether they are a group's)."""
        if isinstance(item, Signature):
            results = None if item.immutable or not parents else (LIST if after_group else ONE)
            return [self.add(item, after=parents, results=results)], False
        if isinstance(item, group):
            return [step for member in item.items
                    for step in self._add_canvas(member, parents, after_group=after_group)[0]
                    ], True
        for member in item.items:  # a chain: each member after the one before
            parents, after_group = self._add_canvas(member, parents, after_group=after_group)
        return parents, after_group

    def _prepare(self) -> tuple:
        """(workflow id, the unsaved jobs in step order), validated now."""
        if not self._nodes:
            raise InvalidWorkflow("an empty Workflow: add() at least one step.")
        workflow_id = uuid.uuid4()
        jobs = []
        for node in self._nodes:
            # A step given its parents' results gets them as its first argument when it runs.
            with (parent_results_given_first() if node.results else contextlib.nullcontext()):
                job = node.signature.prepare()
            job.workflow_id = workflow_id
            if node.parents:
                job.status = JobStatus.WAITING
                job.parents_pending = len(node.parents)
            if node.results:
                job.payload = {**job.payload, "parent_results": node.results}
            jobs.append(job)
        return workflow_id, jobs

    def _insert(self, workflow_id, jobs, alias) -> EnqueuedWorkflow:
        from ..models import JobDependency  # not at import: see _job_model

        with transaction.atomic(using=alias):
            bulk_enqueue(_job_model(), jobs, alias)
            JobDependency._default_manager.using(alias).bulk_create([
                JobDependency(child_id=job.pk, parent_id=jobs[parent].pk, position=position,
                              run_anyway=run_anyway)
                for job, node in zip(jobs, self._nodes, strict=True)
                for position, (parent, run_anyway) in enumerate(node.parents)
            ])
        return EnqueuedWorkflow(workflow_id, jobs)

    def enqueue(self, *, using=None) -> EnqueuedWorkflow:
        """Insert every job and edge in one transaction (inside the caller's, if one is open
        on that database); ``using``: the database (default: the router's choice for Job)."""
        workflow_id, jobs = self._prepare()
        return self._insert(workflow_id, jobs, using or router.db_for_write(_job_model()))

    def enqueue_on_commit(self, *, using=None) -> EnqueuedWorkflow:
        """Validate now; insert the whole workflow when the transaction on ``using`` (the alias
        to wait for, as in ``transaction.on_commit``) commits, on the database the router picks
        for Job. The jobs get their pks then."""
        workflow_id, jobs = self._prepare()
        made = EnqueuedWorkflow(workflow_id, jobs)
        alias = router.db_for_write(_job_model())
        transaction.on_commit(lambda: self._insert(workflow_id, jobs, alias), using=using)
        return made


def _job_model():
    # Not at import: the package's face imports this module (through registry.py), before the
    # app registry is ready.
    from ..models import Job

    return Job
