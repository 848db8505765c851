"""A backend for Django's Tasks framework (``django.tasks``, Django 6.0+).

::

    TASKS = {
        "default": {
            "BACKEND": "django_sqlqueue.backend.SQLQueueBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {"MAX_ATTEMPTS": 5, "BACKOFF": "myproject.tasks.backoff"},
        }
    }

``@task`` functions enqueued with ``.enqueue()`` / ``.aenqueue()`` become Job rows that
``manage.py runworker`` runs. A job's task name is ``"django.tasks:" + task.module_path``; the
worker imports that path and runs it only if it is a Task whose backend is this backend.
"""

import datetime as dt
import logging
import sys
from dataclasses import dataclass
from inspect import iscoroutinefunction
from typing import Any

from django.db import router
from django.tasks import Task, TaskContext, TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TaskError
from django.tasks.exceptions import TaskResultDoesNotExist
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils.json import normalize_json
from django.utils.module_loading import import_string

from . import backend_checks
from .enqueue.building import job_fields
from .exceptions import InvalidJob, JobCancelled, UnknownTask
from .run.parent_results import check_given, parent_results_argument
from .run.runner import Attempt, OutcomeKind, arguments, register_adapter
from .statuses import JobStatus
from .waiting import waiter
from .workflows.canvas import register_preparer

logger = logging.getLogger(__name__)
#: Task names of jobs enqueued through this backend start with this; the rest of the name is the
#: module path of a django.tasks Task.
DJANGO_TASK_PREFIX = "django.tasks:"

STATUS_MAP = {
    JobStatus.QUEUED: TaskResultStatus.READY,
    JobStatus.FAILED: TaskResultStatus.READY,  # waiting for its retry: it will run again
    JobStatus.RUNNING: TaskResultStatus.RUNNING,
    JobStatus.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
    JobStatus.EXHAUSTED: TaskResultStatus.FAILED,
    JobStatus.CANCELLED: TaskResultStatus.FAILED,
    JobStatus.EXPIRED: TaskResultStatus.FAILED,
    JobStatus.WAITING: TaskResultStatus.READY,  # a workflow's, waiting for its parents
}


@dataclass(frozen=True, slots=True, kw_only=True)
class SQLQueueTask(Task):
    """A django.tasks Task with retries: ``@task(max_attempts=5, backoff=..., timeout=...)``.

    ``backoff(exception, task_result)`` returns the seconds to wait before the next attempt, or
    None to stop retrying; without it the SQLQUEUE exponential backoff applies. Like the
    proposal in django/new-features#142, ``.using()`` does not change these.
    """

    max_attempts: int | None = None  # default: OPTIONS["MAX_ATTEMPTS"], then 1
    # Interruptions (its worker lost, its database gone) after which it is not run again;
    # default: OPTIONS["MAX_INTERRUPTIONS"], then SQLQUEUE's (3).
    max_interruptions: int | None = None
    backoff: Any = None  # callable(exception, task_result) -> seconds | None
    timeout: float | None = None  # seconds; a job over it fails with JobTimeout
    # Runs inside the transaction that writes its outcome (docs/transactional-jobs.md).
    transactional: bool = False


