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
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from hub.backup import inspect
from hub.signed_state import verify_space_txn
from hub.store.db import Store
from hub.store.spaces_sql import get_space_txn
from replica.machine.home import Home
from shared.digest import genesis_digest
from shared.entry import make_entry
from shared.ids import new_id
from tests.kit.cli import CliMember, CliTeam, FreshHub, qjson, quire
from tests.kit.hubproc import serve_hub
from tests.replica.trust.test_audit_e2e import Site, _site

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


def _hub_cli(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    """``quire hub …`` in this process (the same parser and command, no interpreter start):
    for the refusals, whose exit code and JSON error are what is checked."""
    from hub.cli import main

    capsys.readouterr()
    code = main([*args, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert (code != 0) == ("error" in doc), doc
    return doc


def _hub_entries(site: Site, space: str) -> dict[str, Any]:
    with site.client(site.owner) as c:
        lines = c.snapshot(space)
        next(lines)
        return {e.id: e for e, _seq in lines}  # type: ignore[misc]


def _page(eid: str, body: str) -> Any:
    return make_entry({"id": eid, "title": eid, "body": body})


def _sync_all(members: list[CliMember]) -> None:
    """One ``quire sync`` per member, all at once (as their machines would)."""
    with ThreadPoolExecutor(len(members)) as pool:
        list(pool.map(lambda m: m.sync(), members))


def _publishers(members: list[CliMember], stop: threading.Event, rounds: dict[str, int],
                errors: list[str]) -> list[threading.Thread]:
    def run(m: CliMember) -> None:
        while not stop.is_set():
            n = rounds[m.name]
            m.write(_page(f"page/{m.name}/{n}", f"{m.name} round {n}\n"))
            p = m.run("sync", "--json", check=False)
            if p.returncode != 0:
                errors.append(p.stdout + p.stderr)
                return
            rounds[m.name] = n + 1

    return [threading.Thread(target=run, args=(m,), daemon=True) for m in members]


def _wait(cond: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _vault_files(members: list[CliMember]) -> dict[str, list[str]]:
    return {m.name: sorted(m.files()) for m in members}


def test_backup_while_publishing_then_restore_keeps_authorization_and_republishes(
        site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = CliTeam(FreshHub(site.hub.url, site.data, "", site.hub.proc), site.owner, tmp_path, "bk")
    space = team.space
    members = team.members(*NAMES)
    eve = team.member("eve", role="viewer")
    for m in members:
        m.write(_page(f"page/{m.name}/base", "before the backup\n"))
    _sync_all(members)

    # four clients publish while the backup is taken
    stop, errors = threading.Event(), []
    rounds = dict.fromkeys(NAMES, 0)
    threads = _publishers(members, stop, rounds, errors)
    for t in threads:
        t.start()
    _wait(lambda: all(rounds[n] >= 1 for n in NAMES) or errors, "a first round each")
    out = tmp_path / "hub.backup"
    doc = qjson(None, "hub", "backup", "--data", str(site.data), str(out))
    at_backup = dict(rounds)
    _wait(lambda: all(rounds[n] >= at_backup[n] + 1 for n in NAMES) or errors,
          "a round each after the backup")
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
        b_space = get_space_txn(conn, space["id"])
        verified = verify_space_txn(conn, b_space)
    check.dispose()
    assert verified["chain"]["ok"] and verified["state"]["ok"], verified
    assert verified["chain"]["batches"] == b_space.head_seq > len(NAMES)

    # after the backup: a page deleted, a pre-backup page edited, a device revoked
    ann, ben = members[0], members[1]
    ann.path("page/ann/base").unlink()
    ben.write(_page("page/ben/base", "ben's edit after the backup\n"))
    with site.client(site.owner) as c:
        c.admin_post(f"/v1/devices/{Home(eve.home).hubs()[0].device_id}/revoke", {})
    _sync_all(members)  # ann and ben publish, the others pull
    _sync_all(members)  # everyone holds everything
    truth = _hub_entries(site, space["id"])
    assert "page/ann/base" not in truth and truth["page/ben/base"].body.startswith("ben's")
    files = _vault_files(members)
    backed = dict(_backup_entries(out, space["id"]))
    post_backup = ({eid for eid, e in truth.items() if backed.get(eid) != e.version}
                   | (set(backed) - set(truth)))  # a deletion is a change too
    assert {"page/ann/base", "page/ben/base"} < post_backup

    # bad restores: refused with a clear code, nothing changed
    data = str(site.data)
    assert _fail(None, "hub", "restore", "--data", data, str(out))["code"] == "hub_serving"
    site.hub.stop()
    before = _hub_state(site.data)
    junk = tmp_path / "junk.db"
    junk.write_text("not a database\n")
    foreign = tmp_path / "foreign.backup"  # as a backup of another hub would be
    shutil.copyfile(out, foreign)
    with sqlite3.connect(foreign) as conn:
        conn.execute("UPDATE hub_state SET hub_id = ?", (new_id(),))
    for arg, code in ((str(tmp_path / "missing.backup"), "not_found"),
                      (str(junk), "not_a_backup"), (str(foreign), "wrong_hub")):
        assert _hub_cli(capsys, "restore", "--data", data, arg)["error"]["code"] == code
    dry = _hub_cli(capsys, "restore", "--data", data, str(out), "--dry-run")
    assert [r["space"] for r in dry["restored"]] == [space["id"]]
    assert _hub_state(site.data) == before

    # the restore
    done = qjson(None, "hub", "restore", "--data", data, str(out))
    [r] = done["restored"]
    assert r["restored_from"]["seq"] == b_space.head_seq and r["epoch"]
    site.hub = serve_hub(site.data, port=site.hub.port)

    # the device revoked after the backup stays revoked (it was not in the backup)
    assert _fail(eve.home, "sync")["code"] in ("unauthorized", "forbidden")
    # the audit chain verifies and shows the restore; the signed tips still hold
    assert qjson(site.owner, "admin", "audit", "--verify")["ok"] is True
    events = {e["action"]: e for e in site.events()}
    assert events["space.restore"]["details"]["restored_from"] == r["restored_from"]
    assert events["hub.restore"]["details"]["spaces"] == [space["id"]]
    assert events["device.revoke"]["at"] <= events["space.restore"]["at"]

    # the replicas reconcile: each post-backup change republished once, nothing lost
    _sync_all(members)
    _sync_all(members)
    assert _hub_entries(site, space["id"]) == truth
    with site.client(site.owner) as c:
        assert c.head(space["id"])["epoch"] == r["epoch"]
        page = c.changes(space["id"], epoch=r["epoch"], after=0,
                         after_digest=genesis_digest(space["id"], r["epoch"]), limit=5000)
    ops = [op.entry_id for ch in page.changes for op in ch.batch.ops]
    assert sorted(ops) == sorted(set(ops)), "an entry republished twice"
    assert set(ops) == post_backup
    assert _vault_files(members) == files


def _backup_entries(path: Path, space_id: str) -> list[tuple[str, str]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return conn.execute("SELECT entry_id, version FROM entries WHERE space_id = ? AND "
                            "NOT deleted", (space_id,)).fetchall()
    finally:
        conn.close()
