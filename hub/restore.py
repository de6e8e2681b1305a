"""``quire hub restore``: put a backup's *content* back, keep today's authorization and audit.

    BACKUP (file from 'quire hub backup', or the URL of a database pg_restore'd from a dump)
      ──inspect (file): SQLite, integrity_check, Quire tables──▶ private copy, migrated to head
      ──same hub_id as this hub's database, else wrong_hub──▶ plan: spaces in both
    one write transaction, for each planned space (space row locked):
      entries ← the backup's entries of the space (seq 0 of a new epoch)
      state root rebuilt, read index based on them, quota usage recounted
      signed epoch statement {reason "restore from backup", restored_from: backup's head}
      head ← genesis of the new epoch; audit event space.restore on the space's chain
    then hub.restore on the hub chain; commit (all spaces or none)

Untouched: users, devices, revocations, tokens, delegations, members and roles, rules,
invites, the audit log (it only grows: the events after the backup stay, so the chain and
the audit tips replicas hold still verify), and the batches of earlier epochs. Replicas see
the new epoch on their next sync, take its snapshot and republish what they hold from after
``restored_from`` (replica/engine/restored.py). Spaces not in the backup (created since) and spaces
whose head is still the backup's are left as they are. The caller holds the folder's
serving lock exclusively (hub/servelock.py): no hub process serves meanwhile.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hub import audit, blobs, reads, signed_state
from hub.backup import BackupError, inspect
from hub.keys import HubKey
from hub.quotas import recount_txn
from hub.settings import Settings
from hub.store import migrate
from hub.store.db import Store
from hub.store.hub_state import hub_state_txn
from hub.store.restore_sql import (
    backup_taken_at_txn,
    entry_rows_txn,
    forget_backup_mark_txn,
    hub_id_txn,
    replace_entries_txn,
    space_heads_txn,
)
from hub.store.spaces_sql import get_space_txn, set_head_txn
from shared.digest import genesis_digest
from shared.ids import new_id

REASON = "restore from backup"
ACTOR = {"system": "cli", "command": "hub restore"}


@contextmanager
def _source(source: str) -> Iterator[tuple[Store, int | None]]:
    """The backup as a Store at the schema head (a file: a migrated private copy; the user's
    file is never written), and when it was taken (None when unknown)."""
    if "://" in source:
        if migrate.current(source) != migrate.alembic_head():
            raise BackupError("migration_required", "the backup database is not at this "
                              f"hub's schema; run 'quire hub migrate --db {source}' first")
        store = Store(source, pool_size=1)
        try:
            yield store, None
        finally:
            store.dispose()
        return
    info = inspect(Path(source))
    with tempfile.TemporaryDirectory(prefix="quire-restore-") as tmp:
        copy = Path(tmp) / "backup.db"
        shutil.copyfile(source, copy)
        url = f"sqlite:///{copy}"
        try:
            migrate.upgrade(url)
        except Exception as e:  # noqa: BLE001 - any failure to read its schema
            raise BackupError("not_a_backup", f"{source}: its schema cannot be upgraded "
                              f"({type(e).__name__}: {e})") from None
        store = Store(url, pool_size=1)
        try:
            yield store, info["taken_at"]
        finally:
            store.dispose()


def _heads(conn: Any) -> dict[str, dict[str, Any]]:
    return {r.id: {"id": r.id, "name": r.name, "epoch": r.epoch, "seq": int(r.head_seq),
                   "digest": r.head_digest, "deleted": r.deleted_at is not None}
            for r in space_heads_txn(conn)}


def restore(settings: Settings, source: str, now: int, *, dry_run: bool = False
            ) -> dict[str, Any]:
    """Restore ``source`` into the hub of ``settings`` (see the module docstring)."""
    if migrate.current(settings.database_url) != migrate.alembic_head():
        raise BackupError("migration_required", "this hub's database is not at the schema "
                          f"head; run 'quire hub migrate --data {settings.data_dir}' first")
    key = HubKey.load(settings.key_path)
    with _source(source) as (backup, taken_at):
        with backup.read() as bconn:
            bhub = hub_id_txn(bconn)
            theirs = _heads(bconn)
        store = Store(settings.database_url, pool_size=1)
        try:
            with store.read() as conn:
                ours = _heads(conn)
                hub_id = hub_state_txn(conn).hub_id
            if bhub is None or bhub != hub_id:
                raise BackupError("wrong_hub", "the backup is of another hub (hub id "
                                  f"{bhub}, this hub is {hub_id})")
            plan, kept = [], []
            for sid, cur in sorted(ours.items(), key=lambda kv: kv[1]["name"]):
                b = theirs.get(sid)
                if b is None:
                    kept.append(dict(cur, why="not in the backup (created after it)"))
                elif cur["deleted"]:  # deleted today: stays deleted, content untouched
                    kept.append(dict(cur, why="deleted (restore it first to restore into it)"))
                elif (b["epoch"], b["seq"], b["digest"]) == (cur["epoch"], cur["seq"],
                                                             cur["digest"]):
                    kept.append(dict(cur, why="unchanged since the backup"))
                else:
                    plan.append((cur, b))
            doc: dict[str, Any] = {
                "dry_run": dry_run, "backup": {"hub_id": hub_id, "taken_at": taken_at},
                "restored": [], "kept": kept,
                "not_on_hub": [b for sid, b in theirs.items() if sid not in ours]}
            if dry_run:
                doc["restored"] = [{"space": c["id"], "name": c["name"], "epoch": None,
                                    "previous": c, "restored_from": b} for c, b in plan]
                return doc
            for cur, _ in plan:
                reads.catch_up(store, cur["id"])  # indexed to the old head before it moves
            with backup.read() as bconn:
                rows = {cur["id"]: entry_rows_txn(bconn, cur["id"]) for cur, _ in plan}

            def txn(conn: Any) -> list[dict[str, Any]]:
                for cur, _ in plan:  # attachments' bytes come back with their entries
                    blobs.carry_restored_txn(conn, backup, cur["id"], (
                        json.loads(r["content"]) for r in rows[cur["id"]]
                        if not r["deleted"]), now)
                done = [_restore_space_txn(conn, key, cur, b, rows[cur["id"]], now, taken_at)
                        for cur, b in plan]
                audit.record_hub_txn(conn, at=now, action="hub.restore", actor=ACTOR,
                                     details={"backup_taken_at": taken_at,
                                              "spaces": [d["space"] for d in done]})
                return done

            doc["restored"] = store.run_write(txn) if plan else []
            return doc
        finally:
            store.dispose()


LOST_REASON = "restore from backup (hub data lost)"


def restore_lost(settings: Settings, now: int, *, dry_run: bool = False) -> dict[str, Any]:
    """The hub's database *is* a backup: the data folder (or database) was lost and the
    backup put back in its place (docs/operations.md, "If the data folder is lost"). Every
    space's content as it is becomes a new epoch announced as a restore whose
    ``restored_from`` is the space's head in that backup, which is also where the old epoch
    ends: replicas that synced after the backup hold more than the hub, refuse it as a
    rollback until their member accepts the restore (``quire accept-restore``), then
    republish what they hold from after that point (replica/engine/restored.py)."""
    if migrate.current(settings.database_url) != migrate.alembic_head():
        raise BackupError("migration_required", "this hub's database is not at the schema "
                          f"head; run 'quire hub migrate --data {settings.data_dir}' first")
    key = HubKey.load(settings.key_path)
    store = Store(settings.database_url, pool_size=1)
    try:
        with store.read() as conn:
            if hub_state_txn(conn) is None:
                raise BackupError("not_initialized", "the hub's database holds no hub: put "
                                  "the backup in its place first (docs/operations.md)")
            ours = _heads(conn)
            taken_at = backup_taken_at_txn(conn)
        plan = [cur for cur in sorted(ours.values(), key=lambda c: c["name"])
                if not cur["deleted"]]
        kept = [dict(cur, why="deleted (restore it first to restore into it)")
                for cur in ours.values() if cur["deleted"]]
        doc: dict[str, Any] = {"dry_run": dry_run, "lost_data": True,
                               "backup": {"taken_at": taken_at}, "restored": [],
                               "kept": kept, "not_on_hub": []}
        point = {c["id"]: {"epoch": c["epoch"], "seq": c["seq"], "digest": c["digest"]}
                 for c in plan}
        if dry_run:
            doc["restored"] = [{"space": c["id"], "name": c["name"], "epoch": None,
                                "previous": c, "restored_from": point[c["id"]]}
                               for c in plan]
            return doc
        for cur in plan:
            reads.catch_up(store, cur["id"])
        with store.read() as conn:
            rows = {cur["id"]: entry_rows_txn(conn, cur["id"]) for cur in plan}

        def txn(conn: Any) -> list[dict[str, Any]]:
            done = [_restore_space_txn(conn, key, cur, cur, rows[cur["id"]], now, taken_at,
                                       reason=LOST_REASON) for cur in plan]
            forget_backup_mark_txn(conn)  # a database of record now, not a backup
            audit.record_hub_txn(conn, at=now, action="hub.restore", actor=ACTOR,
                                 details={"backup_taken_at": taken_at, "lost_data": True,
                                          "spaces": [d["space"] for d in done]})
            return done

        doc["restored"] = store.run_write(txn) if plan else []
        return doc
    finally:
        store.dispose()


def _restore_space_txn(conn: Any, key: HubKey, cur: dict[str, Any], b: dict[str, Any],
                       rows: list[dict[str, Any]], now: int, taken_at: int | None,
                       reason: str = REASON) -> dict[str, Any]:
    space = get_space_txn(conn, cur["id"], lock=True)
    assert space is not None
    epoch = new_id(now)
    replace_entries_txn(conn, space.id, [dict(r, seq=0, epoch=epoch) for r in rows])
    signed_state.rebuild_txn(conn, space.id)
    reads.index_restored_txn(conn, space.id, epoch, [
        (r["entry_id"], r["version"], json.loads(r["content"])) for r in rows
        if not r["deleted"]])
    recount_txn(conn, space.id)
    point = {"epoch": b["epoch"], "seq": b["seq"], "digest": b["digest"]}
    signed_state.epoch_statement_txn(conn, key, space, epoch, reason, now,
                                     restored_from=point)
    set_head_txn(conn, space.id, 0, genesis_digest(space.id, epoch), epoch=epoch)
    live = sum(1 for r in rows if not r["deleted"])
    details = {"previous": space.epoch, "previous_seq": space.head_seq, "epoch": epoch,
               "reason": reason, "restored_from": point, "entries": live,
               "backup_taken_at": taken_at}
    audit.record_space_txn(conn, space, at=now, action="space.restore", actor=ACTOR,
                           details=details)
    return {"space": space.id, "name": space.name, "epoch": epoch,
            "previous": {"epoch": space.epoch, "seq": space.head_seq},
            "restored_from": point, "entries": live}
