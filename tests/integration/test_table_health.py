"""``manage.py tablehealth`` (docs/scaling.md, "The table's health"): on each database, the
job table and its indexes with their sizes, in text and JSON, and advice that names the
statement to run; on PostgreSQL, the session that holds vacuum back, named by its pid."""

import json
import threading
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections

from django_sqlqueue.models import Job
from tests.testapp.tasks import add

pytestmark = [pytest.mark.django_db(transaction=True)]


def report(*args) -> dict:
    out = StringIO()
    call_command("tablehealth", "--json", *args, stdout=out)
    return json.loads(out.getvalue())


def test_the_job_table_and_its_indexes_are_reported_with_their_sizes():
    Job.objects.bulk_enqueue(add.prepare(n, n) for n in range(500))
    document = report()
    job_table = document["tables"][0]
    assert job_table["name"] == Job._meta.db_table
    names = {table["name"] for table in document["tables"]}
    assert "django_sqlqueue_worker" in names
    if connection.vendor == "sqlite" and "unreadable" in document["facts"]:
        pytest.skip("this SQLite was built without dbstat")
    assert job_table["bytes"] > 0 and job_table["index_bytes"] > 0
    assert job_table["indexes"] and all(index["bytes"] > 0 for index in job_table["indexes"])
    out = StringIO()
    call_command("tablehealth", stdout=out)
    text = out.getvalue()
    assert text.startswith("TABLE / INDEX") and Job._meta.db_table in text
    # The text ends with the same advice, or says there is none. (What it advises depends on
    # what the suite's earlier tests left: MariaDB keeps a deleted row's space as data_free.)
    tail = [f"To do: {line}" for line in report()["advice"]] or ["Nothing to do."]
    assert text.rstrip().splitlines()[-len(tail):] == tail, text


def test_a_session_holding_vacuum_back_is_named_with_the_statement_that_ends_it():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's sessions (MariaDB's transactions need PROCESS)")
    opened, done = threading.Event(), threading.Event()
    pids = []

    def hold():  # a transaction with an id, idle: as a forgotten shell session would be
        try:
            with connections["default"].cursor() as cursor:
                cursor.execute("BEGIN")
                cursor.execute("SELECT pg_backend_pid(), txid_current()")
                pids.append(cursor.fetchone()[0])
                opened.set()
                done.wait(60)
                cursor.execute("ROLLBACK")
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert opened.wait(60)
        [pid] = pids
        document = report("--max-transaction-seconds", "0")
        assert str(pid) in [entry["ident"] for entry in document["holders"]], document
        assert document["holders"][0]["kind"] == "session"
        assert any(f"SELECT pg_terminate_backend({pid})" in line
                   for line in document["advice"]), document["advice"]
        assert not any(str(pid) in line for line in report()["advice"])  # under 300 s
    finally:
        done.set()
        holder.join(60)


def test_a_bad_threshold_is_refused_naming_the_fix():
    with pytest.raises(CommandError, match="--max-transaction-seconds takes a number"):
        call_command("tablehealth", "--max-transaction-seconds", "-1")
