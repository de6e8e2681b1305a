"""The watcher's syncs of one space (``SpaceSyncer``): the same engine, lock and status
file as ``quire sync`` (replica/app/service.py), with the replica, client and store kept open
between syncs, plus two shortcuts a long-running process can afford:

- the hub-event fast path (``apply``): the changes a head event carried are verified and
  applied as a pull would, without a request;
- own-write recognition (``own_writes``): vault events caused by this replica's own writes
  are recognised from a few rows and stats, without scanning the vault.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from replica.app import service
from replica.machine.home import space_lock
from replica.store import store as st
from replica.watch import activity
from replica.watch.core import SyncResult
from shared.errors import QuireError

SERVED_WAIT_S = 60.0  # a served sync waits this long for the watcher's sync in flight


class SpaceSyncer:
    """Locked syncs of one space for its watcher, through the same engine and status file
    as ``quire sync`` (so ``quire status`` agrees). The replica, its hub client (one TLS
    context, one connection pool, one token refresher) and its store stay open between
    syncs: a sync after a head event then costs two requests and the vault work, nothing
    more. ``local_only``: scan the vault first and skip the hub when nothing local changed
    (our own vault writes wake the file watcher too)."""

    def __init__(self, home: Any, space: Any):
        self.home, self.space = home, space
        self._parts: tuple[Any, Any, Any] | None = None
        # path -> (size, mtime_ns) of a file the fast path wrote (None: removed), recorded
        # only when the file holds exactly what was journaled: its own events match it
        self._wrote: dict[str, tuple[int, int] | None] = {}
        # the watcher's thread and served syncs (replica/watch/server.py) share the open
        # replica, client and store: one of them at a time
        self.mutex = threading.RLock()
        # the store's last history row told about (replica/watch/activity.py): rows after
        # it are what the next sync pulled and pushed
        self._told_n: int | None = None
        self._me_key: Any = None  # hub.json's stat when ``_me_id`` was read
        self._me_id: str | None = None

    def _open(self) -> tuple[Any, Any, Any]:

        if self._parts is None:
            self._parts = service.open_replica(self.home, self.space)
            # idle connections (no transaction, no lock) kept while the watcher runs, for
            # its next transactions: no open and pragmas each, no folder fsync with each
            # first commit (replica/store/db.py), and no checkpoint of the WAL (fsyncs)
            # when the last one would close
            self._parts[2].engine.keep_open(4)
            if self._told_n is None:
                self._told_n = self._last_n(self._parts[2])
        return self._parts

    @staticmethod
    def _last_n(store: Any) -> int:
        with store.engine.connect() as conn:
            return int(conn.scalar("SELECT COALESCE(MAX(n), 0) FROM history"))

    def _lines(self, store: Any, report: Any) -> list[activity.Line]:
        """What the sync that just ended pulled, pushed and held, for people: the history
        rows it added (pages by name, who) and its report (conflicts, refusals, deletes held
        back). Never raises: a line is not worth a failed sync."""
        try:
            with store.engine.connect() as conn:
                rows = [r._asdict() for r in conn.execute(  # not the detail: the report's
                    "SELECT n, kind, entries, author, replica_id FROM history WHERE n > ?"
                    " ORDER BY n", (self._told_n or 0,))]
                # a report that describes its changes page by page (every pull and push)
                # names no page from the rows: which are deleted is not asked then
                touched = set() if report.changes else {
                    e for r in rows for e in activity.entry_ids(r)}
                deleted = _deleted_txn(conn, touched)
                names = st.get_meta_txn(conn, activity.PEOPLE)  # as `quire log` last asked
            if rows:
                self._told_n = int(rows[-1]["n"])
            return activity.sync_lines(rows, report.to_json(),
                                       replica_id=self.space.replica_id,
                                       me=self._me(), deleted=deleted,
                                       names=names if isinstance(names, dict) else None)
        except Exception:  # noqa: BLE001 - see the docstring
            import logging

            logging.getLogger("quire.watch").exception("could not describe the sync")
            return []

    def _me(self) -> str | None:
        """This machine's user id on the space's hub (hub.json, read again only when the
        file changed: a new login)."""
        hub_json = self.home.hub_dir(self.space.hub_id) / "hub.json"
        try:
            st_ = os.stat(hub_json)
            key: Any = (st_.st_mtime_ns, st_.st_size, st_.st_ino)
        except OSError:
            key = None
        if key is None or key != self._me_key:
            hub = self.home.hub(self.space.hub_id)
            self._me_key, self._me_id = key, (hub.user_id if hub else None)
        return self._me_id

    def open_store(self) -> Any:
        """The store the watcher keeps open (a served status reads it), or None before
        the first sync opened it."""
        parts = self._parts
        return parts[2] if parts is not None else None

    def run_served(self, home: Any, space: Any, progress: Any = service.NO_PROGRESS, *,
                   confirm_deletes: bool = False) -> tuple[Any, dict[str, Any]]:
        """``service.run_sync`` for a ``quire sync`` the watcher serves: the same steps,
        status file and result, on the open replica, after the watcher's sync in flight."""
        from replica.ipc import journal
        from replica.watch.server import NotServed

        # the journal first (a cookie round trip through the watcher's thread, which may be
        # in a sync holding the mutex): every event before this command is in it
        scope = journal.read(self.space)
        if not self.mutex.acquire(timeout=SERVED_WAIT_S):
            raise NotServed("busy")
        try:
            with space_lock(self.space):
                rep, _, store = self._open()
                try:
                    from replica.app.rejoin import ensure_current_replica

                    ensure_current_replica(space, home.hub(space.hub_id), rep)
                    rep.journal = scope
                    rep.confirm_deletes = confirm_deletes  # the watcher's own: never
                    report = rep.sync()
                    # its caller prints what it pulled and pushed: the watcher does not
                    self._told_n = self._last_n(store)
                except QuireError as e:
                    service.write_status(space, report=None, error=e, role=rep.role)
                    raise
                except Exception:
                    self.close()
                    raise
                finally:
                    rep.journal = None
                    rep.confirm_deletes = False
                service.write_status(space, report=report, error=None, role=rep.role)
                from replica.conflicts.report import report_after_sync

                report_after_sync(space, rep)  # never raises; retried next sync
                from replica.conflicts.siblings import after_sync

                after_sync(space.vault, rep.store)  # theirs next to ours; never raises
        finally:
            self.mutex.release()
        doc = service.status_doc(space, scan=False, store=store)  # the sync just scanned
        doc["scanned"] = doc["unpublished"]["scanned"] = True
        return report, doc

    def close(self) -> None:
        with self.mutex:
            self._close()

    def _close(self) -> None:
        if self._parts is not None:
            _, client, store = self._parts
            store.engine.keep_open(0)
            client.close()
            store.close()
            self._parts = None

    def apply(self, lines: list[dict[str, Any]]) -> SyncResult | None:
        with self.mutex:
            return self._apply(lines)

    def _apply(self, lines: list[dict[str, Any]]) -> SyncResult | None:
        """Apply changes that came with head events, as the pull of a full sync would:
        verified by the client's own ``changes`` checks (each batch parsed, its digest
        recomputed, chained onto this replica's head, up to the signed head the event
        carried) and applied by the engine's ``Puller.apply_page_txn`` (authors attested, the
        state root equal to the signed one), all in one store transaction, then written to
        the vault. None (the caller runs a full sync) when they do not start right after the
        head, or when anything local is pending: an outbox, dirty entries, held conflicts,
        journaled vault writes, or the replica holds a scope (a read rule or its chosen
        globs narrow it: whole batches are never applied to it). Raises ``HubUnverified`` when they do not verify, and
        ``StaleHead`` when the signed head is older than the freshness bound."""
        from replica.engine import scoped
        from replica.engine.report import SyncReport
        from replica.hubclient.client import parse_changes
        from replica.trust import scoped as trust_scoped

        with space_lock(self.space):
            rep, client, store = self._open()
            report = SyncReport()
            try:
                with store.tx() as conn:  # the checks and the apply: one transaction
                    head = st.head_txn(conn)
                    if head is None:
                        return None
                    lines = [c for c in lines if int(c["seq"]) > head.seq]
                    if not lines or lines[0]["seq"] != head.seq + 1:
                        return None  # a gap (or nothing new): only a pull can tell
                    if _local_pending_txn(conn):
                        return None
                    if scoped.held_scope_txn(conn) or st.get_meta_txn(conn, trust_scoped.ONLY):
                        return None  # whole batches are not this replica's (a scoped pull)
                    end = lines[-1].get("end_head")
                    page = parse_changes(iter([*lines, {"end": {"head": end}}]),
                                         verify_head=client.verified_head,
                                         space_id=self.space.space_id, epoch=head.epoch,
                                         after=head.seq, after_digest=head.digest)
                    assert page.signed is not None
                    check_fresh(page.signed, rep.clock())
                    rep.puller.apply_page_txn(conn, page, rep.puller.authors(conn), report)
                expected = {eid: content for eid, content, _prev in
                            store.pending_vault_writes()}
                waiting = rep.flush_vault()
                self._remember_writes(expected)
            except QuireError:
                raise  # nothing applied (HubUnverified: the full sync pulls and checks)
            except Exception:
                self.close()  # something unexpected: start from fresh objects next time
                raise
            service.write_status(self.space, report=None, error=None, role=None)
            last = page.changes[-1]
            return SyncResult({"epoch": head.epoch, "seq": last.seq, "digest": last.head},
                              0, len(report.held), retry_at=_retry_at(waiting),
                              lines=self._lines(store, report))

    def _remember_writes(self, expected: dict[str, str | None]) -> None:
        from replica.vault import markdown as md

        if len(self._wrote) > 10_000:
            self._wrote.clear()
        vault = Path(self.space.vault)
        for entry_id, content in expected.items():
            path = os.fspath(md.entry_path(vault, entry_id))
            self._wrote.pop(path, None)
            try:
                stat = os.lstat(path)
            except FileNotFoundError:
                if content is None:
                    self._wrote[path] = None
                continue
            if (content is not None and os.path.isfile(path) and not os.path.islink(path)
                    and stat.st_size == len(data := content.encode("utf-8"))
                    and Path(path).read_bytes() == data):
                self._wrote[path] = (stat.st_size, stat.st_mtime_ns)

    def _known_write(self, path: str) -> bool:
        if path not in self._wrote:
            return False
        want = self._wrote[path]
        try:
            stat = os.lstat(path)
        except FileNotFoundError:
            ours = want is None
        else:
            ours = want is not None and (stat.st_size, stat.st_mtime_ns) == want
        if not ours:  # the file moved on from what we wrote: forget it, so a later state
            del self._wrote[path]  # that happens to look like ours (a re-deletion) is seen
        return ours

    def own_writes(self, paths: list[str]) -> bool:
        with self.mutex:
            return self._own_writes(paths)

    def _own_writes(self, paths: list[str]) -> bool:
        """True when every path shows what the store recorded for it (the file this replica
        wrote, or no file for an entry it removed): a scan would find nothing to publish.
        Reads a few rows and stats a few files; never the whole vault."""
        if all(self._known_write(p) for p in paths):
            return True  # no database read at all

        _, _, store = self._open()
        vault = Path(self.space.vault)
        with store.engine.connect() as conn:
            if conn.scalar("SELECT 1 FROM vault_pending LIMIT 1"):
                return False  # a write is still to be carried out: let the sync see it
            for p in paths:
                try:
                    rel = Path(p).relative_to(vault).as_posix()
                except ValueError:
                    return False
                if not (_own_file_txn(conn, vault, p, rel)
                        or _own_folder_txn(conn, vault, p, rel)):
                    return False
        return True

    def __call__(self, local_only: bool, journal: dict[str, Any] | None = None) -> SyncResult:
        """One sync for the watcher's thread; ``journal`` (``Watcher.journal``): where the
        vault changed since the last scan (None: walk all of it)."""
        from replica.vault.journal_scan import Journal

        with self.mutex:
            with space_lock(self.space):
                rep = self._open()[0]
                rep.journal = Journal.from_json(journal)
                try:
                    return self._sync(local_only)
                finally:
                    rep.journal = None

    def _sync(self, local_only: bool) -> SyncResult:
        from replica.engine.report import SyncReport

        rep, _, store = self._open()
        try:
            scanned = None
            if local_only:
                rep.flush_vault()  # makes a new vault; refuses one that is gone
                rep.scan(scanned := SyncReport())
                if not store.dirty_count() and not store.outbox():
                    # what the scan decided to show (a conflict marker held again, a merge
                    # written back) is written now, or waits for its file to be quiet
                    waiting = rep.flush_vault()
                    return SyncResult(None, 0, len(store.conflicts()), skipped=True,
                                      problem_paths=_problem_paths(scanned),
                                      retry_at=_retry_at(waiting),
                                      lines=self._lines(store, scanned))
            try:  # the vault just scanned is not scanned again (one walk, not two)
                report = rep.sync(scanned)
            except QuireError as e:
                service.write_status(self.space, report=None, error=e, role=rep.role)
                raise
            service.write_status(self.space, report=report, error=None, role=rep.role)
            from replica.conflicts.report import report_after_sync

            report_after_sync(self.space, rep)  # never raises; retried next sync
            from replica.conflicts.siblings import after_sync

            after_sync(self.space.vault, rep.store)  # theirs next to ours; never raises
            head = store.head()
            with store.engine.connect() as conn:
                pending = st.dirty_ids_txn(conn)
            return SyncResult(head.to_json() if head else None, len(pending),
                              len(store.conflicts()), pending=pending,
                              problem_paths=_problem_paths(report),
                              retry_at=_retry_at(report.waiting),
                              lines=self._lines(store, report))
        except QuireError:
            raise
        except Exception:
            self.close()  # something unexpected: start from fresh objects next time
            raise


