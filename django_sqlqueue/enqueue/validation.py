"""Checks applied at the enqueue boundary. Each raises an :class:`InvalidJob` subclass whose
message names the offending value and says how to fix it."""

import datetime as dt
import decimal
import json
import math
import uuid

from django.conf import settings
from django.utils import timezone

from ..conf import QUEUE_NAME_RE
from ..db.job_table import (  # the same priority range as django.tasks
    MAX_PRIORITY,
    MIN_PRIORITY,
    UNIQUE_STATE_BITS,
    unique_states_mask,
)
from ..exceptions import (
    InvalidConcurrencyKey,
    InvalidMetadata,
    InvalidPayload,
    InvalidPriority,
    InvalidQueueName,
    InvalidRetryPolicy,
    InvalidSchedule,
    InvalidTags,
    InvalidTransactional,
    InvalidUniqueKey,
)
from ..statuses import KEY_HOLDING_STATUSES, JobStatus

UNIQUE_KEY_MAX_LENGTH = 255
#: Tags: how many a job may have, and how long each may be.
MAX_TAGS, TAG_MAX_LENGTH = 20, 100
#: The largest metadata, as compact JSON in UTF-8.
METADATA_MAX_BYTES = 4096
# Made once: json.dumps() with options builds a new encoder per call.
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def json_payload(args, kwargs, *, max_bytes: int) -> dict:
    """Return ``{"args": [...], "kwargs": {...}}`` or explain which value is not plain JSON.

    Only values that survive a JSON round trip unchanged are accepted (tuples become lists), so
    the function receives exactly what the caller passed: no pickle, no silent str() of a date.
    """
    if not isinstance(args, (list, tuple)):
        raise InvalidPayload(f"args must be a list or tuple, not {type(args).__name__}.")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict):
        raise InvalidPayload(f"kwargs must be a dict, not {type(kwargs).__name__}.")
    payload = {"args": list(args), "kwargs": kwargs}
    size_bound = len('{"args":,"kwargs":}') + check_json(payload["args"], "args") + check_json(
        kwargs, "kwargs"
    )
    if size_bound > max_bytes:  # maybe too large: only then is the exact size worth computing
        size = len(_COMPACT_JSON.encode(payload).encode())
        if size > max_bytes:
            raise InvalidPayload(
                f"the payload is {size} bytes, over the limit of {max_bytes} "
                "(SQLQUEUE['MAX_PAYLOAD_BYTES']): store large data in your own table and pass "
                "its id."
            )
    return payload


def check_json(value, path: str) -> int:
    """Raise :class:`InvalidPayload` naming the first value under ``path`` that is not plain JSON.

    Returns an upper bound of the value's size as compact JSON in UTF-8, found on the way, so that
    a payload well under the size limit need not be encoded to know it.
    """
    try:
        return _size_bound(value)
    except _NotJson as error:
        raise InvalidPayload(error.lead + path + error.where() + error.problem) from None


class _NotJson(Exception):
    """A value that JSON cannot store. The keys of the containers it is in are added while the
    walk unwinds, so that a payload that is fine (nearly all) builds no path at all."""

    def __init__(self, problem: str, lead: str = ""):
        super().__init__(problem)
        self.problem = problem  # the message, after the path
        self.lead = lead  # the message, before the path
        self.keys = []  # innermost first

    def where(self) -> str:
        """``['a'][0]``: list indexes are ints, dict keys strs."""
        return "".join(f"[{key!r}]" for key in reversed(self.keys))


def _size_bound(value) -> int:
    if isinstance(value, str):
        return 6 * len(value) + 2  # at worst, every character is written as \u00XX
    if value is None or isinstance(value, bool):
        return 5  # null, true, false
    if isinstance(value, int):
        return value.bit_length() // 3 + 2  # a bit is less than 1/3 of a digit; and the sign
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotJson(f" is {value!r}, which JSON cannot store: use None or a number.")
        return 24  # the longest repr() of a float
    if isinstance(value, (list, tuple)):
        return 2 + len(value) + _items_bound(enumerate(value))  # brackets and commas
    if isinstance(value, dict):
        size = 2 + 2 * len(value)  # braces, commas and colons
        for key in value:
            if not isinstance(key, str):
                raise _NotJson(
                    f" has the key {key!r} ({type(key).__name__}); JSON object keys must be "
                    "strings."
                )
            size += 6 * len(key) + 2
        return size + _items_bound(value.items())
    hint = ""
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        hint = ": pass value.isoformat() and parse it in the job"
    elif hasattr(value, "pk"):
        hint = ": pass the object's pk and fetch it in the job"
    elif isinstance(value, (decimal.Decimal, uuid.UUID)):
        hint = f": pass str(value) and make it a {type(value).__name__} again in the job"
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    raise _NotJson(
        f" is {value!r} ({kind}), which is not JSON-serialisable{hint}. Job arguments must be "
        "JSON: str, int, float, bool, None, lists and dicts with string keys.",
        # Django's own words for it (django.utils.json.normalize_json), which code written for
        # any django.tasks backend may look for.
        lead=f"Unsupported type: {kind}: ",
    )


