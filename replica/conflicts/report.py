"""Report this replica's open conflicts to the hub after a sync (the console's
conflicts page, docs/console.md), only when they changed since the last report that got through.

    service.run_sync / watch_syncer ─> rep.sync() ok ─> report_after_sync(space, rep)
        summary(store, claims)         open conflicts: packet id, entry, kind, since,
                                       claimed (no content), at most MAX_ITEMS
        digest == last reported?  ──yes──> nothing sent
        PUT /v1/spaces/{space}/replicas/{replica}/conflicts
        ok ─> conflict_report.json remembers the digest
        any failure ─> logged (quire.conflict_report, INFO) and kept as last_error in
                       conflict_report.json; the sync's outcome is unchanged and the
                       next sync tries again (the digest was not remembered)
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import Any

from replica.conflicts.desk import open_conflicts_txn
from replica.conflicts.packets import conflict_kind, packet_digest, packet_id_of
from replica.machine.home import SpaceConfig, write_json
from replica.store.db import Database
from replica.store.store import Store

log = logging.getLogger("quire.conflict_report")

MAX_ITEMS = 500  # the hub's limit (hub/conflict_reports.py); the rest wait their turn
STATE_FILE = "conflict_report.json"


def _claimed(space: SpaceConfig, now: int) -> set[str]:
    """Entries with a live claim (claims.sqlite, replica/conflicts/desk.py); none if no file."""
    path = space.dir / "claims.sqlite"
    if not path.exists():
        return set()
    with Database(path, ("PRAGMA busy_timeout=15000",)).connect() as conn:
        rows = conn.execute("SELECT entry_id, expires_at FROM claims").fetchall()
    return {r.entry_id for r in rows if r.expires_at > now}


def summary(space: SpaceConfig, store: Store, now: int | None = None
            ) -> list[dict[str, Any]]:
    """The open conflicts as the hub takes them, by entry id."""
    now = int(time.time() * 1000) if now is None else now
    with store.engine.connect() as conn:
        conflicts = open_conflicts_txn(conn)
    claimed = _claimed(space, now)
    return [{"id": packet_id_of(packet_digest(c)), "entry": c.entry_id,
             "kind": conflict_kind(c), "since": int(c.created_at),
             "claimed": c.entry_id in claimed} for c in conflicts[:MAX_ITEMS]]


def _digest(replica_id: str, items: list[dict[str, Any]]) -> str:
    raw = json.dumps([replica_id, items], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()


def _last(space: SpaceConfig) -> str | None:
    try:
        digest = json.loads((space.dir / STATE_FILE).read_text()).get("digest")
    except (OSError, ValueError, AttributeError):
        return None
    return digest if isinstance(digest, str) else None


def report_after_sync(space: SpaceConfig, rep: Any) -> bool:
    """Send the report if the open conflicts changed; True when one was sent. Never raises:
    a report is a convenience for the console, not part of the sync."""
    try:
        items = summary(space, rep.store)
        digest, last = _digest(rep.replica_id, items), _last(space)
        if digest == last or (last is None and not items):
            return False  # unchanged, or nothing ever reported and nothing to report
        rep.client.report_conflicts(space.space_id, rep.replica_id, items)
        write_json(space.dir / STATE_FILE, {"digest": digest, "count": len(items),
                                            "reported_at": int(time.time() * 1000)})
        return True
    except Exception as e:  # noqa: BLE001 - logged; the next sync retries
        # INFO, not WARNING: a command's stderr stays the sync's own (the watcher's log
        # records it); the state file keeps the error for `cat` and the tests
        log.info("conflict report not sent (retried at the next sync): %s: %s",
                 type(e).__name__, e)
        try:
            prev = json.loads((space.dir / STATE_FILE).read_text())
        except (OSError, ValueError):
            prev = {}
        if not isinstance(prev, dict):
            prev = {}
        prev["last_error"] = f"{type(e).__name__}: {e}"[:500]
        try:
            write_json(space.dir / STATE_FILE, prev)
        except OSError:
            pass
        return False
