"""An MCP session's delegation ends with the session: ``quire mcp`` (a real process, driven
over stdio by the official MCP client) revokes the delegation it minted when its host closes
it. Before, the delegation stayed live for its whole lifetime (8 h by default) after the
session ended, and every restart of an agent host left one more live token behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.kit.cli import QUIRE, qjson
from tests.kit.host import REPO
from tests.replica.mcp.test_mcp_agent_principal import (  # noqa: F401 - the fixture
    agent_hub,
    new_team,
    run_session,
)

pytestmark = pytest.mark.e2e


def test_a_sessions_delegation_is_revoked_when_the_session_ends(
        agent_hub: tuple[Any, Path], tmp_path: Path) -> None:  # noqa: F811 - the fixture
    team = new_team(agent_hub, tmp_path)
    me = team.member("closer")
    s = run_session(me.home, ["--space", team.name, "--agent", "closer-bot"], [("status", {})])
    assert s["started"], s
    minted = s["results"][0][1]["delegation"]["delegation"]
    listed = {d["id"]: d for d in qjson(me.home, "delegate", "list")["delegations"]}
    assert listed[minted]["revoked_at"] is not None, listed[minted]


def test_a_session_stopped_by_sigterm_revokes_its_delegation_too(
        agent_hub: tuple[Any, Path], tmp_path: Path) -> None:  # noqa: F811 - the fixture
    """Hosts stop a server with SIGTERM as often as by closing its input: the delegation
    is revoked either way."""
    from mcp.types import LATEST_PROTOCOL_VERSION

    team = new_team(agent_hub, tmp_path)
    me = team.member("termed")
    env = {**os.environ, "QUIRE_HOME": str(me.home)}
    proc = subprocess.Popen([*QUIRE, "mcp", "--space", team.name, "--agent", "termed-bot"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=REPO)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        def send(msg: dict[str, Any]) -> None:
            assert proc.stdin is not None
            proc.stdin.write((json.dumps(msg) + "\n").encode())
            proc.stdin.flush()

        def answer(i: int) -> dict[str, Any]:
            assert proc.stdout is not None
            while True:  # bounded by the process: it ends, or answers
                line = proc.stdout.readline()
                assert line, "the server ended before answering"
                doc = json.loads(line)
                if doc.get("id") == i:
                    return doc

        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}})
        answer(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "status", "arguments": {}}})
        res = answer(2)["result"]
        status = res.get("structuredContent") or json.loads(res["content"][0]["text"])
        minted = status["delegation"]["delegation"]
        assert minted
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()
    listed = {d["id"]: d for d in qjson(me.home, "delegate", "list")["delegations"]}
    assert listed[minted]["revoked_at"] is not None, listed[minted]