class SQLQueueBackend(BaseTaskBackend):
    task_class = SQLQueueTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    @property
    def database(self) -> str:
        from .models import Job

        return self.options.get("DATABASE") or router.db_for_write(Job)

    def validate_task(self, task):
        super().validate_task(task)
        backend_checks.check_task_options(task)

    def enqueue(self, task, args, kwargs):
        from .models import Job

        job = Job.objects.enqueue_prepared(self.prepare_job(task, args, kwargs),
                                           using=self.database)
        result = self.task_result(job, task)
        task_enqueued.send(type(self), task_result=result)
        return result

    def prepare_job(self, task, args, kwargs):
        """The unsaved, validated job ``enqueue`` inserts (a workflow's step, too)."""
        backend_checks.require_app(self)
        from .models import Job

        self.validate_task(task)
        fields = job_fields(
            DJANGO_TASK_PREFIX + task.module_path, args, kwargs,
            queue=task.queue_name, priority=task.priority, run_at=task.run_after,
            max_attempts=self.max_attempts(task), max_interruptions=self.max_interruptions(task),
            timeout=getattr(task, "timeout", None),
            transactional=getattr(task, "transactional", False),
        )
        fields["payload"]["backend"] = self.alias
        if task.run_after is not None:  # so that result.task is the task as enqueued
            fields["payload"]["run_after"] = task.run_after.isoformat()
        return Job(**fields)

    def scheduled_job_fields(self, task, args, kwargs, *, queue=None, priority=None) -> dict:
        """The fields of the jobs a periodic schedule of ``task`` enqueues (schedules.py): those
        ``enqueue()`` would insert for these arguments, with the schedule's queue and priority
        if it names them (checked against this backend's ``QUEUES``)."""
        changes = {key: value for key, value in (("queue_name", queue), ("priority", priority))
                   if value is not None}
        if changes:
            task = task.using(**changes)
        self.validate_task(task)
        fields = job_fields(
            DJANGO_TASK_PREFIX + task.module_path, args, kwargs,
            queue=task.queue_name, priority=task.priority, max_attempts=self.max_attempts(task),
            max_interruptions=self.max_interruptions(task), timeout=getattr(task, "timeout", None),
            transactional=getattr(task, "transactional", False),
        )
        fields["payload"]["backend"] = self.alias
        return fields

    def max_attempts(self, task) -> int:
        """Attempts in all: the task's ``max_attempts``, else ``OPTIONS["MAX_ATTEMPTS"]``, else 1.
        A task that raises ends FAILED, as with Django's own backends, unless retries were
        asked for."""
        return getattr(task, "max_attempts", None) or self.options.get("MAX_ATTEMPTS") or 1

    def max_interruptions(self, task) -> int | None:
        """The task's ``max_interruptions``, else ``OPTIONS["MAX_INTERRUPTIONS"]``, else None
        (``SQLQUEUE["MAX_INTERRUPTIONS"]``)."""
        return (getattr(task, "max_interruptions", None)
                or self.options.get("MAX_INTERRUPTIONS"))

    def get_result(self, result_id):
        job = self._job(result_id)
        try:
            task = load_task(job)
        except (UnknownTask, InvalidJob) as exc:
            raise TaskResultDoesNotExist(f"{result_id}: {exc}") from exc
        return self.task_result(job, task)

    def get_progress(self, result_id):
        """The latest progress the task reported with ``report_progress`` (a ``Progress``:
        ``done``, ``total``, ``fraction``, ``percent``, ``message``, ``at``), or None if it has
        not; Django's ``TaskResult`` has no field for it. Raises ``TaskResultDoesNotExist`` as
        ``get_result`` does."""
        return self._job(result_id).progress

    def _job(self, result_id):
        backend_checks.require_app(self)
        from .models import Job

        try:
            pk = int(result_id)
        except (TypeError, ValueError):
            raise TaskResultDoesNotExist(result_id) from None
        job = (
            Job.objects.using(self.database)
            .filter(pk=pk, task_name__startswith=DJANGO_TASK_PREFIX)
            .first()
        )
        if job is None or (job.payload or {}).get("backend", self.alias) != self.alias:
            raise TaskResultDoesNotExist(result_id)
        return job

    def task_result(self, job, task) -> TaskResult:
        """The TaskResult view of a Job row."""
        errors = job.errors or []
        workers = [entry.get("worker", "") for entry in errors][: job.attempts]
        workers += [job.claimed_by or ""] * (job.attempts - len(workers))
        run_after = (job.payload or {}).get("run_after")
        # The task as it was enqueued (Django's backends return ``result.task == task``).
        enqueued = task.using(priority=job.priority, queue_name=job.queue,
                              run_after=run_after and dt.datetime.fromisoformat(run_after))
        result = TaskResult(
            task=enqueued,
            id=str(job.pk),
            status=STATUS_MAP[job.status],
            enqueued_at=job.enqueued_at,
            started_at=job.claimed_at,
            finished_at=job.finished_at,
            last_attempted_at=job.claimed_at,
            args=job.args,
            kwargs=job.kwargs,
            backend=self.alias,
            # What the task raised. An interruption (its worker lost, its database gone) is no
            # error of the task's, unless it was the one that ended the job.
            errors=[
                TaskError(exception_class_path=entry.get("type", "builtins.Exception"),
                          traceback=entry.get("traceback", "")
                          or (entry["message"] if entry.get("interrupted") else ""))
                for number, entry in enumerate(errors, 1)
                if not entry.get("interrupted")
                or (number == len(errors) and job.status == JobStatus.EXHAUSTED)
            ],
            worker_ids=workers,
        )
        if job.status == JobStatus.CANCELLED and not any(
                entry.get("type") == CANCELLED_TYPE for entry in errors):
            # Cancelled before it started (or its worker was lost): no attempt recorded why.
            result.errors.append(TaskError(exception_class_path=CANCELLED_TYPE,
                                           traceback=f"{CANCELLED_TYPE}: {cancel_text(job)}"))
        if job.status == JobStatus.SUCCEEDED:
            object.__setattr__(result, "_return_value", job.result)
        return result

    def check(self, **kwargs):
        return backend_checks.check_backend(self)

    def retry_delay(self, task, exception, task_result):
        """Seconds until the next attempt (None: the policy's), or False to stop retrying."""
        backoff = getattr(task, "backoff", None) or self.options.get("BACKOFF")
        if backoff is None:
            return None
        if isinstance(backoff, str):
            backoff = import_string(backoff)
        seconds = backoff(exception, task_result)
        return False if seconds is None else max(float(seconds), 0.0)


