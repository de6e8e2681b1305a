"""docs/agents.md as written: every agent-host setup it documents (the ``claude mcp add``
line and each JSON config's command and args) is started as a real MCP stdio server
against a real hub process, in a home joined to a space named ``team``; each session acts
as its agent (a write delegation). Then the world model: ``bootstrap_world_model`` over MCP
and ``quire bootstrap team --json`` give the same bundle, its version is stable while
nothing changes, and a space that is not named or not joined is refused with the
documented codes."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.e2e.test_revocation_e2e import QUIRE, hub, q  # noqa: F401 (fixture)
from tests.kit.host import REPO
from tests.kit.hubproc import HubProcess
from tests.kit.mcp_answer import answer

DOC = (REPO / "docs" / "agents.md").read_text(encoding="utf-8")


def documented_setups() -> list[tuple[str, list[str]]]:
    """(where, argv after 'quire') for every host setup in the guide."""
    out = []
    for line in re.findall(r"^claude mcp add quire -- (.+)$", DOC, re.M):
        argv = shlex.split(line)
        assert argv[0] == "quire"
        out.append(("claude mcp add", argv[1:]))
    for block in re.findall(r"```json\n(.*?)```", DOC, re.S):
        if "mcpServers" not in block:
            continue  # schema sketches, not configs
        doc = json.loads(block)
        if "quire-remote" in doc.get("mcpServers", {}):
            continue  # the hub's remote endpoint: tests/hub/test_remote_mcp.py runs it
        if "mcpServers" in doc:
            server = doc["mcpServers"]["quire"]
            assert Path(server["command"]).name == "quire"
            out.append(("json config", server["args"]))
    return out


async def status_and_bundle(home: Path, args: list[str]) -> tuple[dict[str, Any], ...]:
    params = StdioServerParameters(command=QUIRE[0], args=[*QUIRE[1:], *args],
                                   env={"QUIRE_HOME": str(home),
                                        "PATH": os.environ.get("PATH", "")},
                                   cwd=str(REPO))
    async with Client(params) as client:
        st = await client.call_tool("status", {})
        wm = await client.call_tool("bootstrap_world_model", {"space": "team"})
        bad = await client.call_tool("bootstrap_world_model", {"space": "nope"})
        intro = await client.read_resource("quire://world-model/intro")
    return (answer(st), answer(wm),
            {"is_error": bad.is_error, **answer(bad)},
            {"intro": intro.contents[0].text})


def test_documented_agent_setups_work_as_written(hub: HubProcess,  # noqa: F811
                                                 tmp_path: Path) -> None:
    owner, me = tmp_path / "owner", tmp_path / "me"
    q(owner, "join", hub.url, "--invite", hub.enrollment, "--device", "owner")  # type: ignore[attr-defined]
    q(owner, "admin", "space", "create", "team")
    code = q(owner, "admin", "invite", "create", "team", "--role", "editor")["code"]
    vault = tmp_path / "vault"
    q(me, "join", hub.url, "--invite", code, "--vault", str(vault), "--device", "laptop")
    (vault / "guardrail").mkdir(parents=True)
    (vault / "guardrail" / "no-prod.md").write_text(
        "---\ntitle: no prod\nmeta:\n  severity: block\n---\nnever touch prod\n")
    (vault / "skill").mkdir()
    (vault / "skill" / "review.md").write_text("---\ntitle: review\n---\nread the diff\n")
    assert q(me, "sync")["sync"]["pushed"] == 2

    setups = documented_setups()
    assert len(setups) == 4, setups  # Claude Code (line and .mcp.json), Desktop, Cursor
    versions = set()
    for where, args in setups:
        st, wm, bad, extra = asyncio.run(status_and_bundle(me, args))
        assert st["delegation"]["scope"] == "write", (where, st)
        assert st["delegation"]["agent"] == args[args.index("--agent") + 1]
        assert [g["key"] for g in wm["guardrails"]] == ["no-prod"], (where, wm)
        assert [s["key"] for s in wm["skills"]] == ["review"]
        versions.add(json.dumps(wm["version"], sort_keys=True))
        assert bad["is_error"] and bad["error"]["code"] == "space_not_found"
        assert {"id", "name"} <= set(bad["error"]["details"]["candidates"][0])
        assert "guardrail/<slug>" in extra["intro"]
    # nothing changed between the sessions: one version
    assert len(versions) == 1, versions
    cli = q(me, "bootstrap", "team")
    assert json.dumps(cli["version"], sort_keys=True) in versions
    p = subprocess.run([*QUIRE, "bootstrap", "elsewhere", "--json"], capture_output=True,
                       text=True, cwd=REPO, env=dict(os.environ, QUIRE_HOME=str(me)),
                       timeout=60)
    assert p.returncode != 0
    assert json.loads(p.stdout.splitlines()[-1])["error"]["code"] == "space_not_found"


def test_instructions_state_the_bootstrap_protocol() -> None:
    from replica.mcp.text import INSTRUCTIONS

    assert "bootstrap_world_model" in INSTRUCTIONS
    assert "quire://world-model/intro" in INSTRUCTIONS
    assert len(INSTRUCTIONS.splitlines()) <= 12
