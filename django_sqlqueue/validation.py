"""Checks applied at the enqueue boundary. Each raises an :class:`InvalidJob` subclass whose
message names the offending value and says how to fix it."""

import datetime as dt
import json
import math

from django.conf import settings
from django.utils import timezone

from .conf import QUEUE_NAME_RE
from .exceptions import (
    InvalidPayload,
    InvalidPriority,
    InvalidQueueName,
    InvalidRetryPolicy,
    InvalidSchedule,
    InvalidUniqueKey,
)

MIN_PRIORITY, MAX_PRIORITY = -100, 100  # the same range as Django's Tasks framework
UNIQUE_KEY_MAX_LENGTH = 255


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
    check_json(payload["args"], "args")
    check_json(kwargs, "kwargs")
    size = len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())
    if size > max_bytes:
        raise InvalidPayload(
            f"the payload is {size} bytes, over the limit of {max_bytes} "
            "(SQLQUEUE['MAX_PAYLOAD_BYTES']): store large data in your own table and pass its id."
        )
    return payload


def check_json(value, path: str) -> None:
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidPayload(
                f"{path} is {value!r}, which JSON cannot store: use None or a number."
            )
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            check_json(item, f"{path}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidPayload(
                    f"{path} has the key {key!r} ({type(key).__name__}); JSON object keys must be "
                    "strings."
                )
            check_json(item, f"{path}[{key!r}]")
        return
    hint = ""
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        hint = ": pass value.isoformat() and parse it in the job"
    elif hasattr(value, "pk"):
        hint = ": pass the object's pk and fetch it in the job"
    raise InvalidPayload(
        f"{path} is {value!r} ({type(value).__module__}.{type(value).__qualname__}), which is not "
        f"JSON-serialisable{hint}. Job arguments must be JSON: str, int, float, bool, None, "
        "lists and dicts with string keys."
    )


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
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > UNIQUE_KEY_MAX_LENGTH:
        raise InvalidUniqueKey(
            f"unique_key must be a non-empty string of at most {UNIQUE_KEY_MAX_LENGTH} "
            f"characters, not {value!r}."
        )
    return value