def _items_bound(pairs) -> int:
    """The size bound of a container's items, from ``(index or key, item)`` pairs. Plain
    strings and ints, the most common items, are measured here rather than in a call each."""
    size = 0
    for key, item in pairs:
        kind = type(item)
        if kind is str:
            size += 6 * len(item) + 2
        elif kind is int:
            size += item.bit_length() // 3 + 2
        else:
            try:
                size += _size_bound(item)
            except _NotJson as error:
                error.keys.append(key)
                raise
    return size


def queue_name(queue) -> str:
    if not isinstance(queue, str) or not QUEUE_NAME_RE.fullmatch(queue):
        raise InvalidQueueName(
            f"invalid queue name {queue!r}: use 1 to 100 characters from letters, digits, "
            "'_', '.' and '-', starting with a letter or digit."
        )
    return queue


def priority(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not (
        MIN_PRIORITY <= value <= MAX_PRIORITY
    ):
        raise InvalidPriority(
            f"priority {value!r} is out of range: use an integer from {MIN_PRIORITY} (lowest) to "
            f"{MAX_PRIORITY} (highest); the default is 0."
        )
    return value


def seconds(value, name: str, *, error=InvalidSchedule, allow_zero=True) -> float:
    """Accept a timedelta or a number of seconds; refuse negatives (and zero if not allowed)."""
    if isinstance(value, dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise error(f"{name} must be a timedelta or a number of seconds, not {value!r}.")
    if value < 0 or (value == 0 and not allow_zero):
        limit = "zero or more" if allow_zero else "more than zero"
        raise error(f"{name} is {value!r} seconds; it must be {limit}.")
    return float(value)


def transactional_timeout(transactional, timeout: float | None, conf) -> float | None:
    """The ``timeout_seconds`` a job stores: ``timeout`` as given, and for a transactional job
    (which holds its row's lock while it runs) the setting's limit when it gives none; a
    longer one is refused, naming the fix."""
    if not isinstance(transactional, bool):
        raise InvalidTransactional(f"transactional must be True or False, not {transactional!r}.")
    if not transactional:
        return timeout
    limit = conf.TRANSACTIONAL_TIMEOUT_SECONDS
    if timeout is None:
        return float(limit)
    if timeout > limit:
        raise InvalidTransactional(
            f"a transactional job holds its row locked while it runs, so its timeout is at most "
            f'SQLQUEUE["TRANSACTIONAL_TIMEOUT_SECONDS"] ({limit:g} s), not {timeout:g} s: make '
            "it a normal job (transactional=False, with an idempotency key for its effects), "
            "or give it a shorter timeout.")
    return timeout


def not_async_transactional(task_name: str, is_async: bool, options: dict) -> None:
    """InvalidTransactional for an ``async def`` task made transactional: the event loop runs it
    on connections of other threads, outside the transaction that would hold its effects."""
    if is_async and options.get("transactional"):
        raise InvalidTransactional(
            f"{task_name} is an async function and cannot be transactional: its database calls "
            "run on other threads' connections. Make it a sync function, or a normal job.")


def run_at(when, delay, now: dt.datetime) -> dt.datetime:
    """The time the job becomes due: ``when``, or now plus ``delay``, or now."""
    if when is not None and delay is not None:
        raise InvalidSchedule("pass run_at or delay, not both.")
    if delay is not None:
        return now + dt.timedelta(seconds=seconds(delay, "delay"))
    if when is None:
        return now
    if not isinstance(when, dt.datetime):
        raise InvalidSchedule(f"run_at must be a datetime, not {type(when).__name__}.")
    if settings.USE_TZ and timezone.is_naive(when):
        raise InvalidSchedule(
            f"run_at {when.isoformat()} is naive but USE_TZ is on: pass an aware datetime, "
            "e.g. timezone.now() + timedelta(...)."
        )
    return when


def max_attempts(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRetryPolicy(
            f"max_attempts must be an integer of at least 1 (1 means never retry), not {value!r}."
        )
    return value


def max_interruptions(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRetryPolicy(
            "max_interruptions must be an integer of at least 1 (1: a job whose worker dies "
            f"while running it is not run again), not {value!r}."
        )
    return value


def retry_policy(*, backoff, min_delay, max_delay, jitter) -> dict:
    policy = {
        "retry_backoff_seconds": seconds(backoff, "retry_backoff", error=InvalidRetryPolicy),
        "retry_min_delay_seconds": seconds(min_delay, "retry_min_delay", error=InvalidRetryPolicy),
        "retry_max_delay_seconds": seconds(max_delay, "retry_max_delay", error=InvalidRetryPolicy),
    }
    if policy["retry_min_delay_seconds"] > policy["retry_max_delay_seconds"]:
        raise InvalidRetryPolicy(
            f"retry_min_delay ({min_delay!r}) is larger than retry_max_delay ({max_delay!r})."
        )
    if isinstance(jitter, bool) or not isinstance(jitter, (int, float)) or not 0 <= jitter <= 1:
        raise InvalidRetryPolicy(f"retry_jitter must be a fraction from 0 to 1, not {jitter!r}.")
    policy["retry_jitter"] = float(jitter)
    return policy


def unique_key(value):
    return _key(value, "unique_key", InvalidUniqueKey)


def concurrency_key(value):
    """A key, or None for none (stored as "")."""
    return _key(value, "concurrency_key", InvalidConcurrencyKey,
                example=' (e.g. f"customer-{customer.pk}")')


def _key(value, option, error, example=""):
    """``value`` if it is None or a string of 1 to 255 characters; else ``error``."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > UNIQUE_KEY_MAX_LENGTH:
        raise error(
            f"{option} must be a non-empty string of at most {UNIQUE_KEY_MAX_LENGTH} "
            f"characters{example}, not {value!r}."
        )
    return value


def unique_states(value) -> int | None:
    """The ``unique_states`` bits of ``value`` (status names), or None for the default (the
    unfinished statuses: today's unique key). Every unfinished status must be among them: a job
    moves between those on its own (claimed, retried, released), and one that came back to a
    counted status while another held its slot could not be written."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
        raise InvalidUniqueKey(
            f"unique_states must be a list of statuses (e.g. ['queued', 'running', 'failed', "
            f"'succeeded']), not {value!r}.")
    statuses = set()
    for status in value:
        if status not in UNIQUE_STATE_BITS:  # every status but a workflow's "waiting"
            raise InvalidUniqueKey(
                f"unique_states has {status!r}, which is not a status a unique job can have: "
                f"use some of {', '.join(UNIQUE_STATE_BITS)}.")
        statuses.add(JobStatus(status))
    missing = [status.value for status in KEY_HOLDING_STATUSES if status not in statuses]
    if missing:
        raise InvalidUniqueKey(
            "unique_states must include every unfinished status "
            f"({', '.join(KEY_HOLDING_STATUSES)}); add {', '.join(missing)}. It chooses which "
            "finished statuses still hold the key.")
    if statuses == set(KEY_HOLDING_STATUSES):
        return None
    return unique_states_mask(statuses)


def unique_period(value) -> float | None:
    """Seconds (a number or timedelta, at least 1 second), or None for no period."""
    if value is None:
        return None
    period = seconds(value, "unique_period", error=InvalidUniqueKey, allow_zero=False)
    if period < 1:
        raise InvalidUniqueKey(f"unique_period is {period!r} seconds; use 1 second or more.")
    return period


def tags(value) -> list | None:
    """A new list of the tags (order kept, duplicates refused), or None for none."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise InvalidTags(f"tags must be a list of strings (e.g. ['billing', 'customer-42']), "
                          f"not {value!r}.")
    if len(value) > MAX_TAGS:
        raise InvalidTags(f"{len(value)} tags is over the limit of {MAX_TAGS}: keep tags for "
                          "what you search by, and put the rest in metadata.")
    for tag in value:
        if not isinstance(tag, str) or not tag or len(tag) > TAG_MAX_LENGTH:
            raise InvalidTags(f"each tag must be a non-empty string of at most {TAG_MAX_LENGTH} "
                              f"characters, not {tag!r}.")
    if len(set(value)) != len(value):
        raise InvalidTags(f"tags {list(value)!r} has duplicates: give each tag once.")
    return list(value) or None


def metadata(value) -> dict | None:
    """A JSON copy of the metadata (a dict of plain JSON, at most METADATA_MAX_BYTES), or None."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidMetadata(f"metadata must be a dict (a JSON object), not {value!r}.")
    try:
        check_json(value, "metadata")
    except InvalidPayload as error:
        raise InvalidMetadata(str(error)) from None
    text = _COMPACT_JSON.encode(value)
    size = len(text.encode())
    if size > METADATA_MAX_BYTES:
        raise InvalidMetadata(
            f"metadata is {size} bytes as JSON, over the limit of {METADATA_MAX_BYTES}: keep "
            "large data in your own table and put its id in metadata.")
    return json.loads(text) or None
