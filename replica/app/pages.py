"""One page at a time, for people: what the next sync would publish (``quire diff``), the
pages deleted (``quire deleted``), and one page brought back (``quire restore``).

    diff      store (synced) ─┐ the same read-only scan as ``quire status``
              vault (local) ──┴► per unpublished page: fields by name, a unified body diff
    deleted   store: synced tombstones (no local copy), who and when from the history
    restore   the hub's history of the page ─► the version asked for (``--at`` a seq or a
              time; by default the one before the last change, or the last before a delete)
              ─► written into the vault file ─► a sync publishes it as this member's edit:
              the space's rules, the guard and content screening apply, as to any edit. It
              is not ``quire admin revert`` (one batch of any pages back, admins only)

A page with unpublished local changes is never overwritten by a restore (``invalid_request``,
``details.reason: local_changes``); nothing is written then.
"""

from __future__ import annotations

import difflib
from dataclasses import replace
from pathlib import Path
from typing import Any

from replica.machine.home import Home, SpaceConfig
from replica.store import store as st
from replica.store.store import Store
from shared.entry import Entry
from shared.errors import InvalidRequest, NotFound
from shared.wire import Op

FIELDS = ("title", "tags", "links", "meta")


# ---------------------------------------------------------------- diff


def entry_diff(entry_id: str, old: Entry | None, new: Entry | None, *,
               old_label: str, new_label: str) -> dict[str, Any]:
    """Pure: what changed from ``old`` to ``new`` (None or a tombstone: absent): front-matter
    fields by name as ``[before, after]``, the body as a unified diff."""
    a = None if old is None or old.deleted else old
    b = None if new is None or new.deleted else new
    fields = {f: [_jsonable(getattr(a, f)) if a else None,
                  _jsonable(getattr(b, f)) if b else None]
              for f in FIELDS if (getattr(a, f) if a else None) != (getattr(b, f) if b else None)}
    body = "".join(difflib.unified_diff(
        (a.body if a else "").splitlines(keepends=True),
        (b.body if b else "").splitlines(keepends=True),
        fromfile=f"{entry_id} ({old_label})", tofile=f"{entry_id} ({new_label})"))
    return {"id": entry_id, "created": a is None and b is not None,
            "deleted": a is not None and b is None, "fields": fields, "body": body}


def _with_renames(sides: list[tuple[str, Entry | None, Entry | None]]
                  ) -> list[dict[str, Any]]:
    """``entry_diff`` of each (id, synced, local), a delete and a create of the same
    content shown as the one rename the sync will publish (replica/engine/renames.py):
    the new name's entry, ``renamed_from`` the old, its changes against the old one."""
    from replica.engine import renames

    def live(e: Entry | None) -> Entry | None:
        return None if e is None or e.deleted else e

    gone: dict[str, Entry] = {}
    made: list[Op] = []
    for eid, old, new in sides:
        was, now = live(old), live(new)
        if was is not None and now is None:
            gone[eid] = was
        elif was is None and now is not None:
            made.append(Op(now, None))
    moved = renames.partners(made, gone)  # new id -> old id
    out = []
    for eid, old, new in sides:
        if eid in moved.values():
            continue  # shown as its rename
        if eid in moved:
            d = entry_diff(eid, replace(gone[moved[eid]], id=eid), new, old_label="synced",
                           new_label="local")
            out.append(dict(d, renamed_from=moved[eid]))
        else:
            out.append(entry_diff(eid, old, new, old_label="synced", new_label="local"))
    return out


