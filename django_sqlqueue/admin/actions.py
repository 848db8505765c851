"""The job admin's actions: retry now, run now, cancel (running jobs included: they are asked
to stop, and the user is recorded as who asked) and delete.

Every state change is a call of the queryset method code uses (``retry_now()``, ``run_now()``,
``cancel()``); the admin holds no copy of the state rules. To say what was skipped and why, it
counts the selection by status before the call and compares with the number the method changed.
The statuses each method applies to (``RETRYABLE_STATUSES``, ``READY_STATUSES``, defined next to
the statuses themselves) are used only to word that explanation, and to offer on a job's page
the buttons that can apply to it; whether a job changes is always the method's decision.
"""

import logging
from dataclasses import dataclass

from django.contrib import admin, messages
from django.db import IntegrityError, transaction
from django.db.models import Count
from django.template.response import TemplateResponse

from ..statuses import READY_STATUSES, RETRYABLE_STATUSES, JobStatus
from .display import BREADCRUMBS_AS_LIST, STATUS_ORDER, status_label

logger = logging.getLogger("django_sqlqueue.admin")
DELETE_BATCH = 1000


@dataclass(frozen=True)
class Operation:
    name: str
    method: str  # the JobQuerySet method that does it
    done: str  # what happened to the changed jobs
    applies_to: tuple  # statuses the method may change, to explain skips
    applies_text: str
    other_skip: str  # why a job of a status it applies to may still be left alone
    records_who: bool = False  # the method takes ``by``: the user's name is recorded
    done_running: str = ""  # what happened, when running jobs were selected (if different)

    def run(self, queryset, user=None) -> int:
        who = {"by": user.get_username()} if self.records_who and user is not None else {}
        return getattr(queryset, self.method)(**who)


RETRY = Operation(
    "retry_now", "retry_now", "queued again, due now", RETRYABLE_STATUSES,
    "retry now applies to failed, exhausted, cancelled and expired jobs",
    "their unique key is held by another unfinished job, or they changed meanwhile",
)
RUN_NOW = Operation(
    "run_now", "run_now", "made due now", READY_STATUSES,
    "run now applies to queued jobs and failed jobs waiting for their retry",
    "they were already due",
)
CANCEL = Operation(
    "cancel", "cancel", "cancelled",
    (*READY_STATUSES, JobStatus.WAITING, JobStatus.RUNNING),
    "only jobs that have not finished can be cancelled",
    "they finished meanwhile, or were running and already asked to stop",
    records_who=True,
    done_running="cancelled or, if running, asked to stop (they show “cancelling” until their "
    "worker stops them, within a heartbeat, plus the grace period if they do not stop by "
    "themselves)",
)

OPERATIONS = {operation.name: operation for operation in (RETRY, RUN_NOW, CANCEL)}


def counts_by_status(queryset) -> dict:
    return dict(queryset.order_by().values_list("status").annotate(n=Count("pk")))


def plural(n, word="job") -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def describe_counts(counts: dict) -> str:
    ordered = sorted(counts.items(), key=lambda item: _status_rank(item[0]))
    return ", ".join(f"{n} {status_label(status).lower()}" for status, n in ordered)


def _status_rank(status) -> int:
    return STATUS_ORDER.index(status) if status in STATUS_ORDER else len(STATUS_ORDER)


