"""Refused attempts in the audit log: counted per window, never stored one by one.

    an error response: unauthorized (bad token or DPoP proof), forbidden (e.g. an editor's
    admin call), policy_denied (the guard refused a batch by the space's rules),
    content_screened (a batch holding a secret; the event never holds the finding)
        └─ hub/api/observe.py, once the response is sent ──▶ Refusals.note(who, code, route)
             in memory, O(1) under a thread lock: one counter per
             (principal or client address, code, route template, space parameter)
    every ``audit_refusal_window`` seconds (a task of the app), at shutdown, and when an
    owner exports the audit (so the export is current)
        └─ flush ──▶ ONE transaction on the hub chain (hub/audit.py): one ``refused``
             event per key {code, route, space, count, first_at, last_at, window}

Bounded: at most ``audit_refusal_keys`` keys a window; every refusal past that is counted
in one ``refused.overflow`` event. A flood of any size and variety therefore writes at most
``keys + 1`` events a window, and never touches the database while it lasts. The flush
takes the hub chain's row, never a space row: it does not contend with the guard's
publication transaction.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from hub import audit, logs
from hub.store.db import outage

log = logging.getLogger("quire.hub")

CODES = frozenset({"unauthorized", "forbidden", "policy_denied", "content_screened"})
MAX_FIELD = 100  # characters of a route or space parameter kept (they come from the caller)


@dataclass
class _Count:
    count: int
    first_at: int
    last_at: int


Key = tuple[tuple[tuple[str, str], ...], str, str, str]  # who, code, route, space


class Refusals:
    def __init__(self, max_keys: int):
        self.max_keys = max(1, max_keys)
        self._lock = threading.Lock()
        self._counts: dict[Key, _Count] = {}
        self._overflow: _Count | None = None
        self._since: int | None = None

    def note(self, who: dict[str, str], code: str, route: str, space: str | None,
             now: int) -> None:
        """Count one refusal (cheap: no I/O; called after the response is sent)."""
        if code not in CODES:
            return
        key: Key = (tuple(sorted((k, str(v)[:MAX_FIELD]) for k, v in who.items())), code,
                    route[:MAX_FIELD], (space or "")[:MAX_FIELD])
        with self._lock:
            if self._since is None:
                self._since = now
            c = self._counts.get(key)
            if c is None and len(self._counts) >= self.max_keys:
                if self._overflow is None:
                    self._overflow = _Count(0, now, now)
                c = self._overflow
            elif c is None:
                c = self._counts[key] = _Count(0, now, now)
            c.count += 1
            c.last_at = now

    def pending(self) -> int:
        with self._lock:
            return sum(c.count for c in self._counts.values()) + (
                self._overflow.count if self._overflow else 0)

    def _take(self) -> tuple[dict[Key, _Count], _Count | None, int | None]:
        with self._lock:
            out = self._counts, self._overflow, self._since
            self._counts, self._overflow, self._since = {}, None, None
            return out

    def flush(self, store: Any, now: int) -> int:
        """Write what was counted since the last flush (one transaction); returns the
        number of events written. On a failure the counts are kept for the next flush."""
        counts, overflow, since = self._take()
        if not counts and overflow is None:
            return 0
        window = {"from": since, "to": now}

        def txn(conn: Any) -> int:
            for (who, code, route, space), c in counts.items():
                details: dict[str, Any] = {"code": code, "route": route, "count": c.count,
                                           "first_at": c.first_at, "last_at": c.last_at,
                                           "window": window}
                if space:
                    details["space"] = space
                audit.record_hub_txn(conn, at=now, action="refused", actor=dict(who),
                                     details=details, request_id=None)
            if overflow is not None:
                audit.record_hub_txn(conn, at=now, action="refused.overflow",
                                     actor={"system": "refusals"},
                                     details={"count": overflow.count,
                                              "first_at": overflow.first_at,
                                              "last_at": overflow.last_at, "window": window,
                                              "keys": self.max_keys}, request_id=None)
            return len(counts) + (overflow is not None)

        try:
            return int(store.run_write(txn))
        except Exception as e:
            reason = outage(e)
            if reason is None:
                logs.failure(log, "refusals_unwritten", why="kept for the next flush")
            else:  # the database is down: an expected state, not a bug (no traceback)
                logs.event(log, "refusals_kept", logging.WARNING, error=reason,
                           why="database unavailable; written at the next flush")
            self._restore(counts, overflow, since)
            return 0

    def _restore(self, counts: dict[Key, _Count], overflow: _Count | None,
                 since: int | None) -> None:
        with self._lock:
            for k, c in counts.items():
                cur = self._counts.get(k)
                if cur is None:
                    self._counts[k] = c
                else:
                    cur.count += c.count
                    cur.first_at = min(cur.first_at, c.first_at)
            if overflow is not None:
                if self._overflow is None:
                    self._overflow = overflow
                else:
                    self._overflow.count += overflow.count
            if since is not None:
                self._since = since if self._since is None else min(since, self._since)
