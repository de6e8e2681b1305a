"""An MCP session is an agent principal, end to end: a real ``quire hub serve`` process, the
real CLI and a real MCP stdio session (``quire mcp --space team --agent bot --write``).

The session obtains its own delegation, so a rule ``deny create --who agents --entries
skill/*`` refuses the agent's skill while the same member's own CLI publishes it; the
audit event of the agent's publication names the agent and the delegation, and the batch
carries signed provenance (agent, client, session, tool); revoking the delegation makes
the next MCP call fail with a clear error; the skill the rule refused stays the agent's
(the member's own sync does not publish it). Before this, ``quire mcp --agent`` published
with the device's own credential (``actor.agent: null``, agent rules not applied)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from replica.hubclient.auth import auth_for
from replica.hubclient.client import HubClient
from replica.machine.credentials import CredentialFile
from replica.machine.home import Home
from tests.e2e.test_local_rules_e2e import hub_batches
from tests.e2e.test_revocation_e2e import QUIRE, hub, q  # noqa: F401 (fixture)
from tests.kit.host import REPO
from tests.kit.hubproc import HubProcess
from tests.kit.mcp_answer import answer


def audit_events(home: Path, space_id: str) -> list[dict[str, Any]]:
    h = Home(home).hubs()[0]
    auth = auth_for(h.key_path, CredentialFile(h.credential_path, h.key_path))
    with HubClient(h.url, auth=auth, hub_key=h.public_key) as c:
        return list(c.audit(space_id))


async def call(client: Client, name: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    r = await client.call_tool(name, args)
    return r.is_error, answer(r)


def test_mcp_session_acts_as_its_agent(hub: HubProcess, tmp_path: Path) -> None:  # noqa: F811
    owner, ann = tmp_path / "owner", tmp_path / "ann"
    q(owner, "join", hub.url, "--invite", hub.enrollment, "--device", "owner")  # type: ignore[attr-defined]
    space = q(owner, "admin", "space", "create", "team")["space"]
    code = q(owner, "admin", "invite", "create", "team", "--role", "editor")["code"]
    vault = tmp_path / "ann-vault"
    q(ann, "join", hub.url, "--invite", code, "--vault", str(vault), "--device", "ann")
    rule = q(owner, "admin", "rules", "add", "team", "--deny", "create", "--who", "agents",
             "--entries", "skill/*")["rule"]

    params = StdioServerParameters(
        command=QUIRE[0], args=[*QUIRE[1:], "mcp", "--space", "team", "--agent", "bot",
                                "--write", "--model", "test-model"],
        env={"QUIRE_HOME": str(ann), "PATH": os.environ.get("PATH", "")}, cwd=str(REPO))

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(params) as client:
            err, st = await call(client, "status", {})
            assert not err, st
            out["delegation"] = st["delegation"]
            assert st["delegation"]["agent"] == "bot" and st["delegation"]["scope"] == "write"
            out["writes"] = {}
            for eid in ("skill/deploy", "page/notes"):
                out["writes"][eid] = await call(client, "write", {
                    "entry_id": eid, "title": eid, "body": "by the agent\n"})
            err, s = await call(client, "sync", {})
            assert not err, s
            out["sync"] = s
            # the member revokes the delegation: the very next call fails, clearly
            q(ann, "delegate", "revoke", st["delegation"]["delegation"])
            err, after = await call(client, "status", {})
            out["after_revoke"] = (err, after)
            err, again = await call(client, "search", {"query": "agent"})
            out["again"] = (err, again)
        return out

    out = asyncio.run(session())
    s = out["sync"]
    # the agent's skill is refused at the write by the agents rule (judged locally with the
    # head the delegated token got; the hub would refuse it too), its page is published
    err, w = out["writes"]["skill/deploy"]
    assert err and [(d["id"], d["action"], d["rule"]) for d in
                    w["error"]["details"]["denied"]] == [("skill/deploy", "create", rule["id"])]
    assert not out["writes"]["page/notes"][0], out["writes"]
    assert s["policy_denied"] == [] and s["pushed_changes"] == 1, s
    batches = hub_batches(owner, space["id"])
    [agent_batch] = batches
    assert [op["entry"]["id"] for op in agent_batch["ops"]] == ["page/notes"]
    prov = agent_batch["provenance"]
    assert prov["agent"] == "bot" and prov["model"] == "test-model"
    assert prov["tool"] == "mcp:sync" and prov["session"] and prov["client"]

    delegation = out["delegation"]["delegation"]
    pub = [e for e in audit_events(owner, space["id"]) if e["action"] == "publish"]
    assert pub[0]["actor"]["agent"] == "bot" and pub[0]["actor"]["delegation"] == delegation

    for err, doc in (out["after_revoke"], out["again"]):
        assert err is True, doc
        assert doc["error"]["code"] == "unauthorized", doc
        assert doc["error"]["details"]["reason"] == "delegation_revoked", doc
        assert "revoked" in doc["error"]["message"]

    # the agent's refused skill is the agent's: the member's own sync does not publish it
    # under the member's credential (it never left the agent's overlay: not in the vault)
    res = q(ann, "sync")
    assert res["sync"]["pushed"] == 0, res
    assert not (vault / "skill" / "deploy.md").exists()
    assert len(hub_batches(owner, space["id"])) == 1
    # the member may write the same skill themselves: published as the member
    (vault / "skill").mkdir(parents=True, exist_ok=True)
    (vault / "skill" / "deploy.md").write_text("---\ntitle: skill/deploy\n---\nby ann\n")
    res = q(ann, "sync")
    assert res["sync"]["policy_denied"] == [] and res["sync"]["pushed"] == 1, res
    last = hub_batches(owner, space["id"])[-1]
    assert [op["entry"]["id"] for op in last["ops"]] == ["skill/deploy"]
    assert not (last["provenance"] or {}).get("agent")
