"""Backlinks and links fixed after a rename, on this machine (docs/decisions.md D132 part 6,
D145): ``quire read PAGE --backlinks``, ``quire links fix OLD NEW``, the MCP ``links`` tool
and the dangling links a sync reports.

    backlinks(store, id)        the store's links index (replica/store/links.py), with titles
    after_sync(store, report)   links the sync's changes left finding nothing → report.dangling
    fix(space, old, new)        each vault file linking to OLD rewritten to name NEW
                                (shared/linkfix.py), under the space lock; the next sync
                                publishes them

``fix`` works whether OLD is still there or already renamed to NEW: links are resolved
against the space's ids as they were before the move (NEW absent, OLD present). A file is
rewritten only when its bytes are still those it read (a person saving it meanwhile wins),
and only its links change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from replica.machine.home import SpaceConfig, space_lock
from replica.store import links as index
from replica.store import store as st
from shared import links
from shared.linkfix import rewrite

if TYPE_CHECKING:
    from replica.engine.report import SyncReport
    from replica.store.store import Store

SYNC_REFRESH_MAX = 5000  # entries a sync re-indexes at once; more wait for the first read


def backlinks(store: Store, entry_id: str) -> list[dict[str, Any]]:
    """``[{"id", "via", "title"}]``: the pages that link to ``entry_id``, by id."""
    with store.tx() as conn:
        found = index.backlinks_txn(conn, entry_id)
        for b in found:
            local = st.get_state_txn(conn, b["id"]).local
            b["title"] = local.title if local is not None else ""
    return found


def after_sync(store: Store, report: SyncReport) -> None:
    """Bring the links index up to date and put in ``report.dangling`` the links that the
    entries this sync changed (pulled or local) leave finding nothing. Never raises: the
    index is derived, and a failure here must not fail a sync that succeeded."""
    try:
        with store.tx() as conn:
            touched = index.refresh_txn(conn, SYNC_REFRESH_MAX)
            if touched:
                report.dangling = index.dangling_txn(conn, touched)
    except Exception:  # noqa: BLE001 - derived data: rebuilt at the next read
        report.dangling = []


def fix(space: SpaceConfig, store: Store, old: str, new: str, *, dry_run: bool = False
        ) -> dict[str, Any]:
    """Rewrite the links to ``old`` in every vault file that has them, to name ``new``."""
    from replica.vault.files import write_atomic
    from replica.vault.markdown import entry_path

    pages: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    with space_lock(space):
        with store.tx() as conn:
            index.refresh_txn(conn)
            before = links.Names((index.live_ids_txn(conn) - {new}) | {old})
            sources = index.backlinks_txn(conn, old, before)
        for src in (s["id"] for s in sources):
            path = entry_path(space.vault, src)
            try:
                data = path.read_bytes()
                text = data.decode("utf-8")
            except (OSError, UnicodeDecodeError) as e:
                skipped.append({"id": src, "reason": f"cannot read {path.name}: {e}"})
                continue
            out, count = rewrite(src, text, old, new, before)
            if not count:
                continue
            pages.append({"id": src, "links": count})
            if dry_run:
                continue
            if path.read_bytes() != data:  # being saved: the person's bytes win
                pages.pop()
                skipped.append({"id": src, "reason": "changed while being fixed; run again"})
                continue
            write_atomic(space.vault, path, out.encode("utf-8"))
    return {"space": space.name, "old": old, "new": new, "pages": pages, "skipped": skipped,
            "dry_run": dry_run, "next": None if dry_run or not pages else "quire sync"}
