"""`quire admin purge`, end to end with real hub processes (SQLite and PostgreSQL) and the
real CLI: a page holding a unique string is published and pulled by two replicas; after the
purge and a sync the string is in no byte of the hub's storage (SQLite: every file of the
data folder, main database and -wal included; PostgreSQL: ``pg_dump`` of the database) and
in no byte of either replica's home or vault. A third replica, offline with an unpublished
edit of the page, gets it held as a conflict and does not republish it. A non-admin's purge
is refused and a dry run changes nothing.

The attack each check stops: without the rewrite the string stays in old batches and the
read index; without the compaction it stays in free pages and the WAL; without the signed
list of purged ids a replica keeps its copy (an epoch bump alone leaves it in the vault).

The compaction shows only where deleted rows keep their bytes: Debian's SQLite zeroes them
(``secure_delete``) and a CLI process drops its WAL when it exits, so the replica half is
checked again on a running ``quire watch`` whose SQLite keeps deleted bytes
(``secure_delete`` off) and whose store stays open, WAL and all."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from replica.hubclient.client import HubClient
from replica.machine.home import Home
from shared.entry import make_entry
from shared.errors import NotFound
from tests.kit.cli import QUIRE, CliMember, CliTeam, FreshHub, device_auth, qjson
from tests.kit.host import REPO
from tests.kit.hubproc import init_hub, serve_hub
from tests.kit.pg import pg_database, require_pg
from tests.kit.watcher import WatchProc, wait_for

pytestmark = pytest.mark.e2e

Dump = Callable[[], bytes]


def _bytes_under(*roots: Path) -> bytes:
    """Every file under ``roots``, read as bytes (SQLite files, -wal, -shm, keys, logs…)."""
    return b"".join(p.read_bytes() for root in roots for p in sorted(root.rglob("*"))
                    if p.is_file())


def _holding(needle: str, *roots: Path) -> list[str]:
    """The files under ``roots`` whose bytes hold ``needle`` (a failure names them)."""
    return [str(p) for root in roots for p in sorted(root.rglob("*"))
            if p.is_file() and needle.encode() in p.read_bytes()]


def _pg_dump(url: str) -> bytes:
    return subprocess.run(["pg_dump", "--no-owner", url], check=True, capture_output=True,
                          timeout=60).stdout


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[FreshHub, Path, Dump]]:
    """(hub, owner home, everything the hub stores as bytes) for one database backend."""
    if request.param == "sqlite":
        hub, owner = request.getfixturevalue("hub"), request.getfixturevalue("owner")
        yield hub, owner, lambda: _bytes_under(hub.data)
        return
    require_pg()
    data = tmp_path_factory.mktemp("pghub")
    with pg_database() as db:
        code = init_hub(data, db)
        proc = serve_hub(data, db=db)
        try:
            hub = FreshHub(proc.url, data, code, proc.proc)
            owner = tmp_path_factory.mktemp("pgowner")
            qjson(owner, "join", hub.url, "--invite", code, "--device", "owner")
            yield hub, owner, lambda: _pg_dump(db) + _bytes_under(data)
        finally:
            proc.stop()


def _owner_client(owner: Path) -> HubClient:
    h = Home(owner).hubs()[0]
    return HubClient(h.url, auth=device_auth(h), hub_key=h.public_key)


def _page(body: str) -> object:
    return make_entry({"id": "page/leak", "title": "Deploy notes", "body": body})


def _run_all(*calls: tuple[Path, list[str]]) -> list[tuple[int, dict[str, Any]]]:
    """``quire ARGS --json`` for several homes at once (separate processes, the real CLI):
    (exit code, JSON document) of each, in order."""
    procs = [subprocess.Popen([*QUIRE, *args, "--json"], cwd=REPO, text=True,
                              env=dict(os.environ, QUIRE_HOME=str(home)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for home, args in calls]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        assert stdout, stderr
        out.append((p.returncode, json.loads(stdout)))
    return out


def _sync_all(*members: CliMember) -> list[dict[str, Any]]:
    """``quire sync`` on several machines at once."""
    out = _run_all(*[(m.home, ["sync"]) for m in members])
    assert all(code in (0, 3) for code, _doc in out), out
    return [doc for _code, doc in out]


def _head(m: CliMember, space: str) -> tuple[str, int]:
    with m.client() as c:
        h = c.head(space)
    return h["epoch"], h["seq"]


def test_purged_string_is_gone_from_hub_and_replicas(backend, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    hub, owner, hub_bytes = backend
    team = CliTeam(hub, owner, tmp_path, f"purge{uuid.uuid4().hex[:8]}")
    space = team.space["name"]
    canary = f"purge-canary-{uuid.uuid4().hex[:8]}-lantern-orchard"
    alice, bob, carol = team.members("alice", "bob", "carol")
    alice.write(_page(f"Deploy with care.\nThe marker is {canary} here.\n"))
    alice.write(make_entry({"id": "page/keep", "title": "Keep", "body": "stays\n"}))
    alice.sync()
    alice.write(_page(f"Deploy with care, twice.\nThe marker is {canary} here.\n"))
    alice.sync()  # two batches hold it: both are rewritten
    _sync_all(bob, carol)
    for m in (bob, carol):
        assert canary in m.read("page/leak").body
    assert canary.encode() in hub_bytes()  # the check below can see it when it is there
    # carol, offline from here on, edits the page and keeps the string in her edit
    carol.write(_page(f"Deploy with care.\nThe marker is {canary} here.\ncarol's note\n"))

    # at once: an editor's purge, refused with a clear code, and the admin's dry run, what
    # would go; neither changes anything
    before = _head(alice, team.space["id"])
    purge = ["admin", "purge", space, "page/leak", "--reason", "leak"]
    (code, refused), (_, dry) = _run_all((alice.home, purge), (owner, [*purge, "--dry-run"]))
    assert code == 5 and refused["error"]["code"] == "forbidden"
    assert dry["dry_run"] is True and dry["epoch"] is None
    assert dry["entries"] == [{"id": "page/leak", "live": True}]
    assert dry["batches_touched"] == 2
    assert {r["device_name"] for r in dry["replicas_affected"]} == {"alice", "bob", "carol"}
    assert _head(alice, team.space["id"]) == before
    assert canary.encode() in hub_bytes()
    # an id the space never held: not_found, nothing changes (in-process: the CLI's
    # error path is the refusal's above)
    with _owner_client(owner) as c, pytest.raises(NotFound) as e:
        c.purge(team.space["id"], ["page/never"], "x")
    assert e.value.details["entries"] == ["page/never"]
    assert _head(alice, team.space["id"]) == before

    done = qjson(owner, "admin", "purge", space, "page/leak", "--reason", "leaked marker")
    assert done["epoch"] not in (None, before[0]) and done["batches_touched"] == 2
    assert canary.encode() not in hub_bytes()

    for m, doc in zip((alice, bob), _sync_all(alice, bob), strict=True):
        assert canary.encode() not in _bytes_under(m.home, m.vault), m.name
        assert m.read("page/leak") is None and m.read("page/keep").body == "stays\n"
        assert doc["sync"]["purged"] == [{"id": "page/leak", "reason": "leaked marker",
                                          "held": False}]
    with _owner_client(owner) as c:
        events = [ev for ev in c.audit(team.space["id"], 0) if ev["action"] == "purge"]
    assert events[-1]["details"]["entries"] == ["page/leak"]
    assert events[-1]["details"]["reason"] == "leaked marker"
    assert canary not in json.dumps(events)

    # carol comes back: her edit is held, not republished (alice publishes meanwhile: the
    # space works on in its new epoch)
    alice.write(make_entry({"id": "page/after", "title": "After", "body": "new\n"}))
    r, after = (doc["sync"] for doc in _sync_all(carol, alice))
    assert r["purged"] == [{"id": "page/leak", "reason": "leaked marker", "held": True}]
    assert "page/leak" in r["held"] and r["pushed"] == 0
    assert canary in carol.read("page/leak").body and "carol's note" in \
        carol.read("page/leak").body
    assert carol.local_status()["conflicts"][0]["entry"] == "page/leak"
    assert canary.encode() not in hub_bytes()
    assert after["pushed"] == 1


# every SQLite connection of the watcher's process leaves deleted bytes in place, as a build
# without SQLITE_SECURE_DELETE does (Debian's zeroes them)
KEEP_DELETED_BYTES = """import sqlite3
_connect = sqlite3.connect
def _keeping(*args, **kwargs):
    conn = _connect(*args, **kwargs)
    conn.execute("PRAGMA secure_delete=OFF")
    return conn
