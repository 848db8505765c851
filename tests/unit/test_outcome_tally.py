"""The worker's stop line: every attempt is counted under one of its keys."""

from types import SimpleNamespace

from django_sqlqueue.worker.process import OutcomeTally


def test_every_attempt_counts_under_a_key_of_the_stop_line_cancelled_ones_too():
    tally = OutcomeTally()
    outcomes = ["succeeded", "succeeded", "exhausted", "cancelled", "failed", "rescheduled",
                "interrupted", "lost"]
    for outcome in outcomes:
        tally.add(SimpleNamespace(outcome=outcome))
    counts = tally.counts()
    assert counts["attempts"] == len(outcomes)
    assert counts["cancelled"] == 1
    assert sum(n for key, n in counts.items() if key != "attempts") == counts["attempts"]
    assert tally.summary() == (
        "8 attempt(s): 4 job(s) finished (2 succeeded, 1 exhausted, 1 cancelled), 1 failed "
        "attempt(s) to retry, 1 rescheduled, 1 interrupted by the database (run again), "
        "1 outcome(s) lost with the lease"
    )
