"""An agent's own publication path (replica/engine/agent_push.py) against the real hub
application in-process (tests/kit/inproc.py): what it sends, under which principal, and
what the device's own sync of the same replica never sends.

Each test names what it prevents: an agent's write reaching the hub under the device's
credential (the device's push or outbox), the device's edits reaching it under the agent's,
an agent's write published over a newer version it never saw, one principal's rules
judging another's changes, and a batch whose provenance names another principal than the
one that sent it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replica.engine.agent_push import AgentPublisher, access_key, sync_agent
from replica.engine.report import SyncReport
from replica.engine.sync import Replica
from replica.hubclient.auth import DPoPAuth
from replica.hubclient.client import HubClient
from replica.machine.credentials import Tokens
from replica.store import overlay
from replica.store.overlay import AgentChange
from shared.entry import Entry, make_entry
from shared.errors import InvalidRequest
from shared.ids import new_id
from shared.wire import Op, build_batch
from tests.kit.inproc import BASE_URL, Local, Space

AGENT = "helper-bot"


def page(eid: str, body: str, **meta: Any) -> Entry:
    return make_entry({"id": eid, "title": eid, "body": body, "meta": meta})


def delegated(sp: Space, local: Local, agent: str = AGENT, scope: str = "write"
              ) -> HubClient:
    """A client of ``local``'s device carrying a delegation of ``agent`` (what
    ``quire mcp --agent`` holds)."""
    with local.device.client() as c:
        res = c.admin_post("/v1/delegations", {"space": sp.id, "agent": agent,
                                               "scope": scope, "ttl_seconds": 3600})
    auth = DPoPAuth(local.device.key, Tokens(res["token"], None, 2**62, sp.hub.url))
    return HubClient(BASE_URL, auth=auth, transport=sp.hub.transport,
                     hub_key=sp.hub.public_key)


def agent_write(local: Local, entry: Entry, agent: str = AGENT) -> None:
    """What the MCP ``write`` tool records: a row of the agent's overlay, written against
    the replica's synced version."""
    overlay.ensure(local.store)
    synced = local.store.states().get(entry.id)
    base = synced.synced if synced is not None and synced.synced is not None \
        and not synced.synced.deleted else None
    with local.store.tx() as conn:
        overlay.put_change_txn(conn, AgentChange(agent, entry.id, entry, base, 1))


def publisher(sp: Space, local: Local, client: HubClient, agent: str = AGENT
              ) -> tuple[Replica, AgentPublisher]:
    prov = {"agent": agent, "tool": "mcp:sync"}
    rep = Replica(space_id=sp.id, replica_id=local.engine.replica_id, vault=local.vault,
                  store=local.store, client=client, key=local.device.key, provenance=prov)
    rep.puller.access_key = access_key(agent)
    return rep, AgentPublisher(rep.ledger, client, rep.puller, rep.snapshots,
                               space_id=sp.id, replica_id=local.engine.replica_id,
                               key=local.device.key, agent=agent, provenance=prov)


def agent_sync(sp: Space, local: Local, client: HubClient, agent: str = AGENT) -> SyncReport:
    return sync_agent(*publisher(sp, local, client, agent))


def rows(local: Local, agent: str = AGENT) -> dict[str, AgentChange]:
    with local.store.engine.connect() as conn:
        return overlay.changes_txn(conn, agent) if overlay.present_txn(conn) else {}


def authors(sp: Space, eid: str) -> list[tuple[str | None, str | None]]:
    """(author.agent, provenance.agent) of every batch of the space that writes ``eid``."""
    return [((c["author"] or {}).get("agent"), (c["batch"].get("provenance") or {}).get("agent"))
            for c in sp.changes()
            if any((op.get("entry") or {}).get("id", op.get("id")) == eid
                   for op in c["batch"]["ops"])]


@pytest.fixture
def alice(tmp_path: Path, space: Space) -> Any:
    a = space.replica(tmp_path, "alice")
    yield a
    a.close()


def test_an_agents_write_goes_out_under_its_delegation_and_lands_through_the_pull(
        space: Space, alice: Local) -> None:
    agent = delegated(space, alice)
    agent_write(alice, page("page/agent", "by the agent\n"))
    alice.write(page("page/person", "by the person\n"))
    report = agent_sync(space, alice, agent)
    assert report.pushed == 1 and report.batches == 1
    assert authors(space, "page/agent") == [(AGENT, AGENT)]
    assert authors(space, "page/person") == []  # the person's edit is not the agent's
    assert rows(alice) == {}  # published: gone from the overlay
    s = alice.store.states()["page/agent"]  # and back through the pull, like anyone's
    assert s.synced is not None and s.synced.body == "by the agent\n" and not s.dirty
    assert alice.store.get_meta(access_key(AGENT))["role"] == "editor"
    alice.sync()  # the person's sync: only the person's edit, as the person
    assert authors(space, "page/person") == [(None, None)]
    assert authors(space, "page/agent") == [(AGENT, AGENT)]
    agent.close()


def test_the_devices_sync_never_sends_an_agents_write_nor_its_saved_batch(
        space: Space, alice: Local) -> None:
    """Before: the write sat in the vault, the person's push built batches from every dirty
    entry and resent whatever the outbox held with the device's credential."""
    agent = delegated(space, alice)
    alice.sync()  # a head to build on
    agent_write(alice, page("page/draft", "the agent's draft\n"))
    rep, pub = publisher(space, alice, agent)
    batch = pub._next_batch(SyncReport())  # saved, then the process dies before sending
    assert batch is not None and batch.provenance == {"agent": AGENT, "tool": "mcp:sync"}
    assert alice.store.outbox() == []  # never in the device's outbox
    for _ in range(2):
        alice.sync()
    assert authors(space, "page/draft") == []
    assert not alice.path("page/draft").exists()
    agent_sync(space, alice, agent)  # the agent's own sync resends it, once
    assert authors(space, "page/draft") == [(AGENT, AGENT)]
    assert [b["batch_id"] for b in space.batches()] == [batch.batch_id]
    agent.close()


