"""The claim on PostgreSQL is a prepared statement: parsed and planned once per connection, not
on every claim (a worker claims hundreds of times a second; planning alone was 0.3 ms of a woken
worker's 1.7-2.0 ms claim). Behind a transaction pooler none is prepared: the pooler hands each
statement to any server connection, where it may not exist. Django turns psycopg's preparing off
for its connections, so the claim must turn it on for itself: that it is on is what this
checks (an earlier measurement found "no difference" with a claim that was not prepared)."""

import pytest
from django.db import connection

from django_sqlqueue.db import ops
from django_sqlqueue.models import Job
from tests.conftest import VENDOR
from tests.testapp.tasks import add

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(60)]


def _prepared_claims() -> list:
    """This connection's prepared statements that set jobs running: (generic, custom) plans."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                       "WHERE statement LIKE %s", ["%UPDATE%claim_token%"])
        return cursor.fetchall()


@pytest.mark.skipif(VENDOR == "pgbouncer", reason="behind a transaction pooler nothing is "
                    "prepared: the pgbouncer test below")
def test_the_claim_is_prepared_once_and_run_many_times():
    claimed = []
    for n in range(8):
        add.enqueue(n, n)
        claimed += Job.objects.claim(None, "w1", limit=5, lease=60)
    assert len(claimed) == 8
    plans = _prepared_claims()
    assert len(plans) == 1, plans  # one statement, prepared once
    generic, custom = plans[0]
    assert generic + custom == 8  # and run for every claim


@pytest.mark.skipif(VENDOR != "pgbouncer", reason="the PgBouncer pass's")
def test_behind_a_transaction_pooler_nothing_is_prepared():
    assert ops(connection).repeated_cursor() is None
    add.enqueue(1, 2)
    assert len(Job.objects.claim(None, "w1", limit=5, lease=60)) == 1


@pytest.mark.skipif(VENDOR == "pgbouncer", reason="behind a transaction pooler nothing is "
                    "prepared")
def test_a_claim_prepared_before_a_column_changed_type_claims_after_it():
    """A migration that changes a returned column's type while workers run (a rolling deploy):
    PostgreSQL refuses the statement prepared before it ("cached plan must not change result
    type"). The claim prepares it again instead of failing the worker's fetcher."""
    import psycopg

    add.enqueue(1, 1)
    assert len(Job.objects.claim(None, "w1", limit=5, lease=60)) == 1  # prepared now
    table = connection.ops.quote_name(Job._meta.db_table)
    column = connection.ops.quote_name(Job._meta.get_field("task_name").column)
    params = connection.get_connection_params()
    with psycopg.connect(**params, autocommit=True) as other:  # the migration's connection
        other.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE varchar(300)")
        try:
            add.enqueue(2, 2)
            assert len(Job.objects.claim(None, "w1", limit=5, lease=60)) == 1
        finally:
            other.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE varchar(255)")


@pytest.mark.skipif(VENDOR == "pgbouncer", reason="behind a marked pooler nothing is prepared")
def test_a_pooler_the_settings_do_not_mark_turns_preparing_off_and_the_claims_go_on():
    """Behind a transaction pooler without DISABLE_SERVER_SIDE_CURSORS (a DATABASE_URL alone),
    a claim's server connection may lack the statement an earlier claim prepared on another.
    Made so here: the statement is deallocated behind psycopg's back. Before, the claim
    failed with "prepared statement ... does not exist" and the worker's fetcher died (the
    PgBouncer pass's jobs-database worker, in CI)."""
    add.enqueue(1, 1)
    assert len(Job.objects.claim(None, "w1", limit=5, lease=60)) == 1  # prepared now
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements WHERE statement LIKE %s",
                       ["%UPDATE%claim_token%"])
        (name,) = cursor.fetchone()
        cursor.execute(f"DEALLOCATE {connection.ops.quote_name(name)}")
    for n in range(3):
        add.enqueue(2, n)
        assert len(Job.objects.claim(None, "w1", limit=5, lease=60)) == 1
    assert ops(connection).repeated_cursor() is None  # this connection prepares no more
    assert _prepared_claims() == []
