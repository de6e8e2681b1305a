"""What a watcher says (docs/watch.md, "What the watcher says"): one line per pull, push,
conflict, refusal, held deletes and vault event, in the local time zone, pages by name.

    SpaceSyncer: a sync's report + the store's history rows it added ──► sync_lines ─┐
    Watcher (core): refusals, failures, the vault folder gone and back ──────────────┼─► Teller.tell
                                                                                      │
          stdout (``quire watch``'s output) ◄── say ◄────────────────────────────────┤
          <space dir>/watch.log (0600, one old file kept at 1 MiB) ◄─────────────────┤
          notify-send (``--notify``; skipped when it is not installed) ◄─────────────┘

Pulls and pushes are said in ``quire log``'s words (``change_lines``: replica/app/changelog.py,
from the report's ``changes``: who by display name and for which agent, what happened to
each page); ``sync_lines`` falls back to the history rows a sync added (pages by name) when
a report does not describe them. Ids never appear (they are in ``--json`` outputs).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replica.engine.mass_delete import describe as describe_held
from shared.humanize import now_ms, stamp

log = logging.getLogger("quire.watch")

LOG_MAX_BYTES = 1 << 20  # watch.log is moved to watch.log.1 past this (one old file kept)
NAMED = 5  # pages named in one line; more: "and N more"
RECENT = 20  # lines the status file keeps (``activity``)
# the store's meta key of the members' display names (user id → name), as ``quire log``
# keeps them (replica/app/changelog.py); the watcher only reads them
PEOPLE = "people"
# kinds that raise a desktop notification under --notify (a push is what the person just
# did: no notification)
NOTIFIED = frozenset({"pull", "conflict", "refusal", "deletes_held", "vault"})
NOTIFY_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Line:
    kind: str  # pull | push | conflict | refusal | deletes_held | vault | error
    text: str


def pages(ids: Iterable[str], deleted: Iterable[str] = ()) -> str:
    """``page/a, page/b (deleted) and 3 more``."""
    ids, gone = sorted(set(ids)), set(deleted)
    shown = [f"{i} (deleted)" if i in gone else i for i in ids[:NAMED]]
    more = f" and {len(ids) - NAMED} more" if len(ids) > NAMED else ""
    return ", ".join(shown) + more


def who(author: Mapping[str, Any] | None, me: str | None,
        names: Mapping[str, str] | None = None) -> str:
    """The person (and agent) behind a pulled batch, without ids; ``names``: the members'
    display names this replica knows (user id → name)."""
    a = dict(author or {})
    name = a.get("name") or a.get("user_name") or (names or {}).get(str(a.get("user")))
    person = str(name) if name else ("you" if me and a.get("user") == me else "a teammate")
    agent = a.get("agent") or (a.get("provenance") or {}).get("agent")
    return f"{person} (agent {agent})" if agent else person


def change_lines(changes: list[dict[str, Any]], names: Mapping[str, str],
                 me: str | None) -> list[Line]:
    """What a sync pulled and pushed, batch by batch, in the words of ``quire log`` and
    ``quire sync`` (replica/app/changelog.py ``who``, ``what``, ``provenance``): ``pulled
    from Bob for agent scout: edited page/deploy (+1 -0 lines), created page/new (2
    lines)``; five pages named, then "and N more"."""
    from replica.app import changelog

    out = []
    for c in changes:
        ops = [changelog.what(o) for o in c.get("ops") or []]
        more = f" and {len(ops) - NAMED} more" if len(ops) > NAMED else ""
        what = (", ".join(ops[:NAMED]) + more) or "no change"
        if c.get("direction") == "pushed":
            out.append(Line("push", f"pushed: {what}{changelog.provenance(c)}"))
        else:
            out.append(Line("pull", f"pulled from {changelog.who(c, dict(names), me)}: "
                                    f"{what}{changelog.provenance(c)}"))
    return out


def sync_lines(rows: list[Mapping[str, Any]], report: Mapping[str, Any], *,
               replica_id: str | None, me: str | None,
               deleted: Iterable[str] = (), names: Mapping[str, str] | None = None
               ) -> list[Line]:
    """What one sync (or an applied head event) did, as lines. ``rows``: the history rows
    it added (``kind`` batch/push/snapshot, ``entries`` JSON, ``author`` JSON,
    ``replica_id``); ``report``: its ``SyncReport.to_json()``; ``deleted``: the entries
    among them that are deleted now; ``names``: user id → display name."""
    gone = set(deleted)
    out: list[Line] = []
    pushed: list[str] = []
    if report.get("changes"):  # described page by page (replica/engine/changes.py)
        out += change_lines(list(report["changes"]), names or {}, me)
        rows = [r for r in rows if r.get("kind") == "snapshot"]
    for r in rows:
        entries = entry_ids(r)
        if r.get("kind") == "push" or (r.get("kind") == "batch"
                                       and replica_id and r.get("replica_id") == replica_id):
            pushed += entries
        elif r.get("kind") == "snapshot":
            out.append(Line("pull", "took the space's snapshot (history restarted: a new "
                                    "epoch, or this replica was far behind)"))
        elif entries:
            out.append(Line("pull", f"pulled {pages(entries, gone)} from "
                                    f"{who(_obj(r.get('author')), me, names)}"))
    if pushed:
        out.append(Line("push", f"pushed {pages(pushed, gone)}"))
    for e in sorted(set(report.get("held") or ())):
        out.append(Line("conflict", f"conflict: {e} is held (your version stays in the vault;"
                                    f" see: quire conflicts show {e})"))
    for d in report.get("policy_denied") or ():
        out.append(Line("refusal", f"refused by the space rules: {d.get('id')} "
                                   f"({d.get('action')}, rule {d.get('rule')}): kept locally, "
                                   "not published"))
    for d in report.get("content_screened") or ():
        out.append(Line("refusal", f"kept back by content screening: {d.get('id')}: kept "
                                   "locally, not published"))
    held = report.get("deletes_held")
    if held:
        out.append(Line("deletes_held", describe_held(held)))
    return out


def entry_ids(row: Mapping[str, Any]) -> list[str]:
    """The entries a history row names."""
    return _list(row.get("entries"))


def _list(v: Any) -> list[str]:
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return []
    return [str(x) for x in v] if isinstance(v, list) else []


def _obj(v: Any) -> dict[str, Any] | None:
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return None
    return v if isinstance(v, dict) else None


class Teller:
    """Says lines for one space: ``say`` (the watcher's output), the space's log file, a
    desktop notification (``notify``) when one is available. Never raises: a full disk or a
    broken notifier costs the line, not the watcher."""

    def __init__(self, space_name: str, log_path: Path | None,
                 say: Callable[[str], None] = print, notify: bool = False,
                 clock: Callable[[], int] = now_ms):
        self.space_name = space_name
        self.log_path = log_path
        self.say = say
        self.clock = clock
        self.notifier = shutil.which("notify-send") if notify else None
        if notify and self.notifier is None:
            log.info("--notify: notify-send is not installed; no desktop notifications")
        self.recent: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def tell(self, line: Line) -> None:
        at = self.clock()
        text = f"{stamp(at, seconds=True)} {self.space_name}: {line.text}"
        with self._lock:
            self.recent = (self.recent + [{"at": at, "kind": line.kind,
                                           "text": line.text}])[-RECENT:]
            try:
                self.say(text)
            except (OSError, ValueError):  # a closed stdout must not stop the watcher
                pass
            self._append(text)
        if self.notifier is not None and line.kind in NOTIFIED:
            self._notify(line)

    def _append(self, text: str) -> None:
        if self.log_path is None:
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        try:
            fd = os.open(self.log_path, flags, 0o600)
            try:
                if os.fstat(fd).st_size > LOG_MAX_BYTES:  # the size of the file opened
                    os.close(fd)
                    fd = -1
                    os.replace(self.log_path, self.log_path.with_name(self.log_path.name + ".1"))
                    fd = os.open(self.log_path, flags, 0o600)
                os.write(fd, (text + "\n").encode("utf-8"))
            finally:
                if fd >= 0:
                    os.close(fd)
        except OSError as e:
            log.warning("could not write the watch log: %s", e)

    def _notify(self, line: Line) -> None:
        assert self.notifier is not None
        argv = [self.notifier, "--app-name=Quire", f"Quire: {self.space_name}", line.text]

        def run() -> None:
            try:
                subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=NOTIFY_TIMEOUT_S, check=False)
            except (OSError, subprocess.SubprocessError) as e:
                log.info("desktop notification failed: %s", e)

        threading.Thread(target=run, name="notify", daemon=True).start()