def _own_file_txn(conn: Any, vault: Path, p: str, rel: str) -> bool:
    """Does the file at ``p`` show what the store recorded (no file: none recorded)?"""
    from replica.vault import markdown as md

    entry_id, _problem = md.path_entry_id(rel)
    if entry_id is None:
        return False
    s = st.get_state_txn(conn, entry_id)
    try:
        stat = os.lstat(p)
    except FileNotFoundError:
        return s.file_hash is None  # else: removed by someone
    if not os.path.isfile(p) or os.path.islink(p) or s.file_hash is None:
        return False
    if (s.file_size, s.file_mtime_ns) == (stat.st_size, stat.st_mtime_ns):
        return True
    return md.file_hash(Path(p).read_bytes()) == s.file_hash


def _own_folder_txn(conn: Any, vault: Path, p: str, rel: str) -> bool:
    """A folder's own event that this replica's writes explain (the journal names folders:
    replica/vault/journal_scan.py): one made for the files written into it, each of them as the
    store recorded it. A removed path is never explained here (was it a folder, or a file
    that was a problem?): the scan looks."""
    from replica.vault.journal_scan import walked

    if os.path.islink(p) or not os.path.isdir(p):
        return False
    stack = [p]
    while stack:  # a folder moved in holds files of its own: not ours (at the first one)
        with os.scandir(stack.pop()) as it:
            for de in it:
                if not walked(de.name):
                    continue
                if de.is_dir(follow_symlinks=False):
                    stack.append(de.path)
                elif de.is_symlink() or not _own_file_txn(conn, vault, de.path,
                                                          f"{rel}/{de.path[len(p) + 1:]}"):
                    return False
    return True


