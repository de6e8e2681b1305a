"""`quire admin purge`, end to end with real hub processes (SQLite and PostgreSQL) and the
real CLI: a page holding a unique string is published and pulled by two replicas; after the
purge and a sync the string is in no byte of the hub's storage (SQLite: every file of the
data folder, main database and -wal included; PostgreSQL: ``pg_dump`` of the database) and
in no byte of either replica's home or vault. A third replica, offline with an unpublished
edit of the page, gets it held as a conflict and does not republish it. A non-admin's purge
is refused and a dry run changes nothing.

The attack each check stops: without the rewrite the string stays in old batches and the
read index; without the compaction it stays in free pages and the WAL; without the signed
list of purged ids a replica keeps its copy (an epoch bump alone leaves it in the vault)."""

from __future__ import annotations

import json
import os
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

pytestmark = pytest.mark.e2e

Dump = Callable[[], bytes]


def _bytes_under(*roots: Path) -> bytes:
    """Every file under ``roots``, read as bytes (SQLite files, -wal, -shm, keys, logs…)."""
    return b"".join(p.read_bytes() for root in roots for p in sorted(root.rglob("*"))
                    if p.is_file())


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
