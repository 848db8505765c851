"""The job table's indexes and constraints (``Job.Meta``), each with the reason it exists. The
statements of the drivers are written for these indexes: the ready ones hold only ready rows (on
MariaDB, behind the generated column of migration 0012), in claim order."""

from django.db import models
from django.db.models import Case, F, Q, Value, When
from django.db.models.lookups import GreaterThan

from ..statuses import KEY_HOLDING_STATUSES, READY_STATUSES, JobStatus

MIN_PRIORITY, MAX_PRIORITY = -100, 100  # the same range as Django's Tasks framework
#: Claim order: higher priority first, then the job due earliest, then the oldest.
CLAIM_ORDER = ("-priority", "run_at", "id")
#: The columns of a job's latest progress (run/progress.py); a claim does not read them back.
PROGRESS_COLUMNS = ("progress_done", "progress_total", "progress_message", "progress_at")
#: The longest progress message a report may carry (the column's length).
MAX_PROGRESS_MESSAGE_CHARS = 200

#: One bit per status in ``Job.unique_states``, the statuses in which a job holds its
#: ``unique_slot``. Stored in rows: a bit never changes meaning (a new status takes a new bit).
UNIQUE_STATE_BITS = {
    JobStatus.QUEUED: 1, JobStatus.RUNNING: 2, JobStatus.FAILED: 4, JobStatus.SUCCEEDED: 8,
    JobStatus.EXHAUSTED: 16, JobStatus.CANCELLED: 32, JobStatus.EXPIRED: 64,
}


def unique_states_mask(statuses) -> int:
    """The ``unique_states`` bits of ``statuses``."""
    mask = 0
    for status in statuses:
        mask |= UNIQUE_STATE_BITS[status]
    return mask


def holds_unique_slot(status: str, mask: int | None) -> bool:
    """Whether a job in ``status`` with ``unique_states`` ``mask`` holds its slot (in Python,
    as SLOT_HELD says it in SQL)."""
    return bool(mask and UNIQUE_STATE_BITS.get(status, 0) & mask)


#: The status's bit in SQL: the same in every database (migration 0015 writes it for MariaDB).
STATUS_BIT = Case(
    *(When(status=status, then=Value(bit)) for status, bit in UNIQUE_STATE_BITS.items()),
    default=Value(0),
)
#: A job holds its unique slot while its status is one of its ``unique_states``: the condition of
#: the slot's unique index. The index keeps itself right: a job that leaves those statuses
#: (finishes, say) leaves the index in the same UPDATE, with no write of ours changed for it.
SLOT_HELD = Q(unique_slot__isnull=False) & Q(
    GreaterThan(F("unique_states").bitand(STATUS_BIT), 0)
)


def at_least_one(field: str) -> models.CheckConstraint:
    """The check that ``field`` (a count of attempts) is at least 1."""
    return models.CheckConstraint(condition=Q(**{f"{field}__gte": 1}),
                                  name=f"sqlqueue_job_{field}_positive")


