"""When a failed job runs again: exponential backoff, clamped, with jitter."""

import random


def retry_delay_seconds(
    attempt: int, *, backoff: float, min_delay: float, max_delay: float, jitter: float,
    rand=random.random,
) -> float:
    """Seconds to wait after attempt number ``attempt`` (1 for the first run) failed.

    ``backoff * 2**(attempt - 1)``, clamped to [min_delay, max_delay], then multiplied by a random
    factor in [1 - jitter, 1 + jitter] so that jobs that failed together do not retry together,
    and clamped again so the bounds always hold.
    """
    exponent = min(max(attempt - 1, 0), 64)  # 2**64 seconds is already far past any max_delay
    delay = min(max(backoff * 2**exponent, min_delay), max_delay)
    if jitter:
        delay *= 1 + jitter * (2 * rand() - 1)
    return min(max(delay, min_delay), max_delay)
