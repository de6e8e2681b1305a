"""How every ``quire mcp`` tool call is answered (replica/mcp/server.py registers the tools).

    call_tool(name, arguments)
      ├─ unknown tool, invalid arguments ──► {"error": {code, message, details}, "signals"}
      ├─ session.before_call(tool, client) (delegation check, provenance)  ── same form
      └─ the tool ──► _result(): its dict + "signals", bounded to MAX_RESULT_CHARS, or the
                      error form; ``isError`` set on every failure
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent

from shared.errors import InvalidRequest, LocalError, QuireError

MAX_RESULT_CHARS = 48 * 1024  # a tool result larger than this is refused, never cut silently


def _bounded(doc: dict[str, Any]) -> str:
    text = json.dumps(doc, ensure_ascii=False, sort_keys=True)
    if len(text) > MAX_RESULT_CHARS:
        raise LocalError(f"result too large ({len(text)} characters); narrow the request "
                         "(smaller limit, max_chars, or a page)")
    return text


def _error_result(session: Any, e: QuireError) -> CallToolResult:
    doc = {"error": {"code": e.code, "message": e.message, "details": e.details},
           "signals": session.signals()}
    return CallToolResult(content=[TextContent(type="text", text=_bounded(doc))],
                          structured_content=doc, is_error=True)


def _result(session: Any, fn: Callable[[], dict[str, Any]]) -> CallToolResult:
    try:
        doc = dict(fn())
        error = False
    except QuireError as e:
        doc, error = {"error": {"code": e.code, "message": e.message, "details": e.details}}, True
    except OSError as e:
        doc, error = {"error": {"code": "local_error", "message": f"{type(e).__name__}: {e}",
                                "details": {}}}, True
    doc["signals"] = session.signals()
    try:
        text = _bounded(doc)
    except QuireError as e:
        doc = {"error": {"code": e.code, "message": e.message, "details": {}},
               "signals": doc["signals"]}
        text, error = _bounded(doc), True
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=doc, is_error=error)


class QuireMCP(MCPServer):
    """The SDK's server with Quire's call discipline: before a tool runs, the session checks
    its delegation and records the tool and client for provenance; every failure,
    argument validation and unknown tools included, is the one documented error object
    (``{"error": {code, message, details}, "signals"}``, ``isError``)."""

    def __init__(self, session: Any, **kw: Any):
        super().__init__(**kw)
        self.quire = session

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Any = None) -> Any:
        session = self.quire
        try:
            tool = self._tool_manager.get_tool(name)
            if tool is None:
                raise InvalidRequest(f"unknown tool {name!r}", {"tools": sorted(
                    t.name for t in self._tool_manager.list_tools())})
            problems = _argument_problems(tool, arguments)
            if problems:
                raise InvalidRequest("invalid arguments: " + "; ".join(
                    f"{p['field']}: {p['problem']}" for p in problems), {"fields": problems})
            session.before_call(name, _client_name(context))
        except QuireError as e:
            return _error_result(session, e)
        return await super().call_tool(name, arguments, context)


def _client_name(context: Any) -> str | None:
    try:
        info = context.request_context.session.client_params.client_info
        return f"{info.name}/{info.version}"[:200]
    except AttributeError:
        return None


def _argument_problems(tool: Tool, arguments: Any) -> list[dict[str, str]]:
    """Every problem with the arguments, by field (pydantic's validation of the tool's
    argument model, which forbids unknown fields)."""
    from pydantic import ValidationError

    if not isinstance(arguments, dict):
        return [{"field": "", "problem": "arguments must be an object"}]
    try:
        tool.fn_metadata.arg_model.model_validate(arguments)
    except ValidationError as e:
        return [{"field": ".".join(str(p) for p in err["loc"]) or "(arguments)",
                 "problem": err["msg"]} for err in e.errors()]
    return []
