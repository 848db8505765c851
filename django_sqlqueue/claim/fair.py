"""Fair shares between the concurrency keys of a queue (docs/fairness.md).

A fair queue's claims rotate between the keys that have ready jobs, each key's share of the
claims in proportion to its weight (the Queue row's ``key_weights``; 1 if not named; the key
"" is the jobs without a key), and work-conserving: a key with no ready jobs takes no share,
and what it leaves goes to the others. Within a key, jobs go in claim order.

The scheme is start-time fair queueing (Goyal, Vin and Cheng, 1996), one job a "packet":

* The queue has a virtual time V; each key a finish tag F. A claim gives its slots one at a
  time, each to the key whose start tag ``max(F, V)`` is smallest (ties: key order); that key's
  F becomes start + 1/weight, and V the start just given. Over many claims each key that has
  ready jobs gets slots in proportion to its weight.
* A key that was idle starts at V, not at its old F: it does not bank the turns it missed
  and then take every slot in a burst.
* Only the leads ``F - V > 0`` are kept: a key missing from them starts at V.

Each process keeps the bookkeeping of its own claims (``FairBook``, one per database and
queue), not the database: the claims of a fair queue run side by side like plain claims, from
any number of workers and hosts, each fair on its own, so that together they are too (a sum of
sequences that each give a key its share gives it its share). Claims that took turns on a
shared bookkeeping row ran one at a time: with short jobs the queue drained at 40 to 80% of
the plain rate (docs/fairness.md). What one process's claims lose to another's at the same
moment (both gave a key with one job a slot; one got it) goes to the other keys in the same
claim.

The reads never touch a key's backlog: the ready keys are found by a skip scan (one index probe
per key, the driver's ``ready_keys``), then each key that was given slots has that many rows
locked and set running from its own range of ``sqlqueue_job_ready_by_key``, in one statement
(``claimable_ids_by_key`` in ``claim_jobs``; ``FOR UPDATE SKIP LOCKED``: rows another claim
holds are passed over). The skip scan finds keys whose jobs are not due yet too; a key that got
fewer jobs than its slots gets no more in this claim, and its other slots are given again among
the rest (one more statement, at most ``CLAIMS_PER_WINDOW`` in all), when they are a quarter of
the claim or more: a claim a few jobs short is left so.

A queue whose scan finds one key with ready jobs (a tenant alone with a backlog) is claimed by
the plain claim's statement, its claim order being that key's; after such a claim that filled
up, the process's next claim of the queue skips the scan too (a key that gets ready jobs
meanwhile waits one claim more): the fair claim then costs nearly what the plain one does.

A claim looks at no more than FAIR_KEYS_PER_CLAIM keys (a window); with more keys, each claim
looks at the next window, after the last key of the previous one (``FairBook.after``),
wrapping round at the end of the keys: the windows take turns, the weights apply among the keys
of a window. A window with fewer due jobs than the claim wants is followed by the next, in the
same claim (at most WINDOWS_PER_CLAIM).
"""

import heapq
import math
import threading
from collections import Counter
from dataclasses import dataclass, field

from django.db import connections

from ..db import ops, returning
from . import plain

#: The most keys one fair claim looks at. With more keys that have ready jobs, each claim looks
#: at the next this many in key order, after those the previous claim looked at (wrapping round
#: at the end): the shares are weighted among the keys of a window, and the windows take turns.
#: Finding the keys costs one index probe each (on a loaded 2-core machine, 35 us a key).
FAIR_KEYS_PER_CLAIM = 1_000
#: Windows of keys one claim looks at, when the first has fewer due jobs than the claim wants.
WINDOWS_PER_CLAIM = 3
#: Claim statements per window: the first for the slots given, the others for the slots of keys
#: that had fewer due jobs than they were given, while those are at least 1/SHORT_ENOUGH of the
#: claim.
CLAIMS_PER_WINDOW = 4
SHORT_ENOUGH = 4


