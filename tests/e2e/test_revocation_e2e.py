"""End to end with a real ``quire hub serve`` process and the real CLI: a member's replica
is refused after its device is revoked (suspended, edits and outbox kept), another member's
replica is suspended when removed from the space and resumes, publishing what waited, when
an admin lets them back in. Also: rules and audit through the CLI, and a second machine's
device login (RFC 8628) approved from a signed-in device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.host import REPO
from tests.kit.hubproc import HubProcess, init_hub, serve_hub

QUIRE = [sys.executable, "-m", "replica.cli.main"]


def q(home: Path, *args: str, check: bool = True) -> dict[str, Any]:
    env = dict(os.environ, QUIRE_HOME=str(home))
    p = subprocess.run([*QUIRE, *args, "--json"], capture_output=True, text=True, env=env,
                       cwd=REPO, timeout=60)
    if check and p.returncode not in (0, 3):  # 3: ran, with something left (Exit codes)
        raise AssertionError(f"quire {' '.join(args)} failed: {p.stdout}\n{p.stderr}")
    return json.loads(p.stdout.splitlines()[-1]) if p.stdout.strip() else {}


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubProcess]:
    data = tmp_path / "hub"
    code = init_hub(data)
    hp = serve_hub(data, env={"QUIRE_HUB_DEVICE_CODE_INTERVAL": "1"})
    hp.enrollment = code  # type: ignore[attr-defined]
    yield hp
    hp.stop()


def write_page(vault: Path, slug: str, body: str) -> None:
    p = vault / "page" / f"{slug}.md"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(f"---\ntitle: {slug}\n---\n{body}\n")


def test_revoked_device_suspends_and_removed_member_resumes(hub: HubProcess,
                                                           tmp_path: Path) -> None:
    owner, ann, bob = tmp_path / "owner", tmp_path / "ann", tmp_path / "bob"
    q(owner, "join", hub.url, "--invite", hub.enrollment, "--device", "owner")  # type: ignore[attr-defined]
    q(owner, "admin", "space", "create", "team")
    for home, name in ((ann, "ann"), (bob, "bob")):
        code = q(owner, "admin", "invite", "create", "team", "--role", "editor")["code"]
        q(home, "join", hub.url, "--invite", code, "--vault", str(tmp_path / f"{name}-vault"),
          "--device", name, "--name", name)  # member names are no longer device names

    # rules through the CLI: editors may not touch guardrails
    rule = q(owner, "admin", "rules", "add", "team", "--deny", "create,update,delete",
             "--who", "editor", "--entries", "guardrail/*")["rule"]
    assert [r["id"] for r in q(owner, "admin", "rules", "list", "team")["rules"]] == [rule["id"]]

    # ann's device is revoked: her sync is refused, status says suspended, nothing is lost
    write_page(tmp_path / "ann-vault", "draft", "ann's unpublished words")
    devices = q(owner, "admin", "devices", "list", "--all")["devices"]
    ann_dev = next(d for d in devices if d["name"] == "ann")
    dry = q(owner, "admin", "devices", "revoke", ann_dev["id"], "--dry-run")
    assert dry["dry_run"] is True
    q(owner, "admin", "devices", "revoke", ann_dev["id"])
    res = q(ann, "sync", check=False)
    assert res["error"]["code"] == "unauthorized"
    st = q(ann, "status")
    assert st["state"] == "suspended" and st["suspended"]["reason"] == "device_revoked", st
    assert st["outbox"] == 1
    assert "unpublished words" in (tmp_path / "ann-vault" / "page" / "draft.md").read_text()

    # bob is removed from the space: suspended; let back in: the waiting edit publishes
    write_page(tmp_path / "bob-vault", "notes", "bob's offline notes")
    members = q(owner, "admin", "member", "list", "team")["members"]
    bob_id = next(m["user_id"] for m in members if m["name"] == "bob")
    q(owner, "admin", "member", "remove", "team", bob_id)
    assert q(bob, "sync", check=False)["error"]["code"] == "not_found"
    st = q(bob, "status")
    assert st["state"] == "suspended" and st["outbox"] == 1, st
    code = q(owner, "admin", "invite", "create", "team", "--role", "editor")["code"]
    assert q(bob, "join", hub.url, "--invite", code)["rejoined"] is True
    synced = q(bob, "sync")
    assert synced["state"] == "ok" and synced["outbox"] == 0, synced

    # the audit of the whole run verifies, and names the revocation and the removal
    assert q(owner, "admin", "audit", "--verify")["ok"] is True
    env = dict(os.environ, QUIRE_HOME=str(owner))
    p = subprocess.run([*QUIRE, "admin", "audit", "--json"], capture_output=True, text=True,
                       env=env, cwd=REPO, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    actions = [json.loads(x)["action"] for x in lines]
    assert "device.revoke" in actions and "member.remove" in actions and "publish" in actions


def test_second_machine_logs_in_with_a_code_approved_from_a_signed_in_device(
        hub: HubProcess, tmp_path: Path) -> None:
    owner, laptop2 = tmp_path / "owner", tmp_path / "laptop2"
    q(owner, "join", hub.url, "--invite", hub.enrollment, "--device", "owner")  # type: ignore[attr-defined]
    env = dict(os.environ, QUIRE_HOME=str(laptop2))
    login = subprocess.Popen([*QUIRE, "login", hub.url, "--device", "laptop2", "--json",
                              "--print-code"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env, cwd=REPO)
    try:
        assert login.stdout is not None
        first = json.loads(login.stdout.readline())
        approved = q(owner, "devices", "approve", first["user_code"], "--yes")
        assert approved["device_name"] == "laptop2"
        out, err = login.communicate(timeout=60)
    finally:
        if login.poll() is None:
            login.kill()
    assert login.returncode == 0, err
    done = json.loads(out.splitlines()[-1])
    # the new machine acts as the same member: it may create spaces like the owner
    assert q(laptop2, "admin", "space", "create", "from-laptop2")["space"]["name"] == \
        "from-laptop2"
    devices = q(owner, "admin", "devices", "list")["devices"]
    assert {d["name"] for d in devices} == {"owner", "laptop2"}
    assert done["device_id"] in {d["id"] for d in devices}
    # a code works once
    again = q(owner, "devices", "approve", first["user_code"], "--yes", check=False)
    assert again["error"]["code"] == "forbidden"
