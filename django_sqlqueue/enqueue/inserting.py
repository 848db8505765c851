"""Insert new jobs: one statement per batch, which on PostgreSQL also sends the NOTIFY.

Why not ``save()`` or ``bulk_create()`` on PostgreSQL (each point measured):

* The wake-up NOTIFY goes into the INSERT statement itself, instead of a statement of its own
  after commit: one round trip less per transaction, and workers hear of the jobs at commit.
  A process enqueueing fast leaves it out of most statements (notify.py says why).
* Values are sent as plain text and numbers, which the driver quotes far faster than the typed
  wrappers the ORM sends (``Jsonb``, ``Int2``...), and columns left out where the row gets the
  same value without them: NULL columns, and columns whose value is their database default
  (the migration's, ``db_default``). A plain job names 4 columns, not 20: each value costs the
  driver its quoting and the server its parsing, and a job pays only for the options it uses.
* A batch sends the values that differ between its jobs (usually just the payload) as one JSON
  document, an array with one array per job, which ``jsonb_array_elements`` splits into rows
  (a third faster on the server than ``json_to_recordset`` with one object per job), and a
  value that every job of the batch has (the task, queue, retry policy, times, state...) once,
  as a parameter. PostgreSQL spends most of a bulk insert decoding values, and most values of a
  batch are shared.
* The batches of one call go in psycopg's pipeline mode: PostgreSQL inserts one while Python
  builds the next, instead of each side waiting for the other.

MariaDB gets the same statement without NOTIFY, its document read by ``JSON_TABLE``
(db/mariadb/statements.py). SQLite, and jobs this statement cannot say (a column left to its
database default, as in a ``Job(...)`` built by hand), go through ``bulk_create``.
"""

import functools
from contextlib import nullcontext

from django.db import IntegrityError, connections, transaction
from django.db.models.expressions import DatabaseDefault
from django.utils import timezone

from .. import signals
from ..db import ops
from ..db.job_table import holds_unique_slot
from ..db.pieces import NOT_PLAIN as _NOT_PLAIN
from ..telemetry import metrics, tracing
from . import notify
from .columns import JSON, NO_DEFAULT, all_identical, attrgetter, columns


def bulk_enqueue(model, jobs, alias: str, *, batch_size: int = 1000) -> list:
    """``Job.objects.bulk_enqueue``: insert many prepared jobs of ``model`` on ``alias`` in as
    few statements as possible, all enqueued now: each gets this moment as its ``enqueued_at``,
    and a job that was due when it was prepared (no ``run_at`` or ``delay``) is due from this
    moment. One time for the whole call also lets the insert send it once instead of once per
    job."""
    jobs = list(jobs)
    pk_name = model._meta.pk.attname  # not job.pk: a property, slower
    for job in jobs:
        if not isinstance(job, model) or getattr(job, pk_name) is not None:
            raise TypeError(
                "bulk_enqueue() takes unsaved jobs from task.prepare(...) or "
                "Job.objects.prepare(...)."
            )
        if job.unique_key is not None or job.unique_slot is not None:
            raise ValueError(
                f"bulk_enqueue() cannot deduplicate unique_key "
                f"{job.unique_key or job.unique_slot!r}: "
                "enqueue unique jobs one at a time with enqueue()."
            )
    now = timezone.now()
    for job in jobs:
        if job.run_at == job.enqueued_at:
            job.run_at = now
        job.enqueued_at = now
    insert_jobs(jobs, alias, batch_size=batch_size)
    return jobs


def insert_jobs(jobs: list, alias: str, *, batch_size: int = 1000) -> None:
    """Insert unsaved jobs from ``Job.objects.prepare`` on ``alias`` and set their pks.

    Runs in the caller's transaction, if any; the batches of one call are all or nothing.
    """
    if not jobs:
        return
    with tracing.enqueue_span(jobs) as span:
        _insert(jobs, alias, batch_size)
        tracing.enqueued(span, jobs)
    sender = type(jobs[0])
    if signals.has_receivers(signals.job_enqueued, sender):
        for job in jobs:
            if signals.is_job_function(job):
                signals.send(signals.job_enqueued, sender, job=job)


