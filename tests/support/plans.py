"""PostgreSQL plans for the tests that pin which index a statement reads, and how much of it:
``explain`` runs a statement under EXPLAIN ANALYZE; the ``analyzed`` fixture ANALYZEs the jobs
table for the test and leaves it empty and analyzed after."""

import pytest
from django.db import connection


def plan_nodes(plan):
    yield plan
    for child in plan.get("Plans", ()):
        yield from plan_nodes(child)


def explain(statement, params):
    """EXPLAIN ANALYZE's nodes, and the rows each read (returned plus filtered out)."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params)
        (document,) = cursor.fetchone()
    nodes = list(plan_nodes(document[0]["Plan"]))
    return nodes, max(node["Actual Rows"] * node.get("Actual Loops", 1)
                      + node.get("Rows Removed by Filter", 0) for node in nodes)


@pytest.fixture
def analyzed():
    """ANALYZE the jobs table in the test, and again once it is emptied, with autovacuum off
    for it meanwhile: other tests read PostgreSQL's row estimate (the admin's paginator), and
    an autovacuum ANALYZE of the 100,000 rows finishing after the test left them a stale one."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE django_sqlqueue_job SET (autovacuum_enabled = false)")
    yield lambda: connection.cursor().execute("ANALYZE django_sqlqueue_job")
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE django_sqlqueue_job")
        cursor.execute("ANALYZE django_sqlqueue_job")
        cursor.execute("ALTER TABLE django_sqlqueue_job RESET (autovacuum_enabled)")
