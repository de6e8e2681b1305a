"""``quire verify``: is what this machine holds what the hub signed?

    store  ── the last signed head the replica reached (kept by replica/trust/verify.py), its
              signature checked again with the pinned key; the store's head equal to it;
              the state root recomputed FROM SCRATCH over the synced entries (not the
              incremental tables) equal to the signed root, and to the incremental one
    vault  ── every recorded file present and holding the bytes the store recorded (written
              or last read); files the store does not know (a local edit not yet synced
              is a difference too: listed, and taken by the next ``quire sync``)
    hub    ── (``--hub``) the hub re-checks its own chain from the epoch's genesis, its
              state root, and (for admins) the space's audit chain

Read-only: nothing here writes to the store or the vault.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from replica.store import store as st
from replica.store.store import Store
from replica.trust import verify
from replica.vault import markdown as md
from shared import state
from shared.errors import HubUnverified
from shared.signed import Keys, parse_head


def check_store(store: Store, hub_key: Keys, space_id: str) -> dict[str, Any]:
    head = store.head()
    out: dict[str, Any] = {"ok": False, "head": head.to_json() if head else None}
    wire = store.get_meta(verify.SIGNED_HEAD)
    if wire is None:
        out["problem"] = "no signed head recorded yet: run quire sync"
        return out
    try:
        signed = parse_head(hub_key, wire, space=space_id)
    except HubUnverified as e:
        out["problem"] = f"the recorded signed head does not verify: {e.message}"
        return out
    out["signed_head"] = {"epoch": signed.epoch, "seq": signed.seq, "digest": signed.digest,
                          "state": signed.state, "at": signed.at}
    with store.engine.connect() as conn:
        live = [(i, sv) for i, sv, _lv, _h in st.live_versions_txn(conn) if sv is not None]
    root = state.root_of_entries(live)
    out["entries"] = len(live)
    out["state"] = root
    if head is None or (head.epoch, head.seq, head.digest) != (signed.epoch, signed.seq,
                                                               signed.digest):
        out["problem"] = ("the store's head is not the last signed head (a push since the "
                          "last sync?): run quire sync")
    elif root != signed.state:
        out["problem"] = "the synced entries do not add up to the signed state root"
    else:
        out["ok"] = True
    return out


def check_vault(store: Store, vault: Path) -> dict[str, Any]:
    """Every file the store recorded, against the hash it recorded (the bytes it wrote or
    last read); files it does not know. ``ok`` when there is no difference at all (a local
    edit not yet synced is a difference: ``quire sync`` takes it)."""
    missing: list[str] = []
    edited: list[str] = []
    untracked: list[str] = []
    with store.engine.connect() as conn:
        recorded = {s.id: s.file_hash for s in st.states_txn(conn).values()}
    for entry_id, file_hash in recorded.items():
        if file_hash is None:
            continue
        path = md.recorded_path(vault, entry_id)  # an attachment's has no .md
        try:
            data = None if path.is_symlink() else path.read_bytes()
        except OSError:
            data = None
        if data is None:
            missing.append(entry_id)
        elif md.file_hash(data) != file_hash:
            edited.append(entry_id)
    for root, dirs, files in os.walk(vault):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if name.endswith(".md") and not name.startswith("."):
                rel = Path(root, name).relative_to(vault).as_posix()
                if recorded.get(rel[:-3]) is None:
                    untracked.append(rel)
    return {"ok": not (missing or edited or untracked),
            "files": sum(1 for h in recorded.values() if h is not None),
            "missing": sorted(missing), "changed": sorted(edited),
            "untracked": sorted(untracked)}


def check_ids(store: Store) -> dict[str, Any]:
    """Live entries whose ids cannot be files on every system (accepted before the hub and
    the replica refused such new ids): reported so they can be renamed; they still sync."""
    from shared.ids import non_portable_ids

    live = [eid for eid, s in store.states().items()
            if s.synced is not None and not s.synced.deleted]
    return {"non_portable": non_portable_ids(live)}


def run(home: Any, space: Any, *, with_hub: bool = False) -> dict[str, Any]:
    """The ``quire verify`` document of one joined space."""
    from replica.app import service
    from shared.errors import NotJoined

    hub = home.hub(space.hub_id)
    if hub is None:
        raise NotJoined(f"space {space.name} belongs to a hub this machine no longer knows")
    store = Store(space.store_path)
    try:
        doc: dict[str, Any] = {
            "space": {"id": space.space_id, "name": space.name},
            "store": check_store(store, hub.known_keys, space.space_id),
            "vault": check_vault(store, Path(space.vault)),
            "ids": check_ids(store)}
    finally:
        store.close()
    if with_hub:
        with service.open_client(hub) as c:
            doc["hub"] = c.admin_get(f"/v1/spaces/{space.space_id}/verify")
    doc["ok"] = all(doc[k]["ok"] is not False for k in ("store", "vault", "hub") if k in doc)
    return doc


def human(doc: dict[str, Any]) -> str:
    lines = [f"space {doc['space']['name']}: "
             f"{'verified' if doc['ok'] else 'DIFFERENCES FOUND'}"]
    s = doc["store"]
    lines.append(f"  store: {'ok' if s['ok'] else s.get('problem')} "
                 f"({s.get('entries', 0)} entries, state {str(s.get('state'))[:12]})")
    v = doc["vault"]
    lines.append(f"  vault: {v['files']} files; missing {len(v['missing'])}, changed "
                 f"{len(v['changed'])}, untracked {len(v['untracked'])}")
    for k in ("missing", "changed", "untracked"):
        lines += [f"    {k}: {x}" for x in v[k][:20]]
    for x in doc.get("ids", {}).get("non_portable", [])[:20]:
        lines.append(f"  id {x['id']} cannot be a file on every system ({x['reason']}); "
                     "rename it (it still syncs)")
    if "hub" in doc:
        h = doc["hub"]
        lines.append(f"  hub: chain {h['chain']['ok']} ({h['chain']['batches']} batches), "
                     f"state {h['state']['ok']}, audit {h['audit']['ok']}")
    return "\n".join(lines)
