"""How the chaos clients wait before trying again: what `Retry-After` says when an answer
carries it, else a backoff doubling from a short first wait up to a cap."""

import httpx

# Answers worth trying again: over a limit, or the service (or its database) unavailable.
RETRY_STATUSES = frozenset({429, 502, 503, 504})


def retry_after_s(response: httpx.Response) -> float | None:
    """`Retry-After` in seconds (the service sends only the delay-seconds form)."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class Backoff:
    """Waits of `first_s`, doubling after each, up to `max_s`; `reset()` after a success."""

    def __init__(self, first_s: float = 0.05, max_s: float = 1.0) -> None:
        self._first_s = first_s
        self._max_s = max_s
        self._next_s = first_s

    def next_s(self, response: httpx.Response | None = None) -> float:
        """The wait before the next attempt: the answer's `Retry-After` if it has one."""
        told = retry_after_s(response) if response is not None else None
        if told is not None:
            return told
        wait, self._next_s = self._next_s, min(2 * self._next_s, self._max_s)
        return wait

    def reset(self) -> None:
        self._next_s = self._first_s