def perform(modeladmin, request, queryset, operation: Operation) -> int:
    """Run ``operation`` on the selection and tell the user what changed and what did not."""
    before = counts_by_status(queryset)
    try:
        with transaction.atomic(using=queryset.db):  # a savepoint: a refusal changes nothing
            changed = operation.run(queryset, request.user)
    except IntegrityError as exc:
        # A unique key taken by a job enqueued meanwhile (between the selection and the
        # UPDATE) is refused by the unique index: say so instead of failing with a server error.
        logger.warning("admin action=%s refused by the database: %s", operation.name, exc)
        modeladmin.message_user(
            request,
            "Nothing was changed: the database refused it. Several selected jobs may share a "
            "unique key, which only one unfinished job can hold; select one job per key.",
            messages.ERROR,
        )
        return 0
    selected = sum(before.values())
    logger.info(
        "admin action=%s user=%s selected=%s changed=%s", operation.name,
        request.user.get_username(), selected, changed,
    )
    if changed:
        done = (operation.done_running if operation.done_running
                and before.get(JobStatus.RUNNING) else operation.done)
        modeladmin.message_user(request, f"{plural(changed)} {done}.", messages.SUCCESS)
    not_applicable = {s: n for s, n in before.items() if s not in operation.applies_to}
    left_alone = max(selected - changed - sum(not_applicable.values()), 0)
    reasons = []
    if not_applicable:
        reasons.append(f"{describe_counts(not_applicable)} ({operation.applies_text})")
    if left_alone:
        reasons.append(f"{left_alone} because {operation.other_skip}")
    skipped = selected - changed
    if skipped > 0:
        modeladmin.message_user(
            request, f"{plural(skipped)} skipped: {'; '.join(reasons)}.", messages.WARNING
        )
    elif not selected:
        modeladmin.message_user(request, "No jobs were selected.", messages.WARNING)
    return changed


@admin.action(
    permissions=["retry"], description="Retry now (failed, exhausted, cancelled, expired)"
)
def retry_now(modeladmin, request, queryset):
    perform(modeladmin, request, queryset, RETRY)


@admin.action(permissions=["run_now"], description="Run now (scheduled or waiting jobs)")
def run_now(modeladmin, request, queryset):
    perform(modeladmin, request, queryset, RUN_NOW)


@admin.action(permissions=["cancel"], description="Cancel (running jobs are asked to stop)")
def cancel(modeladmin, request, queryset):
    perform(modeladmin, request, queryset, CANCEL)


@admin.action(permissions=["delete"], description="Delete selected jobs")
def delete_selected(modeladmin, request, queryset):
    """Django's delete action, for big selections: the confirmation shows counts by status (not
    one line per job), and the jobs are logged and deleted a batch at a time."""
    if request.POST.get("post") == "yes":
        deleted = 0
        while True:
            batch = list(queryset.order_by("pk").only("pk", "task_name", "status")[:DELETE_BATCH])
            if not batch:
                break
            modeladmin.log_deletions(request, batch)
            # The jobs, not their steps, which the delete cascades to and counts as well.
            deleted += queryset.model._default_manager.filter(
                pk__in=[job.pk for job in batch]
            ).delete()[1].get(queryset.model._meta.label, 0)
        logger.info("admin action=delete user=%s deleted=%s", request.user.get_username(),
                    deleted)
        modeladmin.message_user(request, f"{plural(deleted)} deleted.", messages.SUCCESS)
        return None
    counts = counts_by_status(queryset)
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": "Delete jobs?",
        "opts": modeladmin.model._meta,
        "breadcrumbs_as_list": BREADCRUMBS_AS_LIST,
        "counts": [
            (status_label(status), n) for status, n in
            sorted(counts.items(), key=lambda item: _status_rank(item[0]))
        ],
        "total": sum(counts.values()),
        "running": counts.get(JobStatus.RUNNING, 0),
        "sample": queryset.order_by("-pk").only("pk", "task_name", "status", "queue")[:10],
        "submit": f"Yes, delete {plural(sum(counts.values()))}",
        # The selection again, posted back with the confirmation (includes/confirm_form.html).
        "hidden": [
            *((admin.helpers.ACTION_CHECKBOX_NAME, pk)
              for pk in request.POST.getlist(admin.helpers.ACTION_CHECKBOX_NAME)),
            *((("select_across", "1"),) if request.POST.get("select_across") == "1" else ()),
            ("action", "delete_selected"),
        ],
    }
    return TemplateResponse(
        request, "admin/django_sqlqueue/job/delete_selected_confirmation.html", context
    )
