"""End to end with a real ``quire hub serve`` process and the real CLI: a watcher-less
replica whose device is revoked is suspended and keeps its edits and its outbox; after
``quire login`` on that machine (a new device key, approved from the owner's machine) the
next ``quire sync`` registers a new replica and publishes every waiting edit exactly once:
an outbox batch the hub never accepted is rebuilt with a new id and the new key, one it
had accepted before the revocation is settled by its receipt, never sent again."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from replica.machine.home import Home
from tests.e2e.test_local_rules_e2e import hub_batches
from tests.e2e.test_revocation_e2e import QUIRE, hub, q, write_page  # noqa: F401
from tests.kit.host import REPO
from tests.kit.hubproc import HubProcess


def crash_sync(home: Path, space: str, point: str) -> None:
    env = dict(os.environ, QUIRE_HOME=str(home), QUIRE_TEST_CRASH_AT=point)
    p = subprocess.run([*QUIRE, "sync", space, "--json"], capture_output=True, text=True,
                       env=env, cwd=REPO, timeout=60)
    assert p.returncode == -9, (p.returncode, p.stdout, p.stderr)


def login(home: Path, owner: Path, url: str, device: str) -> dict[str, str]:
    env = dict(os.environ, QUIRE_HOME=str(home))
    proc = subprocess.Popen([*QUIRE, "login", url, "--device", device, "--json",
                             "--print-code", "--poll-fast"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        q(owner, "devices", "approve", first["user_code"], "--yes")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    return json.loads(out.splitlines()[-1])


def ids_by_replica(batches: list[dict]) -> list[tuple[str, list[str]]]:
    return [(b["replica_id"], [op["entry"]["id"] for op in b["ops"]]) for b in batches]


def test_revoked_device_after_new_login_and_rejoin_publishes_its_edits_exactly_once(
        hub: HubProcess, tmp_path: Path) -> None:  # noqa: F811
    owner, ann = tmp_path / "owner", tmp_path / "ann"
    q(owner, "join", hub.url, "--invite", hub.enrollment, "--device", "owner")  # type: ignore[attr-defined]
    spaces = {}
    for name in ("alpha", "beta"):
        spaces[name] = q(owner, "admin", "space", "create", name)["space"]["id"]
        code = q(owner, "admin", "invite", "create", name, "--role", "editor")["code"]
        q(ann, "join", hub.url, "--invite", code, "--vault", str(tmp_path / f"ann-{name}"),
          "--device", "ann")
    old_replica = {s.name: s.replica_id for s in Home(ann).spaces()}

    # alpha: the batch is saved in the outbox, never sent; beta: sent and accepted, the
    # receipt never arrived; then one more edit on beta waits unbatched
    write_page(tmp_path / "ann-alpha", "draft", "ann's unsent words")
    crash_sync(ann, "alpha", "before_push")
    write_page(tmp_path / "ann-beta", "sent", "accepted before the revocation")
    crash_sync(ann, "beta", "after_push_before_receipt")
    write_page(tmp_path / "ann-beta", "later", "written after")
    assert ids_by_replica(hub_batches(owner, spaces["alpha"])) == []
    assert ids_by_replica(hub_batches(owner, spaces["beta"])) == [
        (old_replica["beta"], ["page/sent"])]

    # the device is revoked: suspended, edits and outbox kept
    devices = q(owner, "admin", "devices", "list", "--all")["devices"]
    q(owner, "admin", "devices", "revoke", next(d["id"] for d in devices if d["name"] == "ann"))
    assert q(ann, "sync", "alpha", check=False)["error"]["code"] == "unauthorized"
    st = q(ann, "status", "alpha")
    assert st["state"] == "suspended" and st["suspended"]["reason"] == "device_revoked", st
    assert st["outbox"] == 1 and st["outbox_batches"] == 1
    assert "unsent words" in (tmp_path / "ann-alpha" / "page" / "draft.md").read_text()

    # a new device login on that machine, approved from the owner's machine
    done = login(ann, owner, hub.url, "ann-again")
    assert done["device_id"] != next(d["id"] for d in devices if d["name"] == "ann")
    assert list((Home(ann).hubs()[0].dir).glob("device-*.pem.refused"))

    for name in ("alpha", "beta"):
        res = q(ann, "sync", name)
        assert res["state"] == "ok" and res["outbox"] == 0 and res["outbox_batches"] == 0, res
    new_replica = {s.name: s.replica_id for s in Home(ann).spaces()}
    assert all(new_replica[n] != old_replica[n] for n in new_replica)
    assert {s.device_id for s in Home(ann).spaces()} == {done["device_id"]}
    # exactly once: the unsent batch went out once, rebuilt under the new replica; the
    # accepted one was settled by its receipt and not sent again
    assert ids_by_replica(hub_batches(owner, spaces["alpha"])) == [
        (new_replica["alpha"], ["page/draft"])]
    assert ids_by_replica(hub_batches(owner, spaces["beta"])) == [
        (old_replica["beta"], ["page/sent"]), (new_replica["beta"], ["page/later"])]
    # and a further sync is quiet
    assert q(ann, "sync", "alpha")["sync"]["pushed"] == 0
