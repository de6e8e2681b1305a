"""The shortcuts a long-running watcher takes on every publication it applies (bench/
profiles.md, "Save to every vault", second round), each against what it must not give up:

- device attestations are signature-checked once per process (``replica/trust/verify.py``
  ``_attestation``): a changed attestation, or the same one under other keys, is checked
  anew and refused when it does not verify;
- the store keeps idle SQLite connections (``Database.keep_open``): a kept connection holds
  no lock and no snapshot between uses (not even under a cursor left half read), is never
  reused after a failure, and its commits are as durable as a new one's
  (``synchronous=FULL`` on every commit);
- the status files are written without an fsync: a status file a power cut left empty or
  cut short reads as no status, never as an error.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from replica.app.service import read_saved_status
from replica.machine.home import SpaceConfig, write_json
from replica.store.db import Database
from replica.trust import verify
from shared import signed
from shared.errors import HubUnverified
from shared.ids import new_id
from shared.signing import new_private_key, public_b64

KEY = new_private_key()
PUB = public_b64(KEY.public_key())
OTHER = new_private_key()
DEVICE = new_id()
USER = new_id()


def _attestation(key=KEY, **over):
    body = signed.device_body(device=DEVICE, user=USER, public_key=PUB, valid_from=1,
                              revoked_at=None, at=2)
    return signed.sign_statement(key, signed.DEVICE_DOMAIN, dict(body, **over))


def _authors(keys, wire):
    return verify.Authors(lambda: keys, lambda: [], wire)


def test_a_remembered_attestation_does_not_pass_a_changed_one():
    good = _attestation()
    assert _authors(PUB, [good]).by_id[DEVICE].revoked_at is None  # verified, remembered
    assert _authors(PUB, [good]).by_id[DEVICE].revoked_at is None  # from memory
    # the same signature over another body: each field, and a field's type, is checked
    for tampered in (dict(good, revoked_at=5), dict(good, public_key=public_b64(
            OTHER.public_key())), dict(good, valid_from=True), dict(good, at=2.0)):
        with pytest.raises(HubUnverified):
            _authors(PUB, [tampered])


def test_a_remembered_attestation_is_checked_again_under_other_keys():
    good = _attestation()
    _authors(PUB, [good])
    with pytest.raises(HubUnverified):  # a pin that does not hold the signing key
        _authors(public_b64(OTHER.public_key()), [good])
    assert _authors((public_b64(OTHER.public_key()), PUB), [good]).by_id[DEVICE]


def test_an_attestation_that_failed_is_never_remembered():
    bad = _attestation(key=OTHER)
    for _ in range(2):
        with pytest.raises(HubUnverified):
            _authors(PUB, [bad])
    with pytest.raises(HubUnverified):  # not JSON data at all: checked, refused
        _authors(PUB, [{1: "x", "device": DEVICE}])


def _db(path: Path) -> Database:
    return Database(path, ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
                           "PRAGMA busy_timeout=100"))


def _kept(path: Path) -> tuple[Database, sqlite3.Connection]:
    """A store file with table ``t``, two idle connections kept; the one that made it."""
    db = _db(path)
    db.keep_open(2)
    with db.begin() as conn:
        conn.execute("CREATE TABLE t (a)")
        return db, conn.connection


def test_a_kept_connection_is_reused_and_holds_no_lock_between_uses(tmp_path: Path):
    db, first = _kept(tmp_path / "s.db")
    with db.begin() as conn:
        assert conn.connection is first  # kept, not reopened
        conn.execute("INSERT INTO t VALUES (1)")
    # another process (here: a connection of its own) writes at once: no lock is held,
    # and the kept connection then reads its commit (no snapshot kept either)
    other = sqlite3.connect(tmp_path / "s.db", timeout=0.1, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO t VALUES (2)")
    other.execute("COMMIT")
    with db.connect() as conn:
        assert conn.connection is first
        assert conn.column("SELECT a FROM t ORDER BY a") == [1, 2]
    other.close()
    db.keep_open(0)
    with db.connect() as conn:
        assert conn.connection is not first


def test_a_half_read_cursor_keeps_no_snapshot_on_a_kept_connection(tmp_path: Path):
    """A statement not read to its end holds a read snapshot: on a kept connection the next
    use would read old rows and could not write (database is locked). Every cursor a use
    handed out is closed before its connection is kept."""
    db, _ = _kept(tmp_path / "s.db")
    with db.begin() as conn:
        conn.execute("INSERT INTO t VALUES (1), (2)")
    left = []
    with db.connect() as conn:
        left.append(conn.execute("SELECT a FROM t"))
        left[0].first()  # one row of two, and the cursor still referenced
    other = sqlite3.connect(tmp_path / "s.db", timeout=0.1, isolation_level=None)
    other.execute("INSERT INTO t VALUES (3)")
    other.close()
    with db.begin() as conn:
        assert conn.scalar("SELECT count(*) FROM t") == 3  # the other's commit is seen
        conn.execute("INSERT INTO t VALUES (4)")  # and this one can write
    with pytest.raises(sqlite3.ProgrammingError):
        left[0].first()  # closed with its use


def test_a_connection_is_not_reused_after_a_failure(tmp_path: Path):
    db, kept = _kept(tmp_path / "s.db")
    with pytest.raises(RuntimeError), db.begin() as conn:
        assert conn.connection is kept
        conn.execute("INSERT INTO t VALUES (1)")
        raise RuntimeError("mid-transaction")
    with db.connect() as conn:
        assert conn.connection is not kept  # closed, rolled back
        assert conn.column("SELECT a FROM t") == []
    with pytest.raises(sqlite3.ProgrammingError):
        kept.execute("SELECT 1")


def test_a_kept_connection_syncs_every_commit(tmp_path: Path):
    """synchronous is a per-connection setting: a kept connection keeps FULL (each commit
    fsyncs the WAL), also after a commit that asked for none."""
    db = _db(tmp_path / "s.db")
    db.keep_open(1)
    for durable in (True, False, True, True):
        with db.begin(durable=durable) as conn:  # durable=False: this commit only
            assert conn.scalar("PRAGMA synchronous") == (2 if durable else 1)


def _space(tmp_path: Path) -> SpaceConfig:
    return SpaceConfig(new_id(), "s", new_id(), new_id(), tmp_path / "vault", None,
                       tmp_path / "space")


@pytest.mark.parametrize("left", [b"", b'{"last_sync": 1', b"[1]"])
def test_a_status_file_a_power_cut_left_behind_reads_as_no_status(tmp_path: Path, left):
    space = _space(tmp_path)
    write_json(space.status_path, {"last_sync": 1}, durable=False)
    assert read_saved_status(space) == {"last_sync": 1}
    space.status_path.write_bytes(left)
    assert read_saved_status(space) == {}


def test_the_kept_status_is_read_again_once_another_writer_replaced_the_file(tmp_path: Path):
    """``read_saved_status`` keeps what this process wrote or read, by the file's stat: a
    watcher no longer parses its own write back at every publication; a write by another
    process (a ``quire sync`` beside the watcher) is a new file, read again."""
    from replica.app.service import write_status

    space = _space(tmp_path)
    write_status(space, report=None, error=None, role="editor")
    first = read_saved_status(space)
    assert first["role"] == "editor" and first["last_error"] is None
    first["role"] = "changed by the caller"  # a copy: the kept document is not touched
    assert read_saved_status(space)["role"] == "editor"
    write_json(space.status_path, dict(first, role="viewer"), durable=False)  # another writer
    assert read_saved_status(space)["role"] == "viewer"
    space.status_path.unlink()
    assert read_saved_status(space) == {}


def test_a_sync_shares_two_connections_and_closing_its_store_closes_them(tmp_path: Path):
    """``run_sync`` keeps two connections for the uses of one command (a no-op sync opened
    ~25, each closing one checkpointed the WAL); ``Store.close`` closes them, and the store
    then opens one a use as before (nothing stays open after the command)."""
    from replica.store.store import Store

    store = Store(tmp_path / "store.db")
    store.engine.keep_open(2)
    with store.engine.connect() as conn:
        first = conn.connection
    with store.tx() as conn:
        assert conn.connection is first
    store.close()
    assert not store.engine._idle
    with pytest.raises(sqlite3.ProgrammingError):
        first.execute("SELECT 1")
    with store.engine.connect() as conn:
        assert conn.connection is not first
    assert not store.engine._idle