CANCELLED_TYPE = f"{JobCancelled.__module__}.{JobCancelled.__qualname__}"


def wait_finished(result: TaskResult, *, timeout: float | None) -> TaskResult:
    """Block until the task of ``result`` (of this backend) has finished, then return
    ``result`` refreshed: ``result.return_value`` raises if it failed, as Django's does.
    Django has no wait API of its own; this is the backend's. Raises ``WaitTimeout`` after
    ``timeout`` seconds (None: no limit). See docs/waiting.md."""
    from .models import Job

    waiter.wait(Job, _backend_of(result).database, [int(result.id)], timeout=timeout)
    result.refresh()
    return result


async def await_finished(result: TaskResult, *, timeout: float | None) -> TaskResult:
    """``wait_finished``'s async twin: it never blocks the event loop."""
    from .models import Job

    await waiter.await_(Job, _backend_of(result).database, [int(result.id)], timeout=timeout)
    await result.arefresh()
    return result


def _backend_of(result) -> SQLQueueBackend:
    backend = result.task.get_backend()
    if not isinstance(backend, SQLQueueBackend):
        raise TypeError(f"wait_finished() waits for results of django-sqlqueue's backend; this "
                        f"one is of {type(backend).__name__} ({result.backend!r}).")
    return backend


def cancel_text(job) -> str:
    who = job.cancelled_by or "someone"
    when = (job.cancel_requested_at or job.finished_at)
    return f"job {job.pk} was cancelled by {who}" + (f" at {when.isoformat()}" if when else "")


