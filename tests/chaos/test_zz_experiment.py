import os, time
import pytest
from django.db import connection
from django_sqlqueue.models import Job
from django_sqlqueue.statuses import JobStatus
from tests.chaos.conftest import Fleet
from tests.process.conftest import wait_for
from tests.testapp.jobs import work

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]
S = {"LEASE_SECONDS": 3, "MAINTENANCE_INTERVAL_SECONDS": 0.5, "POLL_INTERVAL_SECONDS": 0.5}

@pytest.mark.parametrize("args", [(), ("-q", "default")])
def test_throughput(start_worker, args):
    n = int(os.environ.get("N", 5000))
    Job.objects.bulk_enqueue(work.prepare(key=str(i), max_sleep_ms=10) for i in range(n))
    qs = Job.objects.ready().in_queues(list(args[1:]) or None).order_by("-priority", "run_at", "id").select_for_update(skip_locked=True).values("pk")[:1]
    from django.db import transaction
    with transaction.atomic(), connection.cursor() as c:
        sql, params = qs.query.sql_with_params()
        c.execute("EXPLAIN ANALYZE " + sql, params)
        print("\n".join(r[0] for r in c.fetchall()))
    t = time.monotonic()
    fleet = Fleet(start_worker, (1, 2, 4, 1, 2, 4), settings=S, args=args)
    wait_for(lambda: Job.objects.filter(status=JobStatus.SUCCEEDED).count() == n, timeout=300, interval=0.5)
    print("ARGS", args, "seconds", time.monotonic() - t, "rate", n / (time.monotonic() - t))
    fleet.stop()