def test_a_write_whose_entry_moved_is_merged_when_clean_and_kept_back_when_not(
        tmp_path: Path, space: Space, alice: Local) -> None:
    bob = space.replica(tmp_path, "bob")
    agent = delegated(space, alice)
    alice.write(page("page/plan", "one\ntwo\nthree\nfour\nfive\n"))
    alice.sync()
    bob.sync()
    agent_write(alice, page("page/plan", "ONE\ntwo\nthree\nfour\nfive\n"))
    bob.write(page("page/plan", "one\ntwo\nthree\nfour\nFIVE\n"))
    bob.sync()
    agent_sync(space, alice, agent)  # merged onto bob's version: both edits kept
    bob.sync()
    assert bob.read("page/plan").body == "ONE\ntwo\nthree\nfour\nFIVE\n"
    assert authors(space, "page/plan")[-1] == (AGENT, AGENT)

    agent_write(alice, page("page/plan", "Uno\ntwo\nthree\nfour\nFIVE\n"))
    bob.write(page("page/plan", "one!\ntwo\nthree\nfour\nFIVE\n"))
    bob.sync()
    before = len(space.batches())
    agent_sync(space, alice, agent)
    assert len(space.batches()) == before  # never published over a version it never saw
    [c] = rows(alice).values()
    assert c.state == "conflict" and c.refusal["fields"] == ["body"], c
    assert c.entry.body.startswith("Uno")  # the agent's text is kept
    bob.close()
    agent.close()


def test_each_principal_is_judged_by_its_own_rules_and_role(
        tmp_path: Path, space: Space) -> None:
    """On an admin's machine: the admin's head says admin, the agent's editor; an agent's
    guardrail lowering is refused by the agent's rules and kept, and the admin's next sync
    neither publishes it nor reads the agent's rules as its own."""
    ada = space.replica(tmp_path, "ada", role="admin")
    agent = delegated(space, ada)
    g = page("guardrail/no-prod", "never touch prod\n", severity="block")
    ada.write(g)
    ada.sync()
    agent_write(ada, page("guardrail/no-prod", "never touch prod\n", severity="info"))
    report = agent_sync(space, ada, agent)
    assert [(d["id"], d["rule"]) for d in report.policy_denied] == [
        ("guardrail/no-prod", "default:guardrails-additive")]
    assert rows(ada)["guardrail/no-prod"].state == "denied"
    assert ada.store.get_meta(access_key(AGENT))["role"] == "editor"
    ada.sync()
    assert ada.store.get_meta("access")["role"] == "admin"
    assert [e.meta["severity"] for e in [space.live()["guardrail/no-prod"]]] == ["block"]
    assert authors(space, "guardrail/no-prod") == [(None, None)]
    ada.close()
    agent.close()


def test_a_read_delegation_publishes_nothing_and_keeps_the_write(
        space: Space, alice: Local) -> None:
    reader = delegated(space, alice, scope="read")
    agent_write(alice, page("page/idea", "an idea\n"))
    report = agent_sync(space, alice, reader)
    assert [d["rule"] for d in report.policy_denied] == ["role:viewer"]
    assert rows(alice)["page/idea"].state == "denied"
    alice.sync()
    assert authors(space, "page/idea") == []
    reader.close()


def test_the_guard_refuses_a_provenance_naming_another_agent_than_the_caller(
        space: Space, alice: Local) -> None:
    alice.sync()
    bot = delegated(space, alice, "bot")

    def push(client: HubClient, provenance: dict[str, str] | None, eid: str) -> Any:
        h = client.head(space.id)
        batch = build_batch(alice.device.key, batch_id=new_id(),
                            replica_id=alice.engine.replica_id, space=space.id,
                            epoch=h["epoch"], parent_seq=h["seq"], parent_digest=h["digest"],
                            ops=[Op(page(eid, "x\n"), None)], provenance=provenance)
        return client.push(space.id, batch)

    for client, prov in ((alice.client, {"agent": "bot"}), (bot, {"agent": "other-bot"})):
        with pytest.raises(InvalidRequest) as e:
            push(client, prov, "page/forged")
        assert e.value.details["reason"] == "provenance_agent", e.value.details
    assert push(bot, {"agent": "bot"}, "page/by-bot")["seq"] >= 1
    assert push(alice.client, {"tool": "quire sync"}, "page/by-alice")["seq"] >= 1
    assert authors(space, "page/forged") == []
    bot.close()


def test_a_rule_names_one_agent_within_the_rules_column(space: Space) -> None:
    ok = space.admin.admin_post(f"/v1/spaces/{space.id}/rules", {
        "effect": "allow", "who": "agent:" + "b" * 58, "actions": ["update"],
        "entries": "guardrail/*"})
    assert ok["rule"]["who"] == "agent:" + "b" * 58
    for who in ("agent:" + "b" * 59, "agent:", "agent:bad name", "agent:-x"):
        with pytest.raises(InvalidRequest):
            space.admin.admin_post(f"/v1/spaces/{space.id}/rules", {
                "effect": "deny", "who": who, "actions": ["update"], "entries": "*"})
