"""Proposals end to end (docs/agents.md, "Proposals"): a real ``quire hub serve``, the real
CLI and a real MCP stdio session. The agent lowers a guardrail and is refused at the write,
with the hint to propose; it files the proposal with its reason; the owner lists it (names
and local times, no ids) and accepts it with ``quire proposals accept``; a second member's
replica pulls the hub-attested batch, verifies it and applies it; the agent's
``proposals`` tool shows it accepted, by the owner's name.

About 20 s of wall time (a hub process, a dozen CLI runs, an MCP server): it runs with
``QUIRE_LONG_E2E`` set, so the default run keeps within its budget; the same flow runs
in-process by default (tests/hub/proposals/, tests/hub/console/test_console_proposals.py,
tests/hub/proposals/test_propose_tool.py)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.e2e.test_agent_session_e2e import call
from tests.e2e.test_revocation_e2e import QUIRE, hub, q  # noqa: F401 (fixture)
from tests.e2e.test_typed_rules_e2e import write_guard
from tests.kit.host import REPO
from tests.kit.hubproc import HubProcess

pytestmark = pytest.mark.skipif(not os.environ.get("QUIRE_LONG_E2E"),
                                reason="about 20 s: set QUIRE_LONG_E2E=1")

LOWERED = {"entry_id": "guardrail/no-force-push", "title": "no force push",
           "body": "force-push only to your own branches\n", "meta": {"severity": "warn"}}


def test_agent_proposes_owner_accepts_with_the_cli_and_a_replica_applies_it(
        hub: HubProcess, tmp_path: Path) -> None:  # noqa: F811
    owner, ann, bob = tmp_path / "owner", tmp_path / "ann", tmp_path / "bob"
    q(owner, "join", hub.url, "--invite", hub.enrollment, "--device", "owner")  # type: ignore[attr-defined]
    q(owner, "admin", "space", "create", "team")
    codes = [q(owner, "admin", "invite", "create", "team", "--role", "editor")["code"]
             for _ in range(2)]
    q(ann, "join", hub.url, "--invite", codes[0], "--vault", str(tmp_path / "ann-vault"),
      "--device", "ann")
    write_guard(tmp_path / "ann-vault", "block")
    assert q(ann, "sync")["sync"]["pushed"] == 1
    q(bob, "join", hub.url, "--invite", codes[1], "--vault", str(tmp_path / "bob-vault"),
      "--device", "bob")
    bob_file = tmp_path / "bob-vault" / "guardrail" / "no-force-push.md"
    assert "severity: block" in bob_file.read_text()

    params = StdioServerParameters(
        command=QUIRE[0], args=[*QUIRE[1:], "mcp", "--space", "team", "--agent", "bot",
                                "--write"],
        env={"QUIRE_HOME": str(ann), "PATH": os.environ.get("PATH", ""),
             **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ
                else {})}, cwd=str(REPO))
    env = dict(os.environ, QUIRE_HOME=str(owner))

    def owner_accepts() -> tuple[str, dict[str, Any]]:
        """The owner (no replica of the space here) lists it, then accepts it."""
        listed = subprocess.run([*QUIRE, "proposals", "list", "--space", "team"],
                                capture_output=True, text=True, env=env, cwd=REPO,
                                timeout=60)
        assert listed.returncode == 0, listed.stderr
        return listed.stdout, q(owner, "proposals", "accept", "1", "--space", "team")

    async def agent() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(params) as client:
            out["write"] = await call(client, "write", LOWERED)
            out["propose"] = await call(client, "propose", dict(
                LOWERED, reason="we force-push rebased feature branches"))
            out["listed"], out["accepted"] = await asyncio.to_thread(owner_accepts)
            out["proposals"] = await call(client, "proposals", {})
        return out

    out = asyncio.run(agent())
    err, w = out["write"]
    assert err and w["error"]["code"] == "policy_denied", w
    assert "propose" in w["error"]["details"]["next"]
    err, p = out["propose"]
    assert not err and p["state"] == "open", p
    # names and local times for people, no ids
    listed = out["listed"]
    assert "bot of " in listed and "you may accept" in listed and "reason" in listed
    assert not re.search(r"\b[0-9a-hjkmnp-tv-z]{26}\b", listed), listed
    done = out["accepted"]
    assert done["proposal"]["state"] == "accepted" and done["seq"] == 2, done

    # bob's replica verifies the hub-attested batch (its device is attested) and applies it
    res = q(bob, "sync")
    assert res["sync"]["pulled"] >= 1, res
    text = bob_file.read_text()
    assert "severity: warn" in text and "force-push only to your own branches" in text

    err, mine = out["proposals"]
    assert not err, mine
    [row] = mine["proposals"]
    assert row["state"] == "accepted" and row["seq"] == 2
    assert row["decided_by"] and not re.fullmatch(r"[0-9a-hjkmnp-tv-z]{26}", row["decided_by"])
