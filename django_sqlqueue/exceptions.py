"""Every error django-sqlqueue raises, one class per problem.

Errors raised while *building* a job derive from :class:`InvalidJob` (a ``ValueError``), so callers
can catch them all at the enqueue boundary. :class:`Reschedule` and :class:`Abort` are not errors:
a job function raises them to tell the worker what to do with the job.
"""


class SQLQueueError(Exception):
    """Base class for django-sqlqueue's own errors."""


class InvalidJob(SQLQueueError, ValueError):
    """A job could not be enqueued because one of its values is invalid."""


class InvalidPayload(InvalidJob, TypeError):
    """The job's args or kwargs are not plain JSON, or are too large. A ``TypeError`` too, as
    Django's task backends raise for arguments they cannot store."""


class InvalidArguments(InvalidJob, TypeError):
    """The job's args and kwargs do not fit its function's signature: the call could never run.
    A ``TypeError`` too, as calling the function with them would raise."""


class UnknownTask(InvalidJob):
    """The task name is not registered with ``@job`` in this process."""


class InvalidQueueName(InvalidJob):
    """The queue name is empty, too long, or has characters outside [A-Za-z0-9_.-]."""


class InvalidPriority(InvalidJob):
    """The priority is not an integer from -100 to 100."""


class InvalidSchedule(InvalidJob):
    """run_at / delay / max_age are negative, naive, or given together."""


class InvalidRetryPolicy(InvalidJob):
    """max_attempts or a retry delay is out of range."""


class InvalidTransactional(InvalidJob):
    """``transactional`` is not a bool, or a transactional job's time limit is none or longer
    than ``SQLQUEUE["TRANSACTIONAL_TIMEOUT_SECONDS"]``."""


class InvalidUniqueKey(InvalidJob):
    """The unique key is not a non-empty string of at most 255 characters, or its
    ``unique_states`` or ``unique_period`` is not valid."""


class InvalidTags(InvalidJob):
    """The tags are not a list of at most 20 distinct short strings."""


class InvalidMetadata(InvalidJob):
    """The metadata is not a small JSON object."""


class InvalidConcurrencyKey(InvalidJob):
    """The concurrency key is not a non-empty string of at most 255 characters."""


class InvalidPeriodicSchedule(SQLQueueError, ValueError):
    """A periodic schedule (``@schedule``) has an invalid cron expression, interval, time zone,
    missed-tick policy, name or arguments."""


class ScheduleDeclaredInCode(InvalidPeriodicSchedule):
    """The schedule of that name is declared in code (``@schedule``): only the code changes it,
    and a run-time schedule cannot take its name."""


class ScheduleExists(InvalidPeriodicSchedule):
    """A run-time schedule of that name already exists: change it with ``update_schedule``."""


class ScheduleNotFound(SQLQueueError, LookupError):
    """No schedule has that name (``update_schedule``, ``remove_schedule``)."""


class PrometheusClientMissing(SQLQueueError, ImportError):
    """Metrics were asked for (``runworker --metrics-port``, the metrics view) but
    prometheus_client is not installed: ``pip install 'django-sqlqueue[prometheus]'``."""


class Reschedule(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Raised by a job function: run this job again later, without counting a failure."""

    def __init__(self, *, delay=None, run_at=None):
        if (delay is None) == (run_at is None):
            raise TypeError("Reschedule() takes exactly one of delay= or run_at=.")
        super().__init__(f"reschedule (delay={delay!r}, run_at={run_at!r})")
        self.delay = delay
        self.run_at = run_at


class Abort(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Raised by a job function: this job can never succeed; record the reason and do not retry."""


class JobCancelled(SQLQueueError):
    """The attempt was stopped because someone cancelled the job while it ran (recorded in the
    job's errors, and as the error of its ``django.tasks`` result). A job may raise it itself
    after seeing ``current_job().cancel_requested``; returning works as well."""


class WaitTimeout(SQLQueueError, TimeoutError):
    """A wait for a job (``Job.wait_finished``, a workflow's or a ``django.tasks`` result's)
    ran out of time before the job finished. The job goes on: wait again, or cancel it."""


class InvalidQueueLimit(SQLQueueError, ValueError):
    """A queue limit is not a whole number of 0 or more, a rate period is not above 0, or a key
    weight is not a number above 0."""


class InvalidWorkflow(InvalidJob):
    """A workflow (chain, group, chord, Workflow) is empty, names a step of another workflow,
    or gives a job an option a workflow's job cannot have (a unique key)."""


class StepError(SQLQueueError, RuntimeError):
    """A durable step (``step``, ``astep``) was called where it cannot be recorded: outside a
    job, with a name already taken in this run, or with a name that is empty or too long."""
