"""What a ``quire mcp`` tool answered, as an MCP client receives it: one JSON object, sent
once as the result's text (docs/agents.md, "Tools")."""

from __future__ import annotations

import json
from typing import Any


def answer(result: Any) -> dict[str, Any]:
    """The answer's object (``{}`` for a result without text)."""
    if not result.content:
        return {}
    doc = json.loads(result.content[0].text)
    assert isinstance(doc, dict), doc
    return doc


def sent_bytes(result: Any) -> int:
    """The result's size as the stdio transport carries it (UTF-8 JSON)."""
    return len(result.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8"))
