"""Rate limits and the DPoP replay cache shared by every hub process on PostgreSQL.

    request ──> limiter.allow("redeem", client)            PgShared.take
                   │ SQLite: RateLimiter in memory (one process serves the database)
                   │ PostgreSQL: one upsert on rate_buckets, row-locked, so a burst spread
                   v             over N processes drains ONE bucket
                (allowed?, seconds to wait)

    DPoP proof ──> JtiCache.add(jti)   in memory first (a replay to this process costs
                   │                   nothing), then on PostgreSQL
                   v
                SharedJti.add: INSERT … ON CONFLICT: a jti another process saw inside the
                window is a replay there too

Rows expire (``expires_at``): a bucket once it would be full again, a jti once its proof is
outside the freshness window; they are deleted every ``SWEEP_EVERY`` calls. The statements
are in hub/store/sharedlimits_sql.py (``PgShared``). The calls block on the database:
request handlers run them in the thread pool (``blocking`` tells them so).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from hub.dpop import JtiCache
from hub.ratelimit import RateLimiter
from hub.store.sharedlimits_sql import PgShared


class SharedLimiter(RateLimiter):
    """A RateLimiter whose buckets live in PostgreSQL under ``<name>:<key>``."""

    blocking = True

    def __init__(self, name: str, rate_per_s: float, burst: int, shared: PgShared):
        super().__init__(rate_per_s, burst, shared.clock)
        self.name = name
        self.shared = shared

    def allow(self, key: str) -> tuple[bool, int]:
        return self.shared.take(f"{self.name}:{key}", self.rate, self.burst)


class SharedJti(JtiCache):
    """The in-process cache, then the shared table: a replay to any process is refused."""

    blocking = True

    def __init__(self, window_s: int, max_items: int, shared: PgShared):
        super().__init__(window_s, max_items, shared.clock)
        self.shared = shared

    def add(self, jti: str) -> bool:
        if not super().add(jti):
            return False
        return self.shared.claim_jti(jti, self.clock() + self.window_ms)


def limiter(shared: PgShared | None, name: str, rate_per_s: float, burst: int,
            clock: Callable[[], int]) -> RateLimiter:
    """In memory on SQLite (``shared`` None), in the shared table on PostgreSQL."""
    if shared is None:
        return RateLimiter(rate_per_s=rate_per_s, burst=burst, clock=clock)
    return SharedLimiter(name, rate_per_s, burst, shared)


class StreamSlots:
    """Open event streams per device, in this process (``streams_per_device``). A stream
    holds no database connection, so there is nothing shared to count with; with N
    processes a device may hold N times the limit (docs/operations.md)."""

    def __init__(self, per_device: int):
        self.per_device = per_device
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def acquire(self, device_id: str) -> Callable[[], None] | None:
        """A release function, or None when the device already has its limit open."""
        with self._lock:
            n = self._open.get(device_id, 0)
            if n >= self.per_device:
                return None
            self._open[device_id] = n + 1
        done = threading.Event()

        def release() -> None:
            if done.is_set():
                return
            done.set()
            with self._lock:
                left = self._open.get(device_id, 1) - 1
                if left > 0:
                    self._open[device_id] = left
                else:
                    self._open.pop(device_id, None)

        return release