def allot(keys, slots: int, *, weights: dict, leads: dict, caps: dict) -> tuple[dict, dict]:
    """Give ``slots`` claims among ``keys`` (those with ready jobs), at most ``caps[key]`` to
    a key (no cap if not named): ({key: slots given}, the leads after them). ``leads`` are
    each key's lead over the virtual time before (missing: none). Pure: the claim calls it to
    plan, and again with what it really claimed to charge the keys."""
    finish = {key: lead for key, lead in leads.items() if lead > 0}
    heap = [(finish.get(key, 0.0), key) for key in keys if caps.get(key, math.inf) > 0]
    heapq.heapify(heap)
    given, virtual = {}, 0.0
    while heap and slots > 0:
        start, key = heapq.heappop(heap)  # never below ``virtual``: the heap's least only grows
        virtual = start
        given[key] = given.get(key, 0) + 1
        finish[key] = start + 1 / weights.get(key, 1)
        slots -= 1
        if given[key] < caps.get(key, math.inf):
            heapq.heappush(heap, (finish[key], key))
    leads = {key: tag - virtual for key, tag in finish.items() if tag > virtual}
    return given, leads


@dataclass
class FairBook:
    """One process's bookkeeping of its claims of one fair queue: each key's lead over the
    virtual time (only leads above 0), and the key the next claim's window starts after (None:
    from the first key)."""

    leads: dict = field(default_factory=dict)
    after: str | None = None
    #: The last claim found one key with ready jobs and filled up on it: the next claim takes
    #: the queue's jobs without looking for keys (then the one after looks again).
    alone: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def charge(self, claimed: Counter, weights: dict) -> None:
        """Charge each key with the jobs a claim got of it (``claimed``: {key: jobs})."""
        with self.lock:  # claims of the same process in other threads charge it too
            _, self.leads = allot(sorted(claimed), claimed.total(), weights=weights,
                                  leads=self.leads, caps=claimed)


_books: dict = {}
_books_lock = threading.Lock()


def book(alias: str, queue: str) -> FairBook:
    """This process's bookkeeping of the fair queue ``queue`` of database ``alias``."""
    with _books_lock:
        return _books.setdefault((alias, queue), FairBook())


def forget(alias: str | None = None, *, keep=frozenset()) -> None:
    """Drop this process's bookkeeping (of the queues of one database, or all), but of the
    queues in ``keep``: their next claims start with every key level. ``read_controls`` keeps
    only the fair queues' at each read of the Queue table (a queue made fair again starts
    level); a test that counts shares from level drops them all."""
    with _books_lock:
        for known in list(_books):
            if alias in (None, known[0]) and known[1] not in keep:
                del _books[known]


def claim_fair(queryset, queue: str, weights: dict, worker_id, room: int, lease_seconds,
               now=None, key_room=None) -> list:
    """Claim up to ``room`` ready jobs of the fair queue ``queue``, shared between its keys by
    ``weights`` (``key_room(key)``: the most a key may take under per-key limits; None: no
    such limits), and return them. Statements of their own, side by side with other claims:
    no lock but the rows'. When a window of keys (FAIR_KEYS_PER_CLAIM) has fewer due jobs than
    ``room``, the claim goes on to the next, at most WINDOWS_PER_CLAIM in all."""
    alias = queryset._write_alias()
    connection = connections[alias]
    books = book(alias, queue)
    leads, after = dict(books.leads), books.after
    alone, books.alone = books.alone, None
    if alone is not None and key_room is None:
        # One tenant with a backlog, the queue saturated: every other claim skips the key
        # scan, whose statement was most of what a fair claim cost more than a plain one
        # (benchmarks/fairness_pickup.py). A key that gets ready jobs meanwhile waits for the
        # next claim of a process: one claim more.
        taken = plain.claim_ready(queryset, [queue], worker_id, room, lease_seconds, now)
        if taken:
            books.charge(_count_keys(taken, [alone]), weights)
        return taken
    jobs, claimed, looked_at = [], Counter(), set()
    for _ in range(WINDOWS_PER_CLAIM):
        keys, after = _window(connection, queryset.model, queue, after)
        keys = [key for key in keys if key not in looked_at]  # a window may wrap round
        looked_at.update(keys)
        if len(looked_at) == 1 and after is None and key_room is None:
            # The queue's only key with ready jobs: its claim order is the queue's, which the
            # plain claim's single statement takes, with a simpler plan than the reads by key
            # (a tenant alone with a backlog: a fair queue's claims cost little more than plain
            # ones). A job of another key enqueued since the scan may come with them: it is
            # charged to its key like any other.
            taken = plain.claim_ready(queryset, [queue], worker_id, room, lease_seconds, now)
            jobs += taken
            claimed.update(_count_keys(taken, keys))
            if len(taken) == room:
                books.alone = keys[0]
            break
        got = _claim_among(queryset, queue, keys, room - len(jobs), weights, leads, key_room,
                           (worker_id, lease_seconds, now), jobs)
        claimed.update(got)
        if len(jobs) >= room or after is None:  # done, or every key was looked at
            break
    books.after = after
    if jobs:
        books.charge(claimed, weights)
    return jobs