def insert_job(job, alias: str):
    """Insert one job from ``prepare()`` on ``alias``; with a unique key (or slot) that another
    job holds, insert nothing and return that job instead (``Job.objects.enqueue``).

    The database decides, under any race: the insert conflicts on the unique index, and only
    then is the holder read. A holder that let go in between (it finished) means a retry.
    """
    if job.unique_key is None and job.unique_slot is None:
        insert_jobs([job], alias)
        return job
    for _ in range(3):
        try:
            # A savepoint, so that a duplicate key does not break the caller's transaction.
            with transaction.atomic(using=alias):
                insert_jobs([job], alias)
            return job
        except IntegrityError:
            existing = _holder(job, alias)
            if existing is not None:
                return existing
            job.pk = None  # the holder finished in between: try the insert again
    key = job.unique_key if job.unique_slot is None else job.unique_slot
    raise IntegrityError(f"could not enqueue unique job {key!r}: keeps conflicting")


def _holder(job, alias: str):
    """The job that holds ``job``'s unique key or slot now, or None."""
    jobs = type(job).objects.using(alias)
    if job.unique_slot is None:
        return jobs.unfinished().filter(unique_key=job.unique_key).first()
    rows = ops(connections[alias]).unique_slot_rows(jobs, job.unique_slot)
    return next((row for row in rows if holds_unique_slot(row.status, row.unique_states)), None)


def _insert(jobs: list, alias: str, batch_size: int) -> None:
    connection = connections[alias]
    driver = ops(connection)
    if not driver.inserts_from_document:
        _bulk_create(jobs, alias, batch_size)
    else:
        channel = None
        if driver.supports_notify:
            queues = {job.queue for job in jobs}
            channel = notify.CHANNEL if notify.should_notify(connection, queues) else None
        batches = [jobs[start : start + batch_size] for start in range(0, len(jobs), batch_size)]
        inserted = execute_batches(
            alias, batches,
            statement_of=lambda batch: insert_statement(connection, batch, notify_channel=channel),
            unsaid=lambda batch: _bulk_create(batch, alias, batch_size))
        for batch, rows in inserted:  # only once every batch is in: a failed call sets no pk
            _set_pks(batch, rows, alias)
    notify.wake_in_process_after_commit(alias)
    if metrics.recording():
        # Counted at commit: a rolled-back enqueue never happened.
        transaction.on_commit(functools.partial(metrics.jobs_enqueued, jobs), using=alias)


def execute_batches(alias: str, batches: list, *, statement_of, unsaid=None) -> list:
    """Run ``statement_of(batch)`` (``(sql, params)`` of an INSERT that returns rows) for each
    batch, in one transaction if there are several; returns ``(batch, rows)`` per batch run.
    A batch whose statement is None goes to ``unsaid(batch)`` instead."""
    connection = connections[alias]
    all_or_nothing = (
        transaction.atomic(using=alias, savepoint=False) if len(batches) > 1 else nullcontext()
    )
    with all_or_nothing:
        # In pipeline mode each batch's statement is sent without waiting for the one
        # before, so PostgreSQL inserts a batch while Python builds the next.
        with connection.wrap_database_errors, ops(connection).pipeline(len(batches)):
            sent = []
            for batch in batches:
                statement = statement_of(batch)
                if statement is None:
                    unsaid(batch)
                    continue
                sql_text, params = statement
                cursor = connection.cursor()
                cursor.execute(sql_text, params)
                sent.append((cursor, batch))
            inserted = []
            for cursor, batch in sent:
                with cursor:
                    inserted.append((batch, cursor.fetchall()))
    return inserted


def _set_pks(jobs, rows, alias):
    """Give inserted ``jobs`` the ids of ``rows`` (``(id, ...)`` in insert order), saved on
    ``alias``. Set as a plain attribute: the ``pk`` property looks the field up every time."""
    model = type(jobs[0])
    pk_name = model._meta.pk.attname if not model._meta.parents else "pk"
    for job, (pk, *_) in zip(jobs, rows, strict=True):
        setattr(job, pk_name, pk)
        state = job._state
        state.adding = False
        state.db = alias


def _bulk_create(jobs, alias, batch_size):
    type(jobs[0])._default_manager.db_manager(alias).bulk_create(jobs, batch_size=batch_size)


def insert_statement(connection, jobs: list, *, notify_channel=None):
    """The INSERT of ``jobs`` (unsaved, of one model) on PostgreSQL or MariaDB, returning their
    ids in order, as ``(sql, params)``; None if it cannot say them (a column left to its database
    default, or values that differ between jobs in a type the document cannot carry):
    bulk_create can.

    One job is ``INSERT ... VALUES``; several are ``INSERT ... SELECT`` from the JSON document,
    whose rows keep its order (the database returns the ids in that order, as Django's
    bulk_create relies on). With ``notify_channel`` (PostgreSQL) the statement also calls
    ``pg_notify(channel, queue)`` per row; PostgreSQL delivers each distinct queue once, at
    commit.
    """
    model = type(jobs[0])
    split = _one_job(connection, jobs[0]) if len(jobs) == 1 else _many_jobs(connection, jobs)
    if split is None:
        return None
    layout, params = split
    if notify_channel is not None:
        params.append(notify_channel)
    sql = _statement_text(
        model, connection.alias, layout, notify=notify_channel is not None, many=len(jobs) > 1
    )
    return sql, params


