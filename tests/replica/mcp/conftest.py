"""Fixtures of the MCP tests: ``held_scene`` (tests/replica/mcp/scene.py), once per session."""

from tests.replica.mcp.scene import held_scene  # noqa: F401 (fixture)
