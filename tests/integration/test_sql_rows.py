"""Schedule from anywhere: rows written by plain SQL are valid jobs, and malformed rows are refused
by the database itself (check constraints), on every vendor."""

import pytest
from django.db import DataError, IntegrityError, connection, transaction

from django_sqlqueue.models import Job
from django_sqlqueue.run.execution import run_job

pytestmark = pytest.mark.django_db


def test_a_row_inserted_by_plain_sql_is_a_valid_job():
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO django_sqlqueue_job (task_name, queue, payload) "
            "VALUES (%s, %s, %s) RETURNING id",
            ["tests.testapp.tasks.add", "default", '{"args": [20, 22]}'],
        )
        pk = cursor.fetchone()[0]
    job = Job.objects.get(pk=pk)
    assert (job.status, job.attempts, job.max_attempts, job.priority) == ("queued", 0, 5, 0)
    assert job.errors == [] and job.enqueued_at is not None and job.run_at is not None
    (claimed,) = Job.objects.claim(["default"], "sql-test")
    assert claimed.pk == pk
    assert run_job(claimed).outcome == "succeeded"
    assert Job.objects.get(pk=pk).result == 42


@pytest.mark.parametrize(
    "column, value",
    [("status", "bogus"), ("priority", 1000), ("attempts", -1), ("max_attempts", 0)],
)
def test_the_database_refuses_malformed_rows(column, value):
    # MariaDB refuses a negative unsigned value as out of range (DataError), not by a CHECK.
    with pytest.raises((IntegrityError, DataError)), transaction.atomic(), \
            connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO django_sqlqueue_job (task_name, payload, {column}) "  # noqa: S608
            "VALUES ('tests.testapp.tasks.add', '{}', %s)",
            [value],
        )