def _deleted_txn(conn: Any, ids: set[str]) -> list[str]:
    """Those of ``ids`` deleted now (no synced entry, or a tombstone), from the covering
    index: no entry is read."""
    if not ids:
        return []
    todo = sorted(ids)
    live: set[str] = set()
    for i in range(0, len(todo), 500):
        part = todo[i:i + 500]
        live |= {r[0] for r in conn.execute(
            "SELECT id FROM entries INDEXED BY entries_cover WHERE synced_version IS NOT NULL"
            f" AND NOT synced_deleted AND id IN ({','.join('?' * len(part))})", tuple(part))}
    return [e for e in todo if e not in live]


def _retry_at(waiting: dict[str, int]) -> int | None:
    """When the first vault write that waits for its file to be quiet may be retried."""
    return min(waiting.values()) if waiting else None


def _problem_paths(report: Any) -> list[str]:
    return sorted({p.path for p in report.problems})


def _local_pending_txn(conn: Any) -> bool:
    """Anything local the store still has to publish or show: an outbox batch, a journaled
    vault write, a held conflict, a dirty entry."""

    tables = ("outbox", "vault_pending", "conflicts")
    any_row = conn.scalar(
        "SELECT " + " OR ".join(f"EXISTS (SELECT 1 FROM {t})" for t in tables))
    return bool(any_row or st.dirty_states_txn(conn))


def check_fresh(signed: Any, now_ms: int) -> None:
    """A signed head that came without our nonce (a head event) is trusted as current only
    while younger than ``QUIRE_HEAD_MAX_AGE`` seconds (default 600); older: ``stale_head``,
    and the full sync asks for a head signed over a nonce."""
    from shared.errors import StaleHead

    bound = int(os.environ.get("QUIRE_HEAD_MAX_AGE", "600")) * 1000
    if now_ms - signed.at > bound:
        raise StaleHead("the signed head is older than the freshness bound",
                        {"reason": "stale", "at": signed.at, "max_age_ms": bound})