sqlite3.connect = _keeping
"""


def test_purged_string_leaves_the_store_of_a_running_watcher(team: CliTeam) -> None:
    """The attack: a purge only deletes the rows; without the compaction their bytes stay
    in the store's free pages and in the WAL of a watcher that never exits."""
    canary = f"purge-canary-{uuid.uuid4().hex[:8]}-watched-harbour"
    alice, bob = team.members("alice", "bob")
    w = WatchProc(bob, prelude=KEEP_DELETED_BYTES)
    try:
        w.wait_ready()
        for i in range(3):  # three versions: old rows and WAL frames hold the string too
            alice.write(_page(f"Deploy with care ({i}).\nThe marker is {canary} here.\n"))
            alice.sync()
            wait_for(lambda i=i: (e := bob.read("page/leak")) is not None
                     and f"({i})" in e.body, why=lambda: w.log.read_text()[-2000:])
        alice.write(make_entry({"id": "page/keep", "title": "Keep", "body": "stays\n"}))
        alice.sync()
        wait_for(lambda: bob.read("page/keep") is not None)
        # the string into the main file too (the watcher holds no snapshot between uses),
        # where its deleted rows keep their bytes until VACUUM rewrites the file
        store = Path(Home(bob.home).spaces()[0].dir) / "store.sqlite"

        def checkpointed() -> bool:  # not busy: no write of the watcher's under way
            with contextlib.closing(sqlite3.connect(store)) as conn:
                return conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0

        wait_for(checkpointed)
        assert str(store) in _holding(canary, bob.home)  # the check can see it

        qjson(team.owner, "admin", "purge", team.space["name"], "page/leak", "--reason", "x")
        wait_for(lambda: bob.read("page/leak") is None and w.status().get("state") == "idle",
                 why=lambda: f"{w.status()}\n{w.log.read_text()[-2000:]}")
        assert w.proc.poll() is None  # still running: its store open, its WAL kept
        assert bob.read("page/keep").body == "stays\n"
        assert _holding(canary, bob.home, bob.vault) == []
    finally:
        w.stop()
