"""An MCP session's delegation ends with the session: ``quire mcp`` (a real process, driven
over stdio by the official MCP client) revokes the delegation it minted when its host closes
it. Before, the delegation stayed live for its whole lifetime (8 h by default) after the
session ended, and every restart of an agent host left one more live token behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.kit.cli import qjson
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
