"""The claim: which ready jobs a worker takes, and how.

``limited.py`` claims from paused and limited queues, serialised on each queue's row;
``bounded.py`` decides when a worker claims only the jobs after its last claimed one (behind a
long transaction); ``held.py`` reads back which of its claims a worker still holds (after a
failover may have lost some). The plain claim is ``JobQuerySet.claim``
(models/job_queryset.py), its SQL in db/.
"""