def _claim_among(queryset, queue, keys, room, weights, leads, key_room, claim,
                 jobs: list) -> Counter:
    """Claim up to ``room`` due jobs of ``keys``, each key's share of them, into ``jobs``;
    returns how many each key got."""
    # What a key can take at most: what its limits leave, or the due jobs it had.
    known = {} if key_room is None else {key: key_room(key) for key in keys}
    got = Counter()
    connection = connections[queryset._write_alias()]
    for _ in range(CLAIMS_PER_WINDOW):
        given, _ = allot(keys, room, weights=weights, leads=leads, caps=known)
        wanted = {key: count - got[key] for key, count in given.items() if count > got[key]}
        if not wanted:
            break
        picked_sql, picked_params = ops(connection).claimable_ids_by_key(
            queryset.model, queue=queue, wanted=wanted)
        claimed = plain.claim_picked(queryset, picked_sql, picked_params, *claim)
        jobs += claimed
        by_key = _count_keys(claimed, wanted)
        got.update(by_key)
        for key, count in wanted.items():
            if by_key[key] < count:  # every due job it had (not held by another claim)
                known[key] = got[key]
        if (room - got.total()) * SHORT_ENOUGH < room:
            # A few jobs short: another claim took a small key's job first (the usual race
            # behind a backlog: every process gives that key a slot, one gets the job). Not
            # worth a statement: the worker claims again when a slot frees. One round trip
            # more for each such loser was a third more CPU per job in
            # benchmarks/fairness_pickup.py's runs that came out slow.
            break
    return got


def _count_keys(jobs, asked) -> Counter:
    """{key: how many of ``jobs`` are of it}, each key as in ``asked``: under a
    case-insensitive collation (MariaDB's usual) the rows of "A" come with those of "a"."""
    counts = Counter()
    for job in jobs:
        key = job.concurrency_key or ""
        if key not in asked:
            key = next((name for name in asked if name.casefold() == key.casefold()), key)
        counts[key] += 1
    return counts


def _window(connection, model, queue, after) -> tuple[list, str | None]:
    """The keys with ready jobs a claim looks at (at most FAIR_KEYS_PER_CLAIM, from after the
    key ``after``, wrapping round; None: from the first), and the key the next window starts
    after (None: from the first again)."""
    driver = ops(connection)
    first = (driver.ready_keys(model, queue=queue, unkeyed=True, limit=FAIR_KEYS_PER_CLAIM)
             if after is None else
             driver.ready_keys(model, queue=queue, after=after, limit=FAIR_KEYS_PER_CLAIM))
    keys = [key for key, in returning.fetch(connection, *first)]
    if after is not None and len(keys) < FAIR_KEYS_PER_CLAIM:  # the end: wrap round
        seen = set(keys)
        keys += [key for key, in returning.fetch(connection, *driver.ready_keys(
            model, queue=queue, unkeyed=True, limit=FAIR_KEYS_PER_CLAIM - len(keys)))
                 if key not in seen]
    return keys, (keys[-1] if len(keys) == FAIR_KEYS_PER_CLAIM else None)
