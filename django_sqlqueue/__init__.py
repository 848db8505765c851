"""django-sqlqueue: a job queue in the database your Django project already has.

Importing this package imports no models, so ``from django_sqlqueue import job`` is safe in any
module, including ones Django imports before the app registry is ready.
"""

from .context import current_job
from .exceptions import Abort, Reschedule
from .registry import aenqueue_on_commit, enqueue_on_commit, job
from .run.progress import report_progress
from .run.steps import astep, step, step_key
from .schedules.declare import schedule

__version__ = "0.1.0"

__all__ = [
    "Abort", "Reschedule", "__version__", "aenqueue_on_commit", "astep", "current_job",
    "enqueue_on_commit", "job", "report_progress", "schedule", "step", "step_key",
]
