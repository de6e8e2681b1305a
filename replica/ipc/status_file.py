"""What ``quire status`` shows about a space's watcher: its status file (``watch.json``,
written atomically by ``replica/watch/core.py`` at every state change) and whether a watcher
holds the space's watch lock right now."""

from __future__ import annotations

import json
import time
from typing import Any

from replica.ipc.lock import WatchLock, lock_path, status_path


def watcher_status(space: Any) -> dict[str, Any] | None:
    """The watcher's last status with ``running``; None when no watcher ever ran here."""
    path = status_path(space)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = None
    running = WatchLock(lock_path(space)).held_by_other()
    if doc is None and not running:
        return None
    doc = dict(doc or {})
    doc["running"] = running
    if not running and doc.get("state") not in (None, "stopped"):
        doc["state"] = "stopped"  # it died without saying so (killed)
    return doc


# worst first: the space's state is the worst of the replica's own and its watcher's
SEVERITY = ("suspended", "error", "conflicts", "problems", "pending", "never_synced", "ok")
_FROM_WATCHER = {"suspended": "suspended", "backoff": "error", "conflicts": "conflicts"}


def overall(doc: dict[str, Any], watcher: dict[str, Any] | None) -> dict[str, Any]:
    """``doc`` (the replica's own status) with the worst of its state and its running
    watcher's: a watcher the hub refuses (suspended) makes the space ``suspended``, one
    retrying after failures makes it ``error``, with the watcher's error. A watcher that
    is not running has no say (its last state is history)."""
    if not watcher or not watcher.get("running"):
        return doc
    theirs = _FROM_WATCHER.get(str(watcher.get("state")))
    ours = doc.get("state")
    if theirs is None or (ours in SEVERITY
                          and SEVERITY.index(ours) <= SEVERITY.index(theirs)):
        return doc
    out = dict(doc, state=theirs)
    err = watcher.get("last_error")
    if theirs == "suspended" and isinstance(err, dict):
        code = err.get("code")  # the shape service.refusal gives a sync's refusal
        out["suspended"] = {"reason": "not_a_member" if code == "not_found" else code,
                            "message": err.get("message"), "since": err.get("at"),
                            "by": "watcher"}
    if theirs in ("suspended", "error") and err:
        out["last_error"] = dict(err, by="watcher")
    return out


RECENT_SHOWN = 5  # the watcher's last lines shown by a human `quire status`


def _ago(ms: Any, now: float) -> str:
    if not isinstance(ms, int):
        return "never"
    s = (ms - now * 1000) / 1000
    return f"in {s:.1f}s" if s > 0 else f"{-s:.1f}s ago"


def human_watcher(w: dict[str, Any] | None) -> list[str]:
    if w is None:
        return ["  watcher: not running (start one with: quire watch)"]
    now = time.time()
    who = f"pid {w.get('pid')}" if w.get("running") else "not running"
    lines = [f"  watcher: {w.get('state')} ({who}; stream {w.get('stream', '?')}; "
             f"last success {_ago(w.get('last_success'), now)})"]
    lag = w.get("lag") or {}
    hub = w.get("hub_head") or {}
    if hub:
        lines.append(f"  hub head: seq {hub.get('seq')}  lag: {lag.get('seq')} batch(es), "
                     f"{lag.get('ms', 0)} ms")
    if w.get("next_retry") and w.get("state") in ("backoff", "suspended"):
        lines.append(f"  next retry: {_ago(w['next_retry'], now)}")
    e = w.get("last_error")
    if e:
        lines.append(f"  watcher error: {e.get('code')}: {e.get('message')}")
    recent = [a for a in w.get("activity") or [] if isinstance(a, dict)][-RECENT_SHOWN:]
    if recent:  # what it said last (replica/watch/activity.py), newest last
        from shared.humanize import stamp

        lines.append("  watcher said:")
        lines += [f"    {stamp(a['at'], seconds=True) if isinstance(a.get('at'), int) else '?'}"
                  f"  {a.get('text')}" for a in recent]
    return lines