def load_task(job) -> Task:
    """Find the job's Task among modules already imported, and make sure this backend may run it.

    Nothing is imported on behalf of a row: importing a module runs its top-level code, and a row
    may name any module. Task modules are imported at start-up (every installed app's tasks.py
    and jobs.py, or the modules in SQLQUEUE["TASK_MODULES"]).
    """
    path = job.task_name.removeprefix(DJANGO_TASK_PREFIX)
    module_name, _, attribute = path.rpartition(".")
    module = sys.modules.get(module_name)
    if module is None:
        raise UnknownTask(
            f"django task {path!r}: module {module_name!r} was not imported at start-up, and a "
            "worker never imports a module named by a row. Put the task in an installed app's "
            'tasks.py (or list the module name in SQLQUEUE["TASK_MODULES"]), and deploy workers '
            "with the same code as the web processes."
        )
    task = getattr(module, attribute, None)
    if not isinstance(task, Task):
        raise InvalidJob(f"{path!r} is {type(task).__name__}, not a django.tasks Task: refused.")
    alias = (job.payload or {}).get("backend") or task.backend
    if alias != task.backend:
        task = task.using(backend=alias)
    if not isinstance(task.get_backend(), SQLQueueBackend):
        raise InvalidJob(f"task {path!r} belongs to backend {alias!r}, which is not "
                         "django-sqlqueue's: refused.")
    return task


class DjangoTaskAttempt(Attempt):
    """One attempt of a django.tasks job, for the runner: Django's signals and TaskResult, JSON
    results as Django normalizes them, and the backend's retry policy."""

    sends_signals = True
    __slots__ = ("task", "backend", "task_result", "_error")

    def __init__(self, job, task):
        args, kwargs = arguments(job)
        self.task = task
        self.backend = task.get_backend()
        self.task_result = self.backend.task_result(job, task)
        if task.takes_context:
            args = [TaskContext(task_result=self.task_result), *args]
        super().__init__(job, task.func, args, kwargs, is_async=iscoroutinefunction(task.func))

    def call(self):
        given = self.job.payload.get("parent_results")  # a workflow's step (workflows/)
        if given is not None:
            check_given(self.job, given)
            at = 1 if self.task.takes_context else 0  # after the context, if it takes one
            self.args = [*self.args[:at], parent_results_argument(self.job, given),
                         *self.args[at:]]
        if self.is_async:
            # As Task.call does (async_to_sync), with the runner's wrapper that cancels the
            # task when the job is cancelled.
            return super().call()
        return self.task.call(*self.args, **self.kwargs)

    def started(self):
        task_started.send(type(self.backend), task_result=self.task_result)

    def result(self, value):
        return normalize_json(value)  # TypeError / ValueError if Django cannot store it

    def retry_delay(self, error):
        self._add_error(error)  # backoff(exception, task_result) sees this attempt's error
        return self.backend.retry_delay(self.task, error, self.task_result)

    def finished(self, outcome, will_retry):
        result = self.task_result
        if outcome.kind == OutcomeKind.INTERRUPTED and will_retry:
            return  # not finished: it runs again, as if this run had not happened
        if outcome.kind == OutcomeKind.SUCCEEDED:
            status = TaskResultStatus.SUCCESSFUL
            object.__setattr__(result, "_return_value", outcome.result)
        else:
            if outcome.error is not None and not self._has_error(outcome.error):
                self._add_error(outcome.error)
            status = TaskResultStatus.READY if will_retry else TaskResultStatus.FAILED
        object.__setattr__(result, "status", status)
        # Sent from inside the except block for a failure: Django's log receiver reads
        # sys.exc_info().
        task_finished.send(type(self.backend), task_result=result)

    def _add_error(self, error):
        kind = type(error)
        self.task_result.errors.append(TaskError(
            exception_class_path=f"{kind.__module__}.{kind.__qualname__}", traceback=""))
        self._error = error

    def _has_error(self, error) -> bool:
        return getattr(self, "_error", None) is error  # unset until an error was added


def load_attempt(job) -> DjangoTaskAttempt:
    return DjangoTaskAttempt(job, load_task(job))


register_adapter(DJANGO_TASK_PREFIX, load_attempt)
register_preparer(
    lambda task: isinstance(task, Task) and isinstance(task.get_backend(), SQLQueueBackend),
    lambda task, args, kwargs: task.get_backend().prepare_job(task, args, kwargs))
