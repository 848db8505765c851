"""PostgreSQL specifics: the claim uses the partial ready index."""

import pytest
from django.db import connection, transaction

from django_sqlqueue.models import Job
from django_sqlqueue.queries import CLAIM_ORDER

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db]


def _claim_plan():
    picked = (
        Job.objects.ready()
        .in_queues(["default"])
        .order_by(*CLAIM_ORDER)
        .select_for_update(skip_locked=True)
        .values("pk")[:10]
    )
    sql, params = picked.query.get_compiler(using="default").as_sql()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
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
    plan = _claim_plan()
    assert "sqlqueue_job_ready" in plan, plan
    assert "Seq Scan" not in plan, plan
