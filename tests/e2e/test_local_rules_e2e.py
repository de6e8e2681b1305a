"""End to end with a real ``quire hub serve`` process and the real CLI: a replica told its
role and rules by the head refuses a denied local edit before syncing (kept locally,
reported as ``policy_denied``), while its other edits still publish; the hub never sees the
denied op. A viewer's edits are likewise kept and reported, never pushed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replica.hubclient.auth import auth_for
from replica.hubclient.client import HubClient
from replica.machine.credentials import CredentialFile
from replica.machine.home import Home
from shared.digest import genesis_digest
from tests.e2e.test_revocation_e2e import hub, q, write_page  # noqa: F401 (fixture)
from tests.kit.hubproc import HubProcess


def hub_batches(home: Path, space_id: str) -> list[dict[str, Any]]:
    """Every batch the hub holds for the space, read with ``home``'s credentials."""
    h = Home(home).hubs()[0]
    auth = auth_for(h.key_path, CredentialFile(h.credential_path, h.key_path))
    with HubClient(h.url, auth=auth, hub_key=h.public_key) as c:
        head = c.head(space_id)
        page = c.changes(space_id, epoch=head["epoch"], after=0,
                         after_digest=genesis_digest(space_id, head["epoch"]), limit=1000)
    return [ch.batch.to_wire() for ch in page.changes]


def test_replica_told_its_rules_refuses_the_local_guardrail_edit_before_syncing(
        hub: HubProcess, tmp_path: Path) -> None:  # noqa: F811
    owner, ann, vic = tmp_path / "owner", tmp_path / "ann", tmp_path / "vic"
    q(owner, "join", hub.url, "--invite", hub.enrollment, "--device", "owner")  # type: ignore[attr-defined]
    space = q(owner, "admin", "space", "create", "team")["space"]
    for home, name, role in ((ann, "ann", "editor"), (vic, "vic", "viewer")):
        code = q(owner, "admin", "invite", "create", "team", "--role", role)["code"]
        q(home, "join", hub.url, "--invite", code, "--vault", str(tmp_path / f"{name}-vault"),
          "--device", name)
    rule = q(owner, "admin", "rules", "add", "team", "--deny", "create,update,delete",
             "--who", "editor", "--entries", "guardrail/*")["rule"]

    vault = tmp_path / "ann-vault"
    write_page(vault, "plan", "the plan")
    guard = vault / "guardrail" / "no-force-push.md"
    guard.parent.mkdir(parents=True)
    guard.write_text("---\ntitle: no force push\nmeta:\n  severity: block\n---\nnever\n")
    res = q(ann, "sync")  # succeeds: the page publishes, the guardrail is refused locally
    assert res["sync"]["pushed"] == 1 and res["last_error"] is None, res
    assert [(d["id"], d["action"], d["rule"]) for d in res["sync"]["policy_denied"]] == [
        ("guardrail/no-force-push", "create", rule["id"])]
    st = q(ann, "status")
    assert [d["id"] for d in st["policy_denied"]] == ["guardrail/no-force-push"]
    assert st["outbox"] == 1  # kept as an unpublished local change, never lost
    assert "never" in guard.read_text()
    # the hub never saw the guardrail op: one batch, the page only
    batches = hub_batches(owner, space["id"])
    assert [[op["entry"]["id"] for op in b["ops"]] for b in batches] == [["page/plan"]]
    # a second sync still keeps it back, and pushes nothing
    again = q(ann, "sync")
    assert again["sync"]["pushed"] == 0 and len(again["sync"]["policy_denied"]) == 1

    # a viewer's edit is kept and reported, not pushed (no forbidden round trip)
    write_page(tmp_path / "vic-vault", "idea", "viewer's idea")
    res = q(vic, "sync")
    assert res["last_error"] is None and res["sync"]["pushed"] == 0, res
    assert [(d["id"], d["rule"]) for d in res["sync"]["policy_denied"]] == [
        ("page/idea", "role:viewer")]
    assert "viewer's idea" in (tmp_path / "vic-vault" / "page" / "idea.md").read_text()
    assert len(hub_batches(owner, space["id"])) == 1

    # the space maps a folder onto guardrail (quire admin kinds set): the head carries the
    # mapping, so ann's replica judges a file there as a guardrail before publishing it
    mapped = q(owner, "admin", "kinds", "set", "team", "Team Rules/=guardrail")
    assert mapped["kinds"] == {"Team Rules": "guardrail"} and mapped["changed"] == ["Team Rules"]
    assert q(vic, "admin", "kinds", "show", "team")["kinds"] == {"Team Rules": "guardrail"}
    freeze = vault / "Team Rules" / "freeze.md"
    freeze.parent.mkdir()
    freeze.write_text("---\ntitle: freeze\nmeta:\n  severity: block\n---\nno deploys\n")
    res = q(ann, "sync")
    assert res["last_error"] is None, res
    assert sorted((d["id"], d["rule"]) for d in res["sync"]["policy_denied"]) == [
        ("Team Rules/freeze", rule["id"]), ("guardrail/no-force-push", rule["id"])]
    assert len(hub_batches(owner, space["id"])) == 1  # the hub never saw it
