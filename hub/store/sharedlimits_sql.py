"""SQL for the limits every hub process shares on PostgreSQL (hub/sharedlimits.py): the
``rate_buckets`` upsert that takes a token, the ``dpop_jti`` claim that refuses a replay
another process saw, and the sweep of expired rows. Short autocommitted statements on the
store's engine, not ``_txn`` functions: each stands alone."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import text

SWEEP_EVERY = 2000

_TAKE = text("""
INSERT INTO rate_buckets AS b (key, tokens, at, ok, expires_at)
VALUES (:key, :burst - 1, :now, true, :now + :full_ms)
ON CONFLICT (key) DO UPDATE SET
  ok = LEAST(:burst, b.tokens + GREATEST(0, :now - b.at) * :rate / 1000.0) >= 1,
  tokens = LEAST(:burst, b.tokens + GREATEST(0, :now - b.at) * :rate / 1000.0)
           - CASE WHEN LEAST(:burst, b.tokens + GREATEST(0, :now - b.at) * :rate / 1000.0)
                       >= 1 THEN 1 ELSE 0 END,
  at = GREATEST(b.at, :now),
  expires_at = :now + :full_ms
RETURNING ok, tokens
""")

_JTI = text("""
INSERT INTO dpop_jti AS j (jti, expires_at) VALUES (:jti, :exp)
ON CONFLICT (jti) DO UPDATE SET expires_at = :exp WHERE j.expires_at < :now
RETURNING jti
""")


class PgShared:
    """The two tables, through the store's engine (short autocommitted statements)."""

    def __init__(self, engine: Any, clock: Callable[[], int]):
        self.engine = engine
        self.clock = clock
        self._calls = 0
        self._lock = threading.Lock()

    def _conn(self) -> Any:
        return self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")

    def _tick(self, conn: Any, now: int) -> None:
        with self._lock:
            self._calls += 1
            due = self._calls % SWEEP_EVERY == 0
        if due:
            conn.execute(text("DELETE FROM rate_buckets WHERE expires_at < :now"), {"now": now})
            conn.execute(text("DELETE FROM dpop_jti WHERE expires_at < :now"), {"now": now})

    def take(self, key: str, rate: float, burst: int) -> tuple[bool, int]:
        now = self.clock()
        full_ms = int(burst / rate * 1000) + 1000
        with self._conn() as conn:
            ok, tokens = conn.execute(_TAKE, {"key": key[:200], "burst": burst, "now": now,
                                              "rate": rate, "full_ms": full_ms}).one()
            self._tick(conn, now)
        if ok:
            return True, 0
        return False, max(1, int((1 - tokens) / rate + 0.999))

    def claim_jti(self, jti: str, expires_at: int) -> bool:
        now = self.clock()
        with self._conn() as conn:
            row = conn.execute(_JTI, {"jti": jti, "exp": expires_at, "now": now}).first()
            self._tick(conn, now)
        return row is not None