#: The job table's indexes.
INDEXES = [
    # The claim query of a worker with --queue: ready rows of that queue in claim order.
    # Partial, so it holds only ready rows and claiming costs the same with ten or ten
    # million finished jobs.
    models.Index(fields=["queue", "-priority", "run_at", "id"], name="sqlqueue_job_ready",
                 condition=Q(status__in=READY_STATUSES)),
    # The claim query of a worker serving every queue (the default). Without it, that
    # claim sorts every ready row to find the first few (20,000 ready rows: 13 ms per
    # claim instead of 0.3 ms). One more entry per insert, in an index as small as the
    # number of ready jobs.
    models.Index(fields=["-priority", "run_at", "id"], name="sqlqueue_job_ready_any_queue",
                 condition=Q(status__in=READY_STATUSES)),
    # The claim of a queue with per-key limits (claim/limited.py): each key's ready rows
    # in claim order, so that a key at its limit is skipped without reading its backlog,
    # and the distinct ready keys are found by one probe each. Holds only ready rows.
    models.Index(fields=["queue", "concurrency_key", "-priority", "run_at", "id"],
                 name="sqlqueue_job_ready_by_key", condition=Q(status__in=READY_STATUSES)),
    # The claim of a worker's transactional lane (worker/transactional_lane.py): ready
    # transactional rows in claim order. Partial, so a job that is not transactional adds no
    # entry (MariaDB, which has no partial index, has none: there the lane reads the ready
    # index of every queue and skips the other jobs).
    models.Index(fields=["-priority", "run_at", "id"], name="sqlqueue_job_ready_transact",
                 condition=Q(status__in=READY_STATUSES, transactional=True)),
    # The lease rescuer's scan: running rows by lease expiry. Partial, so it stays as
    # small as the number of jobs running right now.
    models.Index(fields=["lease_expires_at"], name="sqlqueue_job_leases",
                 condition=Q(status=JobStatus.RUNNING)),
    # The expirer's scan: waiting jobs that have an expires_at. Without it, each
    # maintenance pass read every waiting row (200,000 waiting jobs: a 0.3 s UPDATE, the
    # longest transaction of a busy drain); with it, only jobs given a max_age are in it.
    models.Index(fields=["expires_at"], name="sqlqueue_job_expiring",
                 condition=Q(status__in=READY_STATUSES, expires_at__isnull=False)),
    # The throughput rollup's scan (worker/maintenance/rollup.py): jobs that finished in the last
    # few minutes, by finished_at. Finishing a job is an update that writes a new entry
    # in every index whose condition the row meets (the primary key's alone, before),
    # so this costs one more index entry per finished job; without it, every rollup
    # would read the whole table.
    models.Index(fields=["finished_at"], name="sqlqueue_job_finished",
                 condition=Q(finished_at__isnull=False)),
    # Finding the job that holds a unique slot, after an insert conflicted on it (insert_job):
    # the rows with a slot, held or not (the unique index's condition is more than a lookup
    # can name). Only jobs given unique_states or unique_period are in it. MariaDB has no
    # partial index: it finds the holder by the generated column of migration 0015.
    models.Index(fields=["unique_slot"], name="sqlqueue_job_unique_slots",
                 condition=Q(unique_slot__isnull=False)),
    # The count of waiting jobs per queue (stats, the dashboard): partial, so only a workflow's
    # jobs waiting for their parents are in it.
    models.Index(fields=["queue"], name="sqlqueue_job_waiting",
                 condition=Q(status=JobStatus.WAITING)),
    # A workflow's jobs (docs/workflows.md): the admin's filter, cancelling a workflow. Partial,
    # so a job outside any workflow adds no entry (MariaDB, which has no partial index, has
    # none: there those reads scan the table).
    models.Index(fields=["workflow_id"], name="sqlqueue_job_workflow",
                 condition=Q(workflow_id__isnull=False)),
]
#: The job table's constraints: rows inserted by SQL are checked by the database too.
CONSTRAINTS = [
    # At most one unfinished job per unique key; the key is free again once it finishes.
    models.UniqueConstraint(fields=["unique_key"], name="sqlqueue_job_unique_key",
                            condition=Q(status__in=KEY_HOLDING_STATUSES, unique_key__isnull=False)),
    # At most one job per unique slot among the jobs that hold theirs (SLOT_HELD): a unique key
    # with chosen statuses, or with a period (the slot names the key's period), docs/api.md.
    # Only rows with a slot are in it (none, without unique_states or unique_period), so a
    # plain insert or outcome write costs what it did. MariaDB: a generated column, 0015.
    models.UniqueConstraint(fields=["unique_slot"], name="sqlqueue_job_unique_slot",
                            condition=SLOT_HELD),
    # Rows inserted by SQL are checked by the database itself.
    models.CheckConstraint(
        condition=Q(status__in=JobStatus.values), name="sqlqueue_job_status_valid"
    ),
    models.CheckConstraint(
        condition=Q(priority__gte=MIN_PRIORITY, priority__lte=MAX_PRIORITY),
        name="sqlqueue_job_priority_range",
    ),
    at_least_one("max_attempts"),
    at_least_one("max_interruptions"),
]


#: Django's warnings that a database has no conditional unique constraints (models.W036) or
#: partial indexes (models.W037): MariaDB. Our migrations handle it there: 0012 gives the ready
#: indexes and the unique key, 0015 the unique slot, their stand-ins on generated columns, and
#: the other conditional indexes are built whole (right, only larger). So our models leave them
#: out of their checks; a project's own models still get them.
HANDLED_WARNINGS = frozenset({"models.W036", "models.W037"})


def without_handled_warnings(messages: list) -> list:
    """A model's check messages less those our migrations answer (``HANDLED_WARNINGS``)."""
    return [message for message in messages if message.id not in HANDLED_WARNINGS]
