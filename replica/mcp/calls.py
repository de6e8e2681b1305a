"""How every ``quire mcp`` tool call is answered (replica/mcp/server.py registers the tools).

    call_tool(name, arguments)
      ├─ unknown tool, invalid arguments ──► {"error": {code, message, details}, "signals"}
      ├─ session.before_call(tool, client) (delegation check, provenance)  ── same form
      └─ the tool ──► _result(): its dict + "signals", or the error form; ``isError`` set on
                      every failure

Every answer is sent once, as the text of the result (JSON), never again as structured
content; it is bounded by ``MAX_RESULT_BYTES`` counted on the result as serialized for the
wire (replica/mcp/bound.py): one that would be larger is refused (``too_large``), never cut.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from replica.mcp.bound import MAX_RESULT_BYTES
from shared.errors import InvalidRequest, QuireError, TooLarge


def hints(read_only: bool, destructive: bool = False, idempotent: bool = True
          ) -> ToolAnnotations:
    """Every tool says whether it only reads, may destroy (replace or delete an entry) and
    may be repeated with the same arguments to no further effect."""
    return ToolAnnotations(read_only_hint=read_only, destructive_hint=destructive,
                           idempotent_hint=idempotent, open_world_hint=False)


def result_bytes(result: CallToolResult) -> int:
    """The size of a tool result as the stdio transport sends it (UTF-8 JSON)."""
    return len(result.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8"))


def _answer(doc: dict[str, Any], error: bool) -> CallToolResult:
    """The result carrying ``doc`` once, as text; ``too_large`` when it would pass the
    bound."""
    text = json.dumps(doc, ensure_ascii=False, sort_keys=True)
    result = CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)
    size = result_bytes(result)
    if size > MAX_RESULT_BYTES:
        raise TooLarge(f"result too large ({size} bytes as sent, at most {MAX_RESULT_BYTES}); "
                       "ask for less (a smaller limit)",
                       {"bytes": size, "max_bytes": MAX_RESULT_BYTES})
    return result


def _error_result(session: Any, e: QuireError) -> CallToolResult:
    doc = {"error": {"code": e.code, "message": e.message, "details": e.details},
           "signals": session.signals()}
    try:
        return _answer(doc, True)
    except TooLarge as big:  # an error whose details would not fit: without them
        return _answer({"error": {"code": e.code, "message": e.message[:2000],
                                  "details": {"omitted": big.message}},
                        "signals": doc["signals"]}, True)


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
        return _answer(doc, error)
    except TooLarge as e:
        return _error_result(session, e) if not error else _answer(
            {"error": {"code": doc["error"]["code"], "message": doc["error"]["message"][:2000],
                       "details": {"omitted": e.message}}, "signals": doc["signals"]}, True)


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
