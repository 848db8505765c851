"""PostgreSQL specifics: the claim walks a partial ready index, whichever queues it serves."""

import pytest
from django.db import connection

from django_sqlqueue.db import ops
from django_sqlqueue.models import Job

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db]


def _claim_plan(queues):
    """EXPLAIN of the id-picking part of the statement Job.objects.claim() sends."""
    picked, params = ops(connection).ready_ids(Job, queues=queues, limit=10)
    with connection.cursor() as cursor:  # "now" is the database's clock
        cursor.execute("EXPLAIN " + picked, params)
        return "\n".join(row[0] for row in cursor.fetchall())


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
