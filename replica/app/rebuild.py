"""``quire vault rebuild``: write a lost or damaged vault again from the store (docs/replica.md,
"Rebuilding a vault"), byte for byte, never over a local edit.

    space lock ──► the store, in one read: each entry's file as the vault should show it
                   (its local state, or theirs with the conflict marker for a held entry:
                   the ledger's ``shown``, what every sync writes)
               ──► each path in the vault:  no file           → written
                                            the same bytes      → left as it is
                                            other bytes, a link → a local edit: never
                                                                  overwritten, kept and
                                                                  listed (``--set-aside``:
                                                                  moved into a hidden folder
                                                                  of the vault, then written)
               ──► the presence file (.quire-vault), made again

Nothing goes to the hub and nothing is published: the store already holds every page this
replica synced and every local edit it folded in. Files the store does not know (new pages
not synced yet) are left alone. After it the vault shows what the store records, so the
next sync finds nothing to publish but what was unpublished before.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from replica.engine.ledger import Ledger
from replica.machine.home import SpaceConfig, space_lock
from replica.store import store as st
from replica.store.blobs import BlobCache
from replica.store.store import Store
from replica.vault import files, presence
from replica.vault import markdown as md
from shared.attachments import is_attachment

LISTED = 20  # paths named in a refusal or an answer
SET_ASIDE = ".quire-set-aside"  # hidden: never scanned, never published


def expected_files(store: Store, blobs: BlobCache | None = None) -> dict[str, bytes]:
    """Entry id → the bytes its vault file should hold, as the store records it. An
    attachment's are its blob's, from ``blobs`` (the space's cache); one the cache does not
    hold (a lazy replica) is left out, as its own sync leaves it."""
    out: dict[str, bytes] = {}
    with store.snapshot() as conn:
        for entry_id, *_ in st.live_versions_txn(conn):
            shown, marker = Ledger.shown(conn, st.get_state_txn(conn, entry_id))
            if shown is not None and is_attachment(shown):
                data = blobs.read(shown.meta["sha256"]) if blobs is not None else None
                if data is not None:
                    out[entry_id] = data
            elif shown is not None:
                out[entry_id] = md.render(shown, marker)
    return out


def _file(vault: Path, entry_id: str, attachments: set[str]) -> Path:
    return md.attachment_path(vault, entry_id) if entry_id in attachments \
        else md.entry_path(vault, entry_id)


def rebuild(space: SpaceConfig, *, set_aside: bool = False,
            clock: Any = time.time) -> dict[str, Any]:
    """Write the vault of ``space`` again from its store; see the module docstring. A file
    that differs from what the store records is kept as it is and listed (``kept``), unless
    ``set_aside``."""
    vault = Path(space.vault)
    with space_lock(space):
        store = Store(space.store_path)
        try:
            want = expected_files(store, BlobCache(space.dir / "blobs"))
            attachments = {eid for eid, s in store.states().items()
                           if eid in want and is_attachment(s.local or s.synced)}
        finally:
            store.close()
        written, same, edited = [], [], []
        for entry_id, data in sorted(want.items()):
            path = _file(vault, entry_id, attachments)
            try:
                if path.is_symlink() or not path.is_file():
                    if path.exists() or path.is_symlink():
                        edited.append(entry_id)
                    else:
                        written.append(entry_id)
                    continue
                if path.read_bytes() == data:
                    same.append(entry_id)
                else:
                    edited.append(entry_id)
            except OSError:
                edited.append(entry_id)
        aside = None
        kept = [] if set_aside else edited
        if set_aside and edited:
            aside = vault / f"{SET_ASIDE}-{int(clock())}"
            for entry_id in edited:
                src = _file(vault, entry_id, attachments)
                dst = aside / src.relative_to(vault)
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dst)
        vault.mkdir(parents=True, exist_ok=True)
        presence.make(vault)
        put = sorted([*written, *([] if kept else edited)])
        for entry_id in put:
            files.write_atomic(vault, _file(vault, entry_id, attachments), want[entry_id])
    return {"space": {"id": space.space_id, "name": space.name}, "vault": str(vault),
            "written": len(put), "unchanged": len(same), "entries": put[:LISTED],
            "kept": {"count": len(kept), "entries": kept[:LISTED]},
            "set_aside": None if aside is None else {"folder": str(aside),
                                                     "entries": edited[:LISTED],
                                                     "count": len(edited)}}


def human(doc: dict[str, Any]) -> str:
    lines = [f"rebuilt the vault of {doc['space']['name']} in {doc['vault']}: "
             f"{doc['written']} file(s) written, {doc['unchanged']} already as recorded"]
    if doc["kept"]["count"]:
        k = doc["kept"]
        lines.append(f"  kept as they are: {k['count']} file(s) that differ from the store "
                     f"({', '.join(k['entries'][:5])}{' …' if k['count'] > 5 else ''}): your "
                     "edits (quire sync publishes them); --set-aside moves them into a "
                     "hidden folder and writes the store's version")
    if doc["set_aside"]:
        a = doc["set_aside"]
        lines.append(f"  {a['count']} file(s) that differed were moved to {a['folder']} "
                     "(compare them and copy back what you want to keep)")
    lines.append(f"next: quire sync {doc['space']['name']}")
    return "\n".join(lines)
