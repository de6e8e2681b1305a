"""The agent guide covers every MCP tool, and the CLI reference every conflicts verb."""

from __future__ import annotations

from pathlib import Path

import pytest

from replica.app.agent_session import AgentRequired
from replica.mcp.server import TOOLS, Session, build_server

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_mcp_tool_is_documented_for_agents():
    text = (DOCS / "agents.md").read_text()
    assert not [t for t in TOOLS if f"`{t}`" not in text]
    for host in ("Claude Code", "Claude Desktop", "Cursor", "stdio"):
        assert host in text


def test_the_server_registers_exactly_the_documented_tools():
    server = build_server(Session(agent="docs-bot", delegate=False, env={}))
    assert {t.name for t in server._tool_manager.list_tools()} == set(TOOLS)


def test_a_session_without_an_agent_name_is_refused_as_documented():
    """Defence in depth behind ``quire mcp``'s own refusal: no Session acts unnamed."""
    with pytest.raises(AgentRequired) as e:
        Session(delegate=False, env={})
    assert e.value.code == "usage" and "--agent NAME" in e.value.message
    assert "QUIRE_AGENT" in e.value.message
    assert "--agent NAME" in (DOCS / "agents.md").read_text()


def test_every_conflicts_verb_is_in_the_cli_reference():
    text = (DOCS / "cli.md").read_text()
    for verb in ("list", "show", "claim", "renew", "release", "resolve"):
        assert f"quire conflicts {verb}" in text
    assert "quire mcp" in text


def test_every_remote_tool_is_documented_in_the_remote_endpoint_section():
    from hub.remote_mcp.server import build_server
    from hub.remote_mcp.tools import CALLS

    section = (DOCS / "agents.md").read_text().split("\n## Remote endpoint\n", 1)[1]
    served = {t.name for t in build_server(None)._tool_manager.list_tools()}
    assert served == set(CALLS)
    assert not [t for t in served if f"| `{t}` |" not in section]
    for path in ("/mcp", "/oauth/authorize", "/oauth/token", "/oauth/register",
                 "/console/consent", "/console/agents"):
        assert path in section
