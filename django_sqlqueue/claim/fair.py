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
* Only the leads ``F - V > 0`` are kept, on the Queue row (``fair_state``, written by the claim
  under the row's lock that serialises the queue's claims, claim/limited.py): a key missing
  from it starts at V. The row holds no more than the keys served ahead of V.

The reads never touch a key's backlog: the ready keys are found by a skip scan (one index probe
per key, the driver's ``ready_keys``), then each key that was given slots has that many rows
read from its own range of ``sqlqueue_job_ready_by_key`` (``ready_ids_by_key``). The skip scan
finds keys whose jobs are not due yet too; a key that has fewer due jobs than its slots gets
what it has, and its other slots are given again among the rest (one more read, at most
``READS_PER_CLAIM`` in all).

A claim looks at no more than FAIR_KEYS_PER_CLAIM keys (a window); with more keys, each claim
looks at the next window, after the last key of the previous one (``fair_state["after"]``),
wrapping round at the end of the keys: the windows take turns, the weights apply among the keys
of a window. A window with fewer due jobs than the claim wants is followed by the next, in the
same claim (at most WINDOWS_PER_CLAIM).
"""

import heapq
import math
from dataclasses import dataclass

from django.db import connections

from ..db import ops, returning
from .rows import in_claim_order

#: The most keys one fair claim looks at. With more keys that have ready jobs, each claim looks
#: at the next this many in key order, after those the previous claim looked at (wrapping round
#: at the end): the shares are weighted among the keys of a window, and the windows take turns.
#: Finding the keys costs one index probe each (on a loaded 2-core machine, 35 us a key).
FAIR_KEYS_PER_CLAIM = 1_000
#: Windows of keys one claim looks at, when the first has fewer due jobs than the claim wants.
WINDOWS_PER_CLAIM = 3
#: Reads of the keys' rows per window: the first for the slots given, the others for the slots
#: of keys that had fewer due jobs than they were given.
READS_PER_CLAIM = 4


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
class FairPick:
    """What a fair claim picked: the ids, in no order, and the keys' window it looked at."""

    ids: list
    #: The key the next claim's window starts after; None: from the first key.
    after: str | None


def pick_fair(model, alias, row, clock, room: int, key_room=None) -> FairPick:
    """Up to ``room`` ready jobs of the fair queue of ``row``, shared between its keys
    (``key_room(key)``: the most a key may take under per-key limits; None: no such limits).
    When a window of keys (FAIR_KEYS_PER_CLAIM) has fewer due jobs than ``room``, the claim
    goes on to the next, at most WINDOWS_PER_CLAIM in all."""
    connection = connections[alias]
    after = (row.fair_state or {}).get("after")
    ids, looked_at = [], set()
    for _ in range(WINDOWS_PER_CLAIM):
        keys, after = _window(connection, model, row.name, after)
        keys = [key for key in keys if key not in looked_at]  # a window may wrap round
        looked_at.update(keys)
        ids += _pick_among(connection, model, row, clock, keys, room - len(ids), key_room)
        if len(ids) >= room or after is None:  # done, or every key was looked at
            break
    return FairPick(ids, after)


def _pick_among(connection, model, row, clock, keys, room, key_room) -> list:
    """The ids of up to ``room`` due jobs of ``keys``, each key's share of them."""
    weights, leads = row.key_weights or {}, (row.fair_state or {}).get("leads", {})
    # What a key can take at most: what its limits leave, or the due jobs it has.
    known = {} if key_room is None else {key: key_room(key) for key in keys}
    rows = {}  # key: the ids of its first due jobs read so far, in claim order
    db_clock = model._meta.get_field("run_at").get_db_prep_value(clock, connection)
    for _ in range(READS_PER_CLAIM):
        given, _ = allot(keys, room, weights=weights, leads=leads, caps=known)
        # A key's read starts at its first job: it takes all its slots so far.
        wanted = {key: count for key, count in given.items() if count > len(rows.get(key, ()))}
        if not wanted:
            break
        statement, params = ops(connection).ready_ids_by_key(
            model, queue=row.name, wanted=wanted, now=db_clock)
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
            found = in_claim_order(model, cursor.fetchall())
        for key in wanted:
            rows[key] = []
        for pk, key, *_ in found:
            rows[key].append(pk)
        for key, count in wanted.items():
            if len(rows[key]) < count:  # all its due jobs (those not claimed by now)
                known[key] = len(rows[key])
    given, _ = allot(keys, room, weights=weights, leads=leads, caps=known)
    return [pk for key, count in given.items() for pk in rows.get(key, ())[:count]]


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


def fair_state(row, jobs, after) -> dict:
    """The Queue row's ``fair_state`` once ``jobs`` (those the claim got) are charged to their
    keys, with ``after`` for the next claim's window."""
    claimed = {}
    for job in jobs:
        key = job.concurrency_key or ""
        claimed[key] = claimed.get(key, 0) + 1
    _, leads = allot(sorted(claimed), len(jobs), weights=row.key_weights or {},
                     leads=(row.fair_state or {}).get("leads", {}), caps=claimed)
    return {"leads": leads} if after is None else {"leads": leads, "after": after}
