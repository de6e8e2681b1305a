"""Tests of ``replica/mcp/``: ``quire mcp`` in-process, over stdio, as documented."""
