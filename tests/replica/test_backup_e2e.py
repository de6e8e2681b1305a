"""Backup and restore (issue 14 item 4), end to end: a real ``quire hub serve`` process, the
real ``quire`` CLI, real SQLite files.

One story on one hub: four members publish while ``quire hub backup`` copies the database;
more is published (a page deleted, one edited) and a viewer's device is revoked after the
backup; bad restores are refused and change nothing; the restore, with the hub stopped,
puts the backup's content into a new signed epoch; the revoked device stays revoked, the
audit chain verifies and shows the restore, and the replicas' next syncs republish every
post-backup change exactly once, with every vault file kept.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hub.backup import inspect
from hub.signed_state import verify_space_txn
from hub.store import migrate
from hub.store import queries as q
from hub.store.db import Store
from replica.home import Home
from tests import kit
from tests.replica.conftest import qjson, quire
from tests.replica.test_audit_e2e import Site, _page, _site

pytestmark = pytest.mark.e2e

NAMES = ("ann", "ben", "cat", "dan")
DEADLINE = 90.0


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    s = _site(tmp_path_factory.mktemp("backup"))
    yield s
    s.hub.stop()


def _fail(home: Path | None, *args: str) -> dict[str, Any]:
    p = quire(home, *args, "--json", check=False)
    assert p.returncode != 0, (p.stdout, p.stderr)
    return json.loads(p.stdout)["error"]


def _hub_state(data: Path) -> tuple[Any, ...]:
    """What a refused restore must leave alone: heads, entries, audit, devices."""
    conn = sqlite3.connect(f"file:{data / 'hub.db'}?mode=ro", uri=True)
    try:
        return tuple(conn.execute(sql).fetchall() for sql in (
            "SELECT id, epoch, head_seq, head_digest, audit_seq FROM spaces ORDER BY id",
            "SELECT space_id, entry_id, version FROM entries ORDER BY 1, 2",
            "SELECT COUNT(*), MAX(digest) FROM audit",
            "SELECT id, revoked_at FROM devices ORDER BY id"))
    finally:
        conn.close()


def _hub_entries(site: Site, space: str) -> dict[str, Any]:
    with site.client(site.owner) as c:
        lines = c.snapshot(space)
        next(lines)
        return {e.id: e for e, _seq in lines}  # type: ignore[misc]


def _publishers(homes: dict[str, tuple[Path, Path]], stop: threading.Event,
                rounds: dict[str, int], errors: list[str]) -> list[threading.Thread]:
    def run(name: str) -> None:
        home, vault = homes[name]
        while not stop.is_set():
            n = rounds[name]
            _page(vault, f"page/{name}/{n}", f"{name} round {n}\n")
            p = quire(home, "sync", "--json", check=False)
            if p.returncode != 0:
                errors.append(p.stdout + p.stderr)
                return
            rounds[name] = n + 1

    return [threading.Thread(target=run, args=(n,), daemon=True) for n in NAMES]


def _wait(cond: Any, what: str) -> None:
    import time

    deadline = time.monotonic() + DEADLINE
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_backup_while_publishing_then_restore_keeps_authorization_and_republishes(
        site: Site, tmp_path: Path) -> None:
    space = site.space("bk")
    homes = {n: site.join(space, n) for n in NAMES}
    eve, _ = site.join(space, "eve", role="viewer")
    for home, vault in homes.values():
        _page(vault, f"page/{home.parent.name}/base", "before the backup\n")
        qjson(home, "sync")

    # four clients publish while the backup is taken
    stop, errors = threading.Event(), []
    rounds = dict.fromkeys(NAMES, 0)
    threads = _publishers(homes, stop, rounds, errors)
    for t in threads:
        t.start()
    _wait(lambda: all(rounds[n] >= 1 for n in NAMES) or errors, "a first round each")
    out = tmp_path / "hub.backup"
    doc = qjson(None, "hub", "backup", "--data", str(site.data), str(out))
    at_backup = dict(rounds)
    _wait(lambda: all(rounds[n] >= at_backup[n] + 2 for n in NAMES) or errors,
          "two rounds each after the backup")
    stop.set()
    for t in threads:
        t.join(60)
    assert not errors, errors

    # the backup is consistent: it opens, its chain ends at its head, its state root adds up
    info = inspect(out)
    assert info == {k: doc[k] for k in ("hub_id", "taken_at", "revision", "spaces")}
    copy = tmp_path / "check.db"
    shutil.copyfile(out, copy)
    check = Store(f"sqlite:///{copy}", pool_size=1)
    with check.read() as conn:
        b_space = q.get_space_txn(conn, space["id"])
        verified = verify_space_txn(conn, b_space)
    check.dispose()
    assert verified["chain"]["ok"] and verified["state"]["ok"], verified
    assert verified["chain"]["batches"] == b_space.head_seq > len(NAMES)

    # after the backup: a page deleted, a pre-backup page edited, a device revoked
    ann, ann_vault = homes["ann"]
    (ann_vault / "page" / "ann" / "base.md").unlink()
    qjson(ann, "sync")
    ben, ben_vault = homes["ben"]
    _page(ben_vault, "page/ann/0", "ben's edit after the backup\n")
    qjson(ben, "sync")
    eve_device = Home(eve).hubs()[0].device_id
    qjson(site.owner, "admin", "devices", "revoke", str(eve_device))
    assert _fail(eve, "sync")["code"] in ("unauthorized", "forbidden")
    for home, _ in homes.values():
        qjson(home, "sync")
    truth = _hub_entries(site, space["id"])
    assert "page/ann/base" not in truth and truth["page/ann/0"].body.startswith("ben's")
    files = {n: sorted(p.relative_to(v).as_posix() for p in v.rglob("*.md"))
             for n, (_h, v) in homes.items()}
    backed = dict(_backup_entries(out, space["id"]))
    post_backup = ({eid for eid, e in truth.items() if backed.get(eid) != e.version}
                   | (set(backed) - set(truth)))  # a deletion is a change too
    assert "page/ann/base" in post_backup and "page/ann/0" in post_backup
    assert len(post_backup) >= 2 * len(NAMES) + 2

    # bad restores: refused with a clear code, nothing changed
    data = str(site.data)
    assert _fail(None, "hub", "restore", "--data", data, str(out))["code"] == "hub_serving"
    site.hub.stop()
    before = _hub_state(site.data)
    junk = tmp_path / "junk.db"
    junk.write_text("not a database\n")
    other = tmp_path / "other"
    kit.init_hub(other)
    foreign = tmp_path / "foreign.backup"
    qjson(None, "hub", "backup", "--data", str(other), str(foreign))
    for arg, code in ((str(tmp_path / "missing.backup"), "not_found"),
                      (str(junk), "not_a_backup"), (str(foreign), "wrong_hub")):
        assert _fail(None, "hub", "restore", "--data", data, arg)["code"] == code
    dry = qjson(None, "hub", "restore", "--data", data, str(out), "--dry-run")
    assert [r["space"] for r in dry["restored"]] == [space["id"]]
    assert _hub_state(site.data) == before

    # the restore
    done = qjson(None, "hub", "restore", "--data", data, str(out))
    [r] = done["restored"]
    assert r["restored_from"]["seq"] == b_space.head_seq and r["epoch"]
    site.hub = kit.start_hub(site.data, port=site.hub.port)

    # the device revoked after the backup stays revoked
    assert _fail(eve, "sync")["code"] in ("unauthorized", "forbidden")
    # the audit chain verifies and shows the restore; the signed tips still hold
    assert qjson(site.owner, "admin", "audit", "--verify")["ok"] is True
    actions = [e["action"] for e in site.events()]
    assert "space.restore" in actions and "hub.restore" in actions
    assert actions.index("device.revoke") < actions.index("space.restore")

    # the replicas reconcile: each post-backup change republished once, nothing lost
    for home, _ in homes.values():
        qjson(home, "sync")
    for home, _ in homes.values():
        qjson(home, "sync")
    assert _hub_entries(site, space["id"]) == truth
    with site.client(site.owner) as c:
        head = c.head(space["id"])
        assert head["epoch"] == r["epoch"]
        from shared.digest import genesis_digest

        page = c.changes(space["id"], epoch=head["epoch"], after=0,
                         after_digest=genesis_digest(space["id"], head["epoch"]), limit=5000)
    ops = [op.entry_id for ch in page.changes for op in ch.batch.ops]
    assert sorted(ops) == sorted(set(ops)), "an entry republished twice"
    assert set(ops) == post_backup
    for n, (_h, v) in homes.items():
        assert sorted(p.relative_to(v).as_posix() for p in v.rglob("*.md")) == files[n]
    assert migrate.current(f"sqlite:///{site.data / 'hub.db'}") == migrate.alembic_head()


def _backup_entries(path: Path, space_id: str) -> list[tuple[str, str]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return conn.execute("SELECT entry_id, version FROM entries WHERE space_id = ? AND "
                            "NOT deleted", (space_id,)).fetchall()
    finally:
        conn.close()
