"""The other side of a held conflict, next to ours in the vault: ``page/deploy.md`` keeps
ours (with its ``quire:`` block) and ``page/deploy.conflict-bob.md`` holds theirs, the hub's
version, in vault form, named after the member who made it (``theirs`` when the name is not
known). A person sees both sides in any editor, without a command (docs/replica.md).

    a sync (service.run_sync, the watcher's) or a resolution (desk.resolve), under the lock
      └─> refresh(vault, store)
            open conflict, theirs present ─> <slug>.conflict-<who>.md written (atomic)
            a copy written before whose conflict is closed (or whose theirs moved on)
              ─> removed, unless its bytes changed since (a person's edit: kept)
            recorded in store meta ``conflict_copies`` {path: {entry, sha256}}

The scan never publishes such a file (replica/vault/ignore.py ``conflict_copy``: a reserved
name, left out like an ignored file), so a copy's edit or removal changes nothing on the
hub. A file already at the copy's path that this replica did not write (an entry of that
name, a person's file) is never overwritten. Why a sibling file rather than diff3 markers in
the body: docs/decisions.md D133.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from pathlib import Path
from typing import Any

from replica.engine.merge import live
from replica.store import store as st
from replica.store.store import Store
from replica.vault import markdown as md
from replica.vault.files import write_atomic
from shared.ids import entry_id_problem

log = logging.getLogger("quire.conflict_copies")

KEY = "conflict_copies"  # store meta: {vault path: {"entry", "sha256"}} of the copies written
PEOPLE = "people"  # store meta kept by replica/app/changelog.py: {user_id: display name}
MAX_NAME = 40


def who(author: dict[str, Any] | None, people: dict[str, str]) -> str:
    """The copy's ``<who>``: the author's display name as a slug (``Bob Smith`` ->
    ``bob-smith``), else ``theirs``."""
    user = (author or {}).get("user")
    name = people.get(user, "") if isinstance(user, str) else ""
    slug = re.sub(r"[^a-z0-9]+", "-", str(name).lower()).strip("-")[:MAX_NAME].strip("-")
    return slug or "theirs"


def copy_path(entry_id: str, name: str) -> str | None:
    """The vault path of ``entry_id``'s copy of theirs (None: no valid one)."""
    eid = f"{entry_id}.conflict-{name}"
    return None if entry_id_problem(eid) else eid + ".md"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def refresh(vault: Path, store: Store) -> dict[str, str]:
    """Write the copies of the open conflicts' theirs, remove those of closed ones; returns
    {vault path: entry id} of the copies in place. The caller holds the space lock."""
    with store.engine.connect() as conn:
        conflicts = [c for eid in conn.column("SELECT entry_id FROM conflicts ORDER BY entry_id")
                     if (c := st.get_conflict_txn(conn, eid)) is not None]
        people = st.get_meta_txn(conn, PEOPLE, {}) or {}
        written: dict[str, Any] = st.get_meta_txn(conn, KEY, {}) or {}
        want: dict[str, tuple[str, bytes]] = {}
        for c in conflicts:
            theirs = live(c.theirs)
            rel = copy_path(c.entry_id, who(c.theirs_author, people)) if theirs else None
            if theirs is None or rel is None:
                continue
            if rel not in written and st.get_state_txn(conn, rel[:-3]).synced is not None:
                continue  # an entry of that name is the space's: its file is not ours
            want[rel] = (c.entry_id, md.render(theirs))
    if not want and not written:
        return {}
    kept: dict[str, Any] = {}
    for rel, rec in written.items():
        if rel in want:
            continue
        path = vault / rel
        cur = _read(path)
        if cur is not None and _sha(cur) == rec.get("sha256"):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    for rel, (eid, data) in want.items():
        path = vault / rel
        cur = _read(path)
        if cur != data:
            if cur is not None and _sha(cur) != (written.get(rel) or {}).get("sha256"):
                if rel in written:  # edited since: left as it is, still known as ours
                    kept[rel] = written[rel]
                continue  # (or a file this replica did not write: never touched)
            write_atomic(vault, path, data)
        kept[rel] = {"entry": eid, "sha256": _sha(data)}
    store.set_meta(KEY, kept)
    return {rel: rec["entry"] for rel, rec in kept.items()}


def after_sync(vault: Path, store: Store) -> None:
    """``refresh`` after a sync or a resolution; never raises: the copies are a view for
    people, not part of the sync (a failure is logged and retried the next time)."""
    try:
        refresh(vault, store)
    except Exception as e:  # noqa: BLE001 - logged; the next sync tries again
        log.info("conflict copies not refreshed (retried at the next sync): %s: %s",
                 type(e).__name__, e)
