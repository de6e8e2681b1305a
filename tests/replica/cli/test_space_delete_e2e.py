"""Deleting a space, end to end: a real hub process behind a proxy that can lie
(tests/kit/hostile_proxy.py), the real CLI, real SQLite files.

- delete: ``--dry-run`` reports the impact and changes nothing; then publications and pulls
  are refused with ``space_deleted`` (exit 5), every replica keeps its vault files, its
  store and its unpublished edits; a running ``quire watch`` reports the space deleted and
  stops; restore brings the space back unchanged and the kept edits publish;
- the attack: a proxy answers ``space_deleted`` for a space that is not deleted (no
  statement, a garbled one, a real one of another space): the replica refuses it
  (``hub_unverified``), changes nothing, and its watcher keeps watching;
- retention: ``quire hub gc`` with a retention of 0 days purges the deleted space's rows
  from the hub database; the replica still keeps its files.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from replica.app.service import status_doc
from replica.hubclient.client import HubClient
from replica.machine.home import Home
from replica.vault import markdown as md
from shared.entry import Entry
from tests.kit.cli import device_auth, qjson, quire
from tests.kit.hostile_proxy import proxied_hub
from tests.kit.watcher import HUB_ENV, WatchProc, wait_for

pytestmark = pytest.mark.e2e


class M:
    def __init__(self, name: str, home: Path, vault: Path):
        self.name, self.home, self.vault = name, home, vault

    def write(self, eid: str, body: str) -> None:
        p = md.entry_path(self.vault, eid)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(md.render(Entry(id=eid, title=eid, body=body)))

    def sync(self) -> Any:
        return quire(self.home, "sync", "--json", check=False)

    def files(self) -> dict[str, bytes]:
        return {p.relative_to(self.vault).as_posix(): p.read_bytes()
                for p in sorted(self.vault.rglob("*.md"))}

    def store(self) -> dict[str, Any]:
        doc = status_doc(Home(self.home).spaces()[0], scan=False)
        return {"digest": doc["store_digest"], "head": doc["head"]}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data = tmp_path_factory.mktemp("hub")
    with proxied_hub(data, HUB_ENV) as (proxy, code):
        owner = tmp_path_factory.mktemp("owner")
        qjson(owner, "join", proxy.url, "--invite", code, "--device", "owner")
        yield {"proxy": proxy, "owner": owner, "data": data,
               "root": tmp_path_factory.mktemp("members")}


_n = 0


def _space(site: dict[str, Any], *names: str) -> tuple[str, list[M]]:
    global _n
    _n += 1
    space = f"d{_n}"
    qjson(site["owner"], "admin", "space", "create", space)
    out = []
    for who in names:
        # the invite in-process with the owner's credential (the CLI verb is covered
        # elsewhere; each CLI start costs ~0.5 s of imports, more on a loaded machine)
        h = Home(site["owner"]).hubs()[0]
        with HubClient(h.url, auth=device_auth(h), hub_key=h.public_key) as c:
            inv = c.create_invite(space, "editor")["code"]
        m = M(who, site["root"] / space / who / "home", site["root"] / space / who / "vault")
        qjson(m.home, "join", site["proxy"].url, "--invite", inv, "--vault", str(m.vault),
              "--device", who)
        out.append(m)
    return space, out


def _error(p: Any) -> dict[str, Any]:
    return json.loads(p.stdout)["error"]


def _hub_audit(site: dict[str, Any], *actions: str) -> dict[str, set[str]]:
    """The spaces named by the hub chain's events of each action (the owner's export)."""
    lines = quire(site["owner"], "admin", "audit", "--json").stdout.splitlines()
    events = [json.loads(x) for x in lines if x.strip().startswith("{")]
    return {a: {e["details"].get("space") for e in events if e.get("action") == a}
            for a in actions}


def test_delete_refuses_keeps_files_stops_the_watcher_and_restore_brings_it_back(
        site: dict[str, Any]) -> None:
    space, (ann, bob) = _space(site, "ann", "bob")
    ann.write("page/a", "a1\n")
    assert ann.sync().returncode == 0
    assert bob.sync().returncode == 0

    # the preview: the impact, nothing changed
    pre = qjson(site["owner"], "admin", "space", "delete", space, "--dry-run")
    assert pre["dry_run"] is True and pre["impact"] == {
        "members": 3, "replicas": 2, "entries": 1, "batches": 1}
    assert bob.sync().returncode == 0
    # a member, even an editor, may not delete it
    p = quire(ann.home, "admin", "space", "delete", space, "--json", check=False)
    assert p.returncode != 0 and _error(p)["code"] == "forbidden"

    watch = WatchProc(ann)  # type: ignore[arg-type]
    try:
        watch.wait_ready()
        bob.write("page/b", "bob's unpublished edit\n")
        before = {m.name: (m.files(), m.store()) for m in (ann, bob)}
        done = qjson(site["owner"], "admin", "space", "delete", space)
        assert done["dry_run"] is False and done["purge_after"] > done["deleted_at"]

        # the watcher reports the space deleted and stops; nothing local changed
        wait_for(lambda: watch.proc.poll() is not None, why=lambda: (
            f"watcher still running: {watch.status()}\n{watch.log.read_text()[-2000:]}"))
        st = watch.status()
        assert st["state"] == "deleted" and st["last_error"]["code"] == "space_deleted"
    finally:
        watch.stop()
    for m in (ann, bob):
        p = m.sync()  # publications (bob's edit) and pulls are refused, with the code
        assert p.returncode == 5, p.stdout
        assert _error(p)["code"] == "space_deleted"
        assert (m.files(), m.store()) == before[m.name]
        s = status_doc(Home(m.home).spaces()[0], scan=False)  # what `quire status` says
        assert s["state"] == "suspended" and s["suspended"]["reason"] == "space_deleted"
    assert bob.files()["page/b.md"]  # the unpublished edit is kept

    # restore: the preview changes nothing; then the space is back, unchanged
    assert qjson(site["owner"], "admin", "space", "restore", space, "--dry-run")["dry_run"]
    assert ann.sync().returncode == 5
    qjson(site["owner"], "admin", "space", "restore", space)
    assert bob.sync().returncode == 0  # bob's kept edit publishes
    assert ann.sync().returncode == 0
    assert set(ann.files()) == {"page/a.md", "page/b.md"}
    assert status_doc(Home(ann.home).spaces()[0])["state"] == "ok"
    audited = _hub_audit(site, "space.delete", "space.restore")
    assert done["space"] in audited["space.delete"] & audited["space.restore"]


def _forged(statement: Any) -> Any:
    details = {"space": "x", "deleted_at": 1, "purge_after": 2}
    if statement is not None:
        details["statement"] = statement

    def answer(req: Any, fwd: Any) -> httpx2.Response:
        return httpx2.Response(410, json={"error": {
            "code": "space_deleted", "message": "space deleted", "details": details}})
    return answer


def test_a_forged_space_deleted_changes_nothing_and_stops_nothing(
        site: dict[str, Any]) -> None:
    """The attack: the proxy (no hub key) says the space is deleted. Without the
    signature check the replica would take it: its sync would stop with space_deleted and
    its watcher would stop watching."""
    space, (ann,) = _space(site, "ann")
    other, _ = _space(site)
    ann.write("page/a", "a1\n")
    assert ann.sync().returncode == 0
    # a real, hub-signed statement, of another space
    qjson(site["owner"], "admin", "space", "delete", other)
    real = _statement_of(site, other)
    qjson(site["owner"], "admin", "space", "restore", other)
    garbled = dict(real, signature="A" * 86)
    proxy = site["proxy"]
    proxy.target = Home(ann.home).spaces()[0].replica_id
    ann.write("page/b", "unpublished\n")
    before = (ann.files(), ann.store())
    try:
        for statement in (None, garbled, dict(real), dict(real, space="z" * 26)):
            proxy.hostile.hooks.clear()
            proxy.hostile.intercept("head", _forged(statement))
            p = ann.sync()
            assert p.returncode == 6, p.stdout  # unverified, not "deleted"
            assert _error(p)["code"] == "hub_unverified"
            assert (ann.files(), ann.store()) == before
        watch = WatchProc(ann)  # type: ignore[arg-type]
        try:
            wait_for(lambda: watch.status().get("last_error", {}) and
                     watch.status()["last_error"].get("code") == "hub_unverified",
                     why=lambda: f"{watch.status()}\n{watch.log.read_text()[-2000:]}")
            assert watch.proc.poll() is None and watch.status()["state"] != "deleted"
            proxy.hostile.hooks.clear()  # honest again: the watcher publishes the edit
            wait_for(lambda: watch.status().get("state") == "idle"
                     and watch.status().get("outbox") == 0
                     and not watch.status().get("pending"),
                     why=lambda: f"{watch.status()}\n{watch.log.read_text()[-2000:]}")
        finally:
            watch.stop()
    finally:
        proxy.hostile.hooks.clear()
        proxy.target = None
    assert ann.files() == before[0]
    assert status_doc(Home(ann.home).spaces()[0])["state"] == "ok"


def _statement_of(site: dict[str, Any], space: str) -> dict[str, Any]:
    """The hub-signed deletion statement a deleted space's refusal carries (asked by the
    owner, an admin of every space)."""
    p = quire(site["owner"], "admin", "space", "show", space, "--json", check=False)
    err = _error(p)
    assert err["code"] == "space_deleted"
    return err["details"]["statement"]


def test_retention_purge_removes_the_data_and_the_replica_keeps_its_files(
        site: dict[str, Any]) -> None:
    space, (ann,) = _space(site, "ann")
    ann.write("page/a", "purge-me-7f3a\n")
    assert ann.sync().returncode == 0
    space_id = Home(ann.home).spaces()[0].space_id
    gc = qjson(None, "hub", "gc", "--data", str(site["data"]))
    assert space_id not in {d["space"] for d in gc["purged"]}  # not deleted: kept
    qjson(site["owner"], "admin", "space", "delete", space)
    kept = qjson(None, "hub", "gc", "--data", str(site["data"]))  # 30 days: not yet
    assert space_id not in {d["space"] for d in kept["purged"]}
    files = ann.files()
    gc = qjson(None, "hub", "gc", "--data", str(site["data"]),
               env={"QUIRE_HUB_SPACE_RETENTION_DAYS": "0"})
    assert space_id in {d["space"] for d in gc["purged"]}
    db = sqlite3.connect(site["data"] / "hub.db")
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = "
                                           "'table' AND name NOT LIKE 'sqlite_%'")]
        left = {t: n for t in tables
                if "space_id" in [c[1] for c in db.execute(f"PRAGMA table_info({t})")]
                and (n := db.execute(f"SELECT count(*) FROM {t} WHERE space_id = ?",
                                     (space_id,)).fetchone()[0])}
        assert left == {}
        assert db.execute("SELECT count(*) FROM spaces WHERE id = ?",
                          (space_id,)).fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM audit WHERE chain = ?",
                          (space_id,)).fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM entry_text WHERE body LIKE "
                          "'%purge-me-7f3a%'").fetchone()[0] == 0
    finally:
        db.close()
    assert space_id in _hub_audit(site, "space.purge")["space.purge"]
    p = ann.sync()
    assert p.returncode == 5 and _error(p)["code"] == "not_found"
    assert ann.files() == files
