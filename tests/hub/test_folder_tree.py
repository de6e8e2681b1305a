"""The folder tree on the hub (hub/signed_state.py, hub/completeness.py), on PostgreSQL
(SQLite: the hostile suite): every publication (creates, updates, deletes, a folder emptied) keeps the tree
equal to the one computed from the entries, the head signs its root as ``tree``, the proof
served for a folder scope verifies against it, a tree lost (a space from before migration
0030) is rebuilt, and a proof is refused for folders the reader may not read whole or for a
scope that is not folders."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hub import signed_state
from hub.store import folders_sql as fs
from hub.store import state_sql as ss
from shared import folderproof as fp
from shared import foldertree as ft
from shared.errors import HubUnverified
from shared.signed import parse_head
from tests.kit.pg import pg_database, require_pg
from tests.kit.wire import WireMember, WireTeam, delete, make_wire_team, put

SCOPE = ["projects/alpha/**", "guardrail/*"]


def _live(hub: Any, space: str) -> list[tuple[str, str]]:
    with hub.store.read() as conn:
        return list(ss.iter_live_versions_txn(conn, space))


def _kept(hub: Any, space: str) -> dict[str, ft.Node]:
    with hub.store.read() as conn:
        rows = conn.exec_driver_sql("SELECT folder, lattice, size, digest FROM folder_nodes "
                                    f"WHERE space_id = '{space}'").fetchall()
    return fs.nodes_of(rows)


def proof_of(m: WireMember, space: str, scope: list[str], **params: str) -> Any:
    return m.get(f"/v1/spaces/{space}/proof", params={"scope": scope, **params})


def _publish(m: WireMember, space: str, ops: list[Any]) -> None:
    r = m.publish(space, ops)
    assert r.status_code == 201, r.text


@pytest.fixture
def team(tmp_path: Any) -> Iterator[WireTeam]:
    """On PostgreSQL (the hostile suite, tests/replica/trust/test_hostile_folder_proofs.py,
    drives the same code on SQLite)."""
    require_pg()
    with pg_database() as url:
        yield from make_wire_team(tmp_path / "data", url)


def test_the_tree_follows_every_publication_and_its_proofs_verify(team: WireTeam) -> None:
    hub, space, ed = team.hub, team.space, team.editor
    head = parse_head(hub.key.public, ed.head(space), space=space)
    assert head.tree == ft.EMPTY_ROOT
    _publish(ed, space, [put("projects/alpha/plan"), put("projects/alpha/deep/notes"),
                         put("projects/beta/secret"), put("guardrail/no-force-push"),
                         put("guardrail/archived/retired"), put("README")])
    plan = dict(_live(hub, space))["projects/alpha/plan"]
    _publish(ed, space, [put("projects/alpha/plan", "changed\n", base=plan),
                         put("hr/salaries")])
    gone = dict(_live(hub, space))["projects/beta/secret"]
    _publish(ed, space, [delete("projects/beta/secret", gone)])  # beta is empty: it goes
    live = _live(hub, space)
    assert _kept(hub, space) == ft.tree_of(live)
    assert "projects/beta" not in _kept(hub, space)
    head = parse_head(hub.key.public, ed.head(space), space=space)
    assert head.tree == ft.root_of_entries(live)
    scope = fp.parse_scope(SCOPE)
    assert scope is not None
    r = proof_of(ed, space, SCOPE, nonce="n1")
    assert r.status_code == 200, r.text
    doc = r.json()
    signed = parse_head(hub.key.public, doc["head"], space=space, nonce="n1")
    assert signed.tree == head.tree and signed.seq == head.seq
    held = [(i, v) for i, v in live if scope.holds(i)]
    assert {i for i, _ in held} == {"projects/alpha/plan", "projects/alpha/deep/notes",
                                    "guardrail/no-force-push", "guardrail/archived/retired"}
    fp.verify(signed.tree or "", scope, held, doc["proof"])
    with pytest.raises(HubUnverified):  # one withheld: refused
        fp.verify(signed.tree or "", scope, held[1:], doc["proof"])
    for hidden in ("hr", "salaries", "README", "beta"):
        assert hidden not in r.text.replace(space, "")

    # a space as migration 0030 leaves it (no folder rows): heads compute the root from the
    # entries, and the next publication rebuilds the tree
    hub.store.run_write(lambda conn: conn.exec_driver_sql(
        f"DELETE FROM folder_nodes WHERE space_id = '{space}'"))
    assert parse_head(hub.key.public, ed.head(space), space=space).tree == head.tree
    assert proof_of(ed, space, SCOPE).status_code == 200
    _publish(ed, space, [put("projects/alpha/new")])
    assert _kept(hub, space) == ft.tree_of(_live(hub, space))
    with hub.store.read() as conn:
        assert signed_state.tree_root_txn(conn, space) == ft.root_of_entries(_live(hub, space))


    # a proof is served only for folders the reader may read whole
    owner, viewer = team.owner, team.viewer
    _publish(owner, space, [put("projects/alpha/pay", tags=["hr"])])
    r = owner.post(f"/v1/spaces/{space}/rules", {
        "effect": "deny", "who": "viewer", "actions": ["read"], "entries": "*",
        "tags": ["hr"]})
    assert r.status_code in (200, 201), r.text
    r = proof_of(viewer, space, ["projects/alpha/**"])
    assert r.status_code == 403 and r.json()["error"]["code"] == "policy_denied", r.text
    assert r.json()["error"]["details"]["reason"] == "read_scope"
    assert "pay" not in r.text
    assert proof_of(viewer, space, ["guardrail/*"]).status_code == 200  # all readable
    assert proof_of(ed, space, ["projects/alpha/*"]).status_code == 200  # the rule is not hers
    for bad in (["projects/alpha/plan"], ["projects/*.md"], []):
        r = proof_of(viewer, space, bad)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["details"]["reason"] == "unprovable_scope"
    assert hub is not None
