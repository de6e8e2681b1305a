"""Devices and replicas, end to end with a real ``quire hub serve`` process and the real
CLI (issue 14, item 7):

- a member's second machine, signed in with ``quire login`` (RFC 8628, approved from the
  member's first machine), joins a space the member belongs to without an invite:
  ``quire join URL --space NAME``;
- joining a space this machine already holds into another ``--vault`` is refused
  (``already_joined``) before the invite is redeemed: the invite stays usable;
- a revoked replica can no longer pull: ``quire sync`` sends ``Quire-Replica`` and the hub
  refuses it (``forbidden``, reason ``replica_revoked``) on head, changes, snapshot and
  events (docs/protocol.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from replica.hubclient.client import HubClient
from replica.machine.home import Home
from shared.errors import Forbidden
from tests.e2e.test_rejoin_e2e import login
from tests.e2e.test_revocation_e2e import hub, q, write_page  # noqa: F401
from tests.kit.cli import device_auth
from tests.kit.hubproc import HubProcess


def _setup(hub: HubProcess, tmp_path: Path) -> tuple[Path, Path, str]:  # noqa: F811
    owner, ann = tmp_path / "owner", tmp_path / "ann"
    q(owner, "join", hub.url, "--invite", hub.enrollment, "--device", "owner")  # type: ignore[attr-defined]
    space = q(owner, "admin", "space", "create", "alpha")["space"]["id"]
    code = q(owner, "admin", "invite", "create", "alpha", "--role", "editor")["code"]
    q(ann, "join", hub.url, "--invite", code, "--vault", str(tmp_path / "ann-v"),
      "--device", "ann")
    return owner, ann, space


def test_revoked_replica_cannot_pull(hub: HubProcess, tmp_path: Path) -> None:  # noqa: F811
    owner, ann, space = _setup(hub, tmp_path)
    bob = tmp_path / "bob"
    q(bob, "join", hub.url, "--invite",
      q(owner, "admin", "invite", "create", "alpha", "--role", "editor")["code"],
      "--vault", str(tmp_path / "bob-v"), "--device", "bob")
    rid = Home(ann).spaces()[0].replica_id
    q(owner, "admin", "replicas", "revoke", "alpha", rid)
    # something new on the hub that the revoked replica must not receive
    write_page(tmp_path / "bob-v", "after", "published after the revocation")
    q(bob, "sync", "alpha")
    res = q(ann, "sync", "alpha", check=False)
    assert res.get("error", {}).get("code") == "forbidden", res
    assert res["error"]["details"]["reason"] == "replica_revoked", res
    assert not (tmp_path / "ann-v" / "page" / "after.md").exists()
    st = q(ann, "status", "alpha")
    assert st["state"] == "suspended" and st["suspended"]["reason"] == "replica_revoked", st
    # every pull naming the replica is refused: head, changes (above), snapshot, events
    h = Home(ann).hubs()[0]
    with HubClient(h.url, auth=device_auth(h), hub_key=h.public_key) as c:
        c.replica_id = rid
        for pull in (lambda: c.head(space), lambda: list(c.snapshot(space)),
                     lambda: next(iter(c.events(space)))):
            with pytest.raises(Forbidden) as refused:
                pull()
            assert refused.value.details["reason"] == "replica_revoked"
        c.replica_id = "01" + "0" * 24  # an id that is not this device's replica
        with pytest.raises(Forbidden) as refused:
            c.head(space)
        assert refused.value.details["reason"] == "unknown_replica"
        c.replica_id = None  # the member's own reads (no replica named) still work
        assert c.head(space)["space"] == space


def test_second_device_joins_a_members_space_without_an_invite(
        hub: HubProcess, tmp_path: Path) -> None:  # noqa: F811
    owner, ann, space = _setup(hub, tmp_path)
    q(owner, "admin", "space", "create", "beta")  # ann is not a member of beta
    write_page(tmp_path / "ann-v", "first", "written on ann's first machine")
    q(ann, "sync", "alpha")
    laptop = tmp_path / "ann-laptop"
    # not signed in yet: no invite, no way in
    res = q(laptop, "join", hub.url, "--space", "alpha", check=False)
    assert res["error"]["code"] == "not_joined", res
    # ann's second machine signs in (RFC 8628), approved from her first machine
    done = login(laptop, ann, hub.url, "ann-laptop")
    assert done["user_id"] == Home(ann).hubs()[0].user_id
    res = q(laptop, "join", hub.url, "--space", "beta", check=False)
    assert res["error"]["code"] == "space_not_found", res
    res = q(laptop, "join", hub.url, "--space", "alpha", "--vault", str(tmp_path / "laptop-v"))
    assert res["space"]["id"] == space and res["status"]["state"] == "ok", res
    assert "first machine" in (tmp_path / "laptop-v" / "page" / "first.md").read_text()
    # both machines replicate: an edit on the laptop reaches the first machine
    write_page(tmp_path / "laptop-v", "second", "written on the laptop")
    assert q(laptop, "sync", "alpha")["sync"]["pushed"] == 1
    q(ann, "sync", "alpha")
    assert "laptop" in (tmp_path / "ann-v" / "page" / "second.md").read_text()
    replicas = q(owner, "admin", "replicas", "list", "alpha")["replicas"]
    assert {r["device_name"] for r in replicas} >= {"ann", "ann-laptop"}, replicas
    # joining again into the same vault is a no-op; into another vault it is refused
    assert q(laptop, "join", hub.url, "--space", "alpha")["already_joined"] is True
    res = q(laptop, "join", hub.url, "--space", "alpha", "--vault", str(tmp_path / "x"),
            check=False)
    assert res["error"]["details"]["reason"] == "already_joined", res
    assert not (tmp_path / "x").exists()


def test_join_into_another_vault_is_refused_before_the_invite_is_used(
        hub: HubProcess, tmp_path: Path) -> None:  # noqa: F811
    owner, ann, space = _setup(hub, tmp_path)
    code = q(owner, "admin", "invite", "create", "alpha", "--role", "editor")["code"]
    res = q(ann, "join", hub.url, "--invite", code, "--vault", str(tmp_path / "other"),
            check=False)
    assert res["error"]["code"] == "forbidden", res
    assert res["error"]["details"]["reason"] == "already_joined", res
    assert res["error"]["details"]["vault"] == str((tmp_path / "ann-v").resolve()), res
    assert not (tmp_path / "other").exists()
    assert [s.vault for s in Home(ann).spaces()] == [(tmp_path / "ann-v").resolve()]
    # the invite was not used: someone else redeems it
    bob = tmp_path / "bob"
    res = q(bob, "join", hub.url, "--invite", code, "--vault", str(tmp_path / "bob-v"),
            "--device", "bob")
    assert res["space"]["id"] == space
