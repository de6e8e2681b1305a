"""``quire export --space S DIR``: every live entry of a joined space written as the file a
vault has, into a new folder (docs/decisions.md D132 part 7, D145; docs/cli.md "Import and
export"). ``quire import`` reads such a folder back to the same entries, hence the same
state root.

    for each entry the hub had at the last sync (synced, live):
        the vault's file, when it is still exactly what the store recorded and nothing
        local is pending (the bytes as written)
        else a page rendered as a sync would write it (replica/vault/markdown.py), an
        attachment's bytes from the blob cache (checked when they were fetched)

Local edits not yet published are not exported (the space's state is), and nothing is
written into a folder that is not empty (``invalid_request``, ``details.reason:
not_empty``): an export never overwrites a file. An attachment whose bytes this machine
does not hold is listed in ``missing``, not written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replica.vault import markdown as md
from shared.errors import InvalidRequest

if TYPE_CHECKING:
    from replica.store.store import Store


def export(store: Store, vault: Path, dest: Path) -> dict[str, Any]:
    from replica.store import store as st
    from replica.store.blobs import BlobCache
    from replica.vault.files import write_many
    from shared.attachments import is_attachment

    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise InvalidRequest(f"{dest} is not an empty folder: an export writes a new one",
                             {"reason": "not_empty", "path": str(dest)})
    dest.mkdir(parents=True, exist_ok=True)
    with store.tx() as conn:
        states = st.states_txn(conn)
    cache = BlobCache(store.path.parent / "blobs")
    files: list[tuple[Any, bytes]] = []
    copied = attachments = rendered = 0
    missing = []
    for _, s in sorted(states.items()):
        e = s.synced
        if e is None or e.deleted:
            continue
        data = None
        if not s.dirty and not s.held and s.file_hash is not None:
            try:
                have = md.file_of(vault, e).read_bytes()
            except OSError:
                have = None
            if have is not None and md.file_hash(have) == s.file_hash:
                data, copied = have, copied + 1
        if is_attachment(e):
            data = data if data is not None else cache.read(e.meta["sha256"])
            if data is None:
                missing.append(e.id)
                continue
            attachments += 1
        elif data is None:
            data, rendered = md.render(e), rendered + 1
        files.append((md.file_of(dest, e), data))
    write_many(dest, files, exclusive=True)
    return {"folder": os.fspath(dest), "entries": len(files), "as_written": copied,
            "rendered": rendered, "attachments": attachments, "missing": missing}