def template_insert(connection, template, per_job: tuple, *, notify_channel=None):
    """The INSERT of jobs equal to ``template`` (unsaved) but for the columns named in
    ``per_job``, as ``statement(rows) -> (sql, params)``, ``rows`` holding one tuple of those
    columns' values (in ``per_job``'s order) per job; None if the template cannot be said (a
    column left to its database default)."""
    split = _one_job(connection, template)
    if split is None:
        return None
    shared = [(entry, param) for entry, param in zip(*split, strict=True)
              if entry[0] not in per_job]
    layout = (*(entry for entry, _ in shared), *((name, PER_JOB) for name in per_job))
    shared = [param for _, param in shared]
    tail = [] if notify_channel is None else [notify_channel]
    sql = _statement_text(type(template), connection.alias, layout,
                          notify=notify_channel is not None, many=True)
    return lambda rows: (sql, [*shared, JSON.encode(rows), *tail])


def _one_job(connection, job):
    """``(layout, params)`` of one job: every column SHARED, but those whose value the row gets
    without them (NULL, or the column's database default) left out."""
    layout, params = [], []
    plain = ops(connection).sends_plain_values
    model = type(job)
    # Every enqueue() runs this loop over the table's 40-odd columns: the values read at once
    # (one attrgetter), and the default compared only where the column has a constant one.
    for column, value in zip(columns(model), attrgetter(model)(job), strict=True):
        if value is None:
            if column.null_by_default:
                continue  # leaving the column out writes the same NULL
            layout.append((column.name, SHARED))
            params.append(None)
            continue
        if isinstance(value, DatabaseDefault):
            return None
        if column.default is not NO_DEFAULT and column.is_default(value):
            continue  # leaving it out writes the same value
        layout.append((column.name, SHARED))
        params.append(column.as_param(value, connection, plain))
    return tuple(layout), params


def _many_jobs(connection, jobs):
    """``(layout, params)`` of several jobs: a column with the same value in every job is
    SHARED (or left out, if NULL), the others are PER_JOB, in the JSON document, the last
    parameter."""
    layout, params = [], []
    driver = ops(connection)
    plain = driver.sends_plain_values
    values_by_column = zip(*map(attrgetter(type(jobs[0])), jobs), strict=True)
    per_job = {}  # column name -> its values
    plain_texts = {}  # id(value) -> its plain form: a job's run_at is usually its enqueued_at
    for column, values in zip(columns(type(jobs[0])), values_by_column, strict=True):
        first = values[0]
        types = set(map(type, values))
        if DatabaseDefault in types:
            return None
        if len(types) == 1 and all_identical(values):
            if (first is not None or not column.null_by_default) and not column.is_default(first):
                layout.append((column.name, SHARED))
                params.append(None if first is None else column.as_param(first, connection,
                                                                         plain))
            continue
        to_plain = driver.document_value(column)
        if to_plain is _NOT_PLAIN:
            return None
        layout.append((column.name, PER_JOB))
        if to_plain is None:  # already plain, or JSON that the document embeds as is
            per_job[column.name] = values
        else:
            per_job[column.name] = [
                None if value is None
                else plain_texts.get(id(value)) or plain_texts.setdefault(
                    id(value), to_plain(value)
                )
                for value in values
            ]
    # One JSON array per job, its per-job values in layout order (tuples encode as arrays);
    # empty arrays if every value is shared: the document's length is the number of rows.
    rows = list(zip(*per_job.values(), strict=True)) if per_job else [()] * len(jobs)
    params.append(JSON.encode(rows))
    return tuple(layout), params


SHARED, PER_JOB = "shared", "per job"  # where a column's values are: a parameter, the document


@functools.lru_cache(maxsize=256)
def _statement_text(model, alias: str, layout: tuple, *, notify: bool, many: bool) -> str:
    """The SQL of insert_statement (``insert_jobs``), built once per shape; ``layout`` is
    ``(column, SHARED or PER_JOB)`` per column."""
    connection = connections[alias]
    columns_by_name = {c.name: c for c in columns(model)}
    type_of = ops(connection).document_type
    described = tuple(
        (name, source == SHARED, columns_by_name[name].is_json,
         type_of(columns_by_name[name].field))
        for name, source in layout
    )
    return ops(connection).insert_jobs(model, described, notify=notify, many=many)
