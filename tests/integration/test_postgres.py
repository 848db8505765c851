"""PostgreSQL specifics: the claim walks a partial ready index, whichever queues it serves; the
writes that find running jobs by id read them by primary key."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_sqlqueue.db import ops
from django_sqlqueue.db.pieces import OutcomeRow
from django_sqlqueue.models import Job
from tests.support.plans import explain

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db]


def _claim_plan(queues):
    """EXPLAIN of the id-picking part of the statement Job.objects.claim() sends."""
    picked, params = ops(connection).ready_ids(Job, queues=queues, limit=10)
    with connection.cursor() as cursor:  # "now" is the database's clock
        cursor.execute("EXPLAIN " + picked, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def _described(nodes) -> list:
    """A plan's nodes, in a line each: what they read and how many rows."""
    return [(node["Node Type"], node.get("Index Name"), node["Actual Rows"],
             node.get("Actual Loops"), node.get("Rows Removed by Filter")) for node in nodes]


def test_claim_uses_the_partial_ready_index_with_many_finished_jobs():
    with connection.cursor() as cursor:
        # 100k finished and 1k ready jobs, written by SQL for speed.
        cursor.execute(
            """
            INSERT INTO django_sqlqueue_job (task_name, queue, payload, status, finished_at)
            SELECT 'tests.testapp.tasks.add', 'default', '{"args": [1, 2]}', 'succeeded', now()
            FROM generate_series(1, 100000)
            """
        )
        cursor.execute(
            """
            INSERT INTO django_sqlqueue_job (task_name, queue, payload, priority)
            SELECT 'tests.testapp.tasks.add', 'default', '{"args": [1, 2]}', n % 3
            FROM generate_series(1, 1000) AS n
            """
        )
        cursor.execute("ANALYZE django_sqlqueue_job")
    # A worker with --queue walks the per-queue index; a default worker (every queue) the other
    # one. Either way in claim order, so no Sort of the ready rows and no scan of finished ones.
    # (With one queue holding every row, the planner may pick either ready index: both give
    # claim order.)
    cases = [(["default"], "sqlqueue_job_ready"), (None, "sqlqueue_job_ready_any_queue")]
    for queues, index in cases:
        plan = _claim_plan(queues)
        assert f"Index Scan using {index}" in plan, plan
        assert "Seq Scan" not in plan and "Sort" not in plan, plan


def test_tags_and_unique_slots_are_found_by_their_partial_indexes():
    """``tagged`` walks the GIN index of tags, the look-up of a slot's holder the index of
    slots; jobs without tags or a slot, nearly all, are in neither index."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO django_sqlqueue_job (task_name, payload, tags, unique_slot, unique_states)
            SELECT 'tests.testapp.tasks.add', '{}',
                   CASE WHEN n % 1000 = 0 THEN '["billing"]'::jsonb END,
                   CASE WHEN n % 1000 = 1 THEN 'sync-' || n END,
                   CASE WHEN n % 1000 = 1 THEN 15 END
            FROM generate_series(1, 50000) AS n
            """
        )
        cursor.execute("ANALYZE django_sqlqueue_job")
        cursor.execute("SELECT count(*) FROM django_sqlqueue_job WHERE tags IS NOT NULL")
        assert cursor.fetchone()[0] == 50
    tagged = Job.objects.tagged("billing").explain()
    assert "sqlqueue_job_tags" in tagged and "Seq Scan" not in tagged, tagged
    holder = Job.objects.filter(unique_slot="sync-1001").explain()
    assert "sqlqueue_job_unique_slot" in holder and "Seq Scan" not in holder, holder


def test_outcome_writes_and_heartbeats_find_running_jobs_by_id_not_through_the_running_index(
        analyzed):
    """The running-jobs index (sqlqueue_job_leases) keeps an entry of every job that ran since
    the last vacuum, which the planner's statistics do not count: an outcome write or a
    heartbeat of a batch that read the running jobs through it read every such job's row (a
    sustained load: 9,500 heap pages for an outcome write of 128 jobs). Both find their jobs by
    primary key, so they read their own rows, however many ran before them."""
    with connection.cursor() as cursor:  # a table that a scan of would cost more than 100 probes
        cursor.execute(
            "INSERT INTO django_sqlqueue_job (task_name, queue, payload, status, finished_at) "
            "SELECT 'tests.testapp.tasks.add', 'default', '{}', 'succeeded', now() "
            "FROM generate_series(1, 100000)")
        cursor.execute(
            "INSERT INTO django_sqlqueue_job (task_name, queue, payload) "
            "SELECT 'tests.testapp.tasks.add', 'default', '{}' FROM generate_series(1, 3000)")
    analyzed()  # as autovacuum last saw the table: none running
    jobs = Job.objects.claim(None, "w", limit=3000)
    driver = ops(connection)
    now = timezone.now()
    finished, left = jobs[:2900], jobs[2900:]
    statement, params = driver.record_outcomes(Job, outcomes=[
        OutcomeRow(job.pk, job.claim_token, "succeeded", finished_at=now) for job in finished])
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        assert cursor.rowcount == 2900  # 2,900 dead entries in the running-jobs index
    statement, params = driver.record_outcomes(Job, outcomes=[
        OutcomeRow(job.pk, job.claim_token, "succeeded", finished_at=now) for job in left])
    nodes, most = explain(statement, params)
    assert "sqlqueue_job_leases" not in {node.get("Index Name") for node in nodes}, (
        _described(nodes))
    assert most <= 100, _described(nodes)
    assert set(Job.objects.filter(pk__in=[j.pk for j in left]).values_list("status", flat=True)
               ) == {"succeeded"}  # EXPLAIN ANALYZE ran the write
    # A heartbeat of 200 jobs of "w", 100 of them still running.
    held = [job.pk for job in jobs[2800:]]
    Job.objects.filter(pk__in=held[100:]).update(status="running")  # running again, and held
    with CaptureQueriesContext(connection) as queries:
        assert Job.objects.extend_leases("w", held) == 100
    nodes, most = explain(queries[-1]["sql"], ())
    assert "sqlqueue_job_leases" not in {node.get("Index Name") for node in nodes}, (
        _described(nodes))
    assert most <= 200, _described(nodes)