def _jsonable(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def local_diff(space: SpaceConfig, entries: list[str] | None = None) -> dict[str, Any]:
    """What the next sync would publish, page by page: the synced version against the vault
    file (or the store's local state where the file is gone). Read-only."""
    from replica.engine.pending import unpublished_txn
    from replica.vault import markdown as md
    from shared.entry import EntryError

    store = Store(space.store_path)
    vault = Path(space.vault)
    try:
        with store.snapshot() as conn:
            pending = unpublished_txn(conn, vault, scan=vault.is_dir())
            wanted = [e for e in pending.entries
                      if not entries or any(e == x or (x.endswith("/") and e.startswith(x))
                                            for x in entries)]
            sides = []
            for eid in wanted:
                s = st.get_state_txn(conn, eid)
                path = md.entry_path(vault, eid)
                try:
                    local, _ = md.read_entry(vault, eid, path.read_bytes())
                except FileNotFoundError:
                    local = None
                except EntryError:
                    local = s.local
                sides.append((eid, s.synced, local))
            diffs = _with_renames(sides)
    finally:
        store.close()
    return {"space": space.name, "entries": diffs,
            "problems": [p.to_json() for p in pending.problems]}


# ---------------------------------------------------------------- deleted


def deleted(space: SpaceConfig) -> dict[str, Any]:
    """Pages deleted on the hub that this replica holds as deleted (since its first
    snapshot), newest first, with who deleted each and when (from the history)."""
    store = Store(space.store_path)
    try:
        with store.snapshot() as conn:
            gone = {r.id for r in conn.execute(
                "SELECT id FROM entries WHERE synced_deleted AND NOT held"
                " AND (local IS NULL OR local = '' OR local_deleted)")}
            found: dict[str, dict[str, Any]] = {}
            before = None
            while len(found) < len(gone):
                rows = st.history_page_txn(conn, before_n=before, limit=500)
                if not rows:
                    break
                before = rows[-1]["n"]
                for row in rows:
                    for op in (row["detail"] or {}).get("ops") or []:
                        eid = op.get("from") if op["action"] == "renamed" else op["id"]
                        if eid in gone and eid not in found and (
                                op["action"] in ("deleted", "renamed") or
                                op.get("how") == "deleted"):
                            found[eid] = {
                                "at": row["accepted_at"], "seq": row["seq"],
                                "epoch": row["epoch"], "author": row["author"],
                                "own": row["replica_id"] == space.replica_id,
                                "renamed_to": op["id"] if op["action"] == "renamed" else None}
    finally:
        store.close()
    rows_out = [{"id": eid, **found.get(eid, {"at": None, "seq": None, "epoch": None,
                                              "author": None, "own": False})}
                for eid in gone]
    rows_out.sort(key=lambda r: (-(r["at"] or 0), r["id"]))
    return {"space": space.name, "deleted": rows_out}


# ---------------------------------------------------------------- restore


def _history(home: Home, space: SpaceConfig, entry_id: str) -> list[dict[str, Any]]:
    from replica.app.remote_reads import ask

    try:
        doc = ask(home, space.space_id, "history", {"id": entry_id, "limit": 500})
    except NotFound as e:
        if not e.message.startswith("no history"):
            raise  # the space itself: the hub refuses this member (exit 5)
        raise NotFound(f"{entry_id} was never in {space.name}: nothing to restore",
                       {"reason": "no_history", "where": "local"}) from e
    return list(doc["versions"])


def pick_version(versions: list[dict[str, Any]], *, seq: int | None = None,
                 at_ms: int | None = None, epoch: str | None = None) -> dict[str, Any]:
    """Pure: the version of a page to restore from its history (newest first). ``seq``: the
    version current right after that seq (of ``epoch``, the current one); ``at_ms``: the
    version current at that time; neither: the one before the newest change (for a deleted
    page, its last content)."""
    if seq is not None:
        cur = [v for v in versions if v["epoch"] == epoch and v["seq"] <= seq]
        if not cur:
            raise NotFound(f"the page did not exist at seq {seq}", {"reason": "not_at_seq", "where": "local"})
        return cur[0]
    if at_ms is not None:
        cur = [v for v in versions if (v.get("accepted_at") or 0) <= at_ms]
        if not cur:
            raise NotFound("the page did not exist at that time", {"reason": "not_at_time", "where": "local"})
        return cur[0]
    if not versions:
        raise NotFound("no history for this page", {"where": "local"})
    if versions[0]["deleted"]:
        live = [v for v in versions if not v["deleted"]]
        if not live:
            raise NotFound("the page never had content to restore", {"where": "local"})
        return live[0]
    if len(versions) < 2:
        raise NotFound("the page has no earlier version to restore",
                       {"reason": "no_earlier_version", "where": "local"})
    return versions[1]


def restore(home: Home, space: SpaceConfig, entry_id: str, *, at: str | None = None
            ) -> dict[str, Any]:
    """Write the chosen version of ``entry_id`` into the vault (the caller syncs). Refused,
    with nothing written, when the page has unpublished local changes."""
    from replica.app.changelog import parse_since
    from replica.app.remote_reads import ask
    from replica.engine.pending import unpublished_txn
    from replica.vault import files as vlt
    from replica.vault import markdown as md
    from shared.entry import make_entry
    from shared.ids import is_entry_id

    if not is_entry_id(entry_id):
        raise InvalidRequest(f"not an entry id: {entry_id!r} (kind/slug, e.g. page/deploy)",
                             {"reason": "bad_entry_id"})
    vault = Path(space.vault)
    store = Store(space.store_path)
    try:
        with store.snapshot() as conn:
            pending = unpublished_txn(conn, vault, scan=vault.is_dir())
            state = st.get_state_txn(conn, entry_id)
            head = st.head_txn(conn)
            others = [e for e in pending.entries if e != entry_id]
    finally:
        store.close()
    if entry_id in pending.entries or state.held:
        raise InvalidRequest(f"{entry_id} has local changes not published yet: publish them "
                             "(quire sync) or undo them before restoring",
                             {"reason": "local_changes", "entry": entry_id})
    seq = at_ms = None
    if at:
        seq, at_ms = parse_since(at)
    versions = _history(home, space, entry_id)
    chosen = pick_version(versions, seq=seq, at_ms=at_ms,
                          epoch=head.epoch if head else None)
    if chosen["deleted"]:
        raise NotFound(f"{entry_id} was deleted at that point; nothing to restore",
                       {"reason": "deleted_then", "where": "local"})
    doc = ask(home, space.space_id, "entry", {"id": entry_id, "seq": chosen["seq"],
                                              "epoch": chosen["epoch"]})
    entry = make_entry(doc["entry"])
    current = state.synced if state.synced is not None and not state.synced.deleted else None
    if current is not None and current.version == entry.version:
        return {"space": space.name, "id": entry_id, "restored": False, "version":
                entry.version, "from": chosen, "others_pending": others,
                "reason": "already_current"}
    if not vault.is_dir():
        raise NotFound(f"the vault {vault} is missing", {"reason": "vault_missing", "where": "local"})
    vlt.write_atomic(vault, md.entry_path(vault, entry_id), md.render(entry))
    return {"space": space.name, "id": entry_id, "restored": True, "version": entry.version,
            "from": chosen, "was_deleted": current is None, "others_pending": others,
            "diff": entry_diff(entry_id, state.synced, entry, old_label="now",
                               new_label="restored")}
