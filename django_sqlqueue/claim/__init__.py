"""The claim: which ready jobs a worker takes, and how.

``limited.py`` claims from paused, limited and fair queues, serialised on each queue's row
(``fair.py`` shares a fair queue's claims between its keys);
``bounded.py`` decides when a worker claims only the jobs after its last claimed one (behind a
long transaction); ``held.py`` reads back which of its claims a worker still holds (after a
failover may have lost some). The plain claim, which the others call for the rows they pick, is
``plain.py``, its SQL in db/; ``JobQuerySet.claim`` (models/job_queryset.py) hands its work here.
"""
