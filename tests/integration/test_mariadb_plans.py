"""MariaDB specifics: with no partial indexes, the claim still reads only ready rows, in claim
order, from an index (migration 0012's generated column ``is_ready`` leads the ready indexes),
and the unique key binds only unfinished jobs (``unfinished_unique_key``)."""

import json

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from django_sqlqueue.db import ops, returning
from django_sqlqueue.db.clock import DatabaseNow
from django_sqlqueue.db.mariadb.driver import KEY_READ_ENTRIES
from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.testapp.tasks import add

# Not in a rolled-back transaction: ANALYZE TABLE commits it (MariaDB commits implicitly before
# such statements), and its rows would outlive the test. Emptied after each test instead.
pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _mariadb_only():
    if connection.vendor != "mysql":
        pytest.skip("MariaDB's stand-ins for partial indexes; runs in the mariadb pass")


def _fill_analyzed(ready_insert: str):
    """20,000 finished jobs and the ready ones ``ready_insert`` writes (SQL, for speed), then
    ANALYZE, so that the plans are those of a table that holds mostly finished jobs."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO django_sqlqueue_job (task_name, queue, payload, status, finished_at) "
            "SELECT 'tests.testapp.tasks.add', 'default', '{}', 'succeeded', UTC_TIMESTAMP(6) "
            "FROM seq_1_to_20000"
        )
        cursor.execute(ready_insert)
        cursor.execute("ANALYZE TABLE django_sqlqueue_job")
        cursor.fetchall()


def _claim_plan(queues) -> dict:
    """ANALYZE (run, with the plan) of the id-picking part of the claim, as a dict."""
    picked, params = ops(connection).ready_ids(Job, queues=queues, limit=10)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE FORMAT=JSON " + picked, params)
        block = json.loads(cursor.fetchone()[0])["query_block"]
    assert "filesort" not in json.dumps(block), block  # claim order comes from the index
    (step,) = block["nested_loop"]
    return step["table"]


def test_the_claim_reads_ten_index_entries_for_ten_jobs_among_many_finished_ones():
    # 20,000 finished and 1,000 ready jobs.
    _fill_analyzed("INSERT INTO django_sqlqueue_job (task_name, queue, payload, priority) "
                   "SELECT 'tests.testapp.tasks.add', 'default', '{}', seq % 3 "
                   "FROM seq_1_to_1000")
    for queues in (["default"], None):
        table = _claim_plan(queues)
        assert table["key"] in ("sqlqueue_job_ready", "sqlqueue_job_ready_any_queue"), table
        assert table["used_key_parts"][0] == "is_ready", table
        assert table["r_rows"] == 10, table  # not the 20,000 finished rows


def test_a_unique_key_binds_unfinished_jobs_only():
    first = Job.objects.enqueue(add, args=(1, 2), unique_key="report")
    assert Job.objects.enqueue(add, args=(1, 2), unique_key="report").pk == first.pk
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.create(task_name=first.task_name, unique_key="report")
    Job.objects.filter(pk=first.pk).update(status=JobStatus.SUCCEEDED)
    second = Job.objects.enqueue(add, args=(1, 2), unique_key="report")
    assert second.pk != first.pk


def test_reads_of_ready_rows_use_the_ready_indexes_not_the_whole_table():
    """The expirer (every maintenance pass), the dashboard's and the metrics' counts of waiting
    jobs: ORM reads, which name ``is_ready`` through ``in_ready_status``."""
    # 20,000 finished jobs and 50 ready ones that expired.
    _fill_analyzed("INSERT INTO django_sqlqueue_job (task_name, queue, payload, expires_at) "
                   "SELECT 'tests.testapp.tasks.add', 'default', '{}', UTC_TIMESTAMP(6) "
                   "FROM seq_1_to_50")
    expiring = Job.objects.in_ready_status().filter(expires_at__lte=DatabaseNow())
    for reads in (expiring, Job.objects.in_ready_status()):
        plan = json.loads(reads.explain(format="JSON"))
        if isinstance(plan, str):  # mysqlclient hands it over as a JSON string of the text
            plan = json.loads(plan)
        (step,) = plan["query_block"]["nested_loop"]
        table = step["table"]
        assert table["access_type"] != "ALL", table  # not a scan of the 20,050 rows
        assert table["key"].startswith("sqlqueue_job_"), table
    assert Job.objects.expire() == 50
    assert Job.objects.in_ready_status().count() == 0


def _plan(statement, params) -> str:
    """ANALYZE FORMAT=JSON (run, with the plan) of a statement, as JSON text."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE FORMAT=JSON " + statement, params)
        return json.dumps(json.loads(cursor.fetchone()[0])["query_block"])


def _tables(plan):
    """Every table read of a plan (a dict of ANALYZE FORMAT=JSON), at any depth."""
    if isinstance(plan, dict):
        if "table_name" in plan:
            yield plan
        for value in plan.values():
            yield from _tables(value)
    elif isinstance(plan, list):
        for value in plan:
            yield from _tables(value)


def _entries_read(statement, params) -> tuple[list, int]:
    """The rows of a statement (maybe the driver's steps) and the index entries it read."""
    def read_next():
        with connection.cursor() as cursor:
            cursor.execute("SHOW SESSION STATUS LIKE 'Handler_read_next'")
            return int(cursor.fetchone()[1])

    before = read_next()
    rows = returning.fetch(connection, statement, params)
    return rows, read_next() - before


def test_the_fair_claims_reads_of_keys_come_from_the_index_alone():
    # A key with 5,000 ready jobs, ten keys with three each.
    _fill_analyzed("INSERT INTO django_sqlqueue_job (task_name, queue, payload, concurrency_key) "
                   "SELECT 'tests.testapp.tasks.add', 'fair', '{}', IF(seq <= 5000, 'big', "
                   "CONCAT('k', seq % 10)) FROM seq_1_to_5030")
    driver = ops(connection)
    # The keys after "big": its 5,000 entries are not read; the index alone, in key order.
    reads, params = driver.ready_keys(Job, queue="fair", after="big", limit=3)
    plan = json.loads(_plan(reads.after, [*params[:-1], KEY_READ_ENTRIES]))
    (table,) = (t for t in _tables(plan) if t["table_name"] == "django_sqlqueue_job")
    assert table["key"] == "sqlqueue_job_ready_by_key" and table.get("using_index"), table
    assert table["access_type"] == "range" and table["r_rows"] <= 30, table
    # From the first key: "big" costs one read of KEY_READ_ENTRIES entries, then a range of
    # the index starts after it; not its 5,000 entries.
    keys, entries = _entries_read(*driver.ready_keys(Job, queue="fair", unkeyed=True, limit=20))
    assert [key for key, in keys] == ["big", *(f"k{n}" for n in range(10))]
    assert entries <= KEY_READ_ENTRIES + 40, entries
    # One key's share: its own range of the index.
    now = Job._meta.get_field("run_at").get_db_prep_value(timezone.now(), connection)
    plan = _plan(*driver.ready_ids_by_key(Job, queue="fair", wanted={"k3": 2, "k7": 2},
                                          now=now))
    assert '"key": "sqlqueue_job_ready_by_key"' in plan and "filesort" not in plan, plan
