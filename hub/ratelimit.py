"""A small in-process token bucket per key (client address, code prefix...).

In memory, for a SQLite hub (one process); on PostgreSQL ``hub.sharedlimits.SharedLimiter``
keeps the same buckets in a table every hub process shares.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class RateLimiter:
    def __init__(self, rate_per_s: float, burst: int, clock: Callable[[], int],
                 max_keys: int = 10000):
        self.rate = rate_per_s
        self.burst = burst
        self.clock = clock  # Unix milliseconds
        self.max_keys = max_keys
        self._buckets: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def allow(self, key: str) -> tuple[bool, int]:
        """Take one token; returns (allowed, seconds until the next token)."""
        now = self.clock()
        with self._lock:
            tokens, at = self._buckets.get(key, (float(self.burst), now))
            tokens = min(self.burst, tokens + (now - at) / 1000 * self.rate)
            if len(self._buckets) > self.max_keys:
                self._buckets.clear()
            if tokens >= 1:
                self._buckets[key] = (tokens - 1, now)
                return True, 0
            self._buckets[key] = (tokens, now)
            return False, max(1, int((1 - tokens) / self.rate + 0.999))
