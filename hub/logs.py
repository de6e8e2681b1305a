"""Structured hub logs: one JSON object per line when stderr is not a terminal (an
operator's collector parses them), ``key=value`` text when a person watches.

    request ──► hub.api.observe (middleware) ──► sets the request context (id, principal)
                    │                                 │ read by every log line of the request
                    │                                 ▼ and by audit.record_txn (request_id)
                    └─► one "access" line when the response ends

A line is ``{"ts", "level", "logger", "event", "request_id"?, …fields}``. Code logs an
event with ``event(log, "guard", outcome="refused", code=…)``; the fields are ids, codes,
counts and durations only. Never tokens, invite codes, key material or entry content: the
call sites pass what may be logged, and tests/hub/test_logs.py greps a scripted session's
logs for the secrets it used.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RequestInfo:
    """What the access line says about one request; filled in as the request proceeds
    (authentication sets the principal, the error handler the code). Shared by reference
    with the threads the request runs code in."""

    request_id: str
    user: str | None = None
    device: str | None = None
    agent: str | None = None
    code: str | None = None
    reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


_current: contextvars.ContextVar[RequestInfo | None] = contextvars.ContextVar(
    "quire_request", default=None)


def current() -> RequestInfo | None:
    return _current.get()


def current_request_id() -> str | None:
    info = _current.get()
    return info.request_id if info is not None else None


def bind(info: RequestInfo | None) -> contextvars.Token[RequestInfo | None]:
    return _current.set(info)


def unbind(token: contextvars.Token[RequestInfo | None]) -> None:
    _current.reset(token)


def event(logger: logging.Logger, name: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log one structured event (``name``) with ``fields`` (None values are dropped)."""
    if logger.isEnabledFor(level):
        logger.log(level, name, extra={"quire": {k: v for k, v in fields.items()
                                                 if v is not None}})


def failure(logger: logging.Logger, name: str, **fields: Any) -> None:
    """``event`` at error level with the traceback of the exception being handled: a bug's,
    never an expected outage's (those are warnings without one)."""
    logger.error(name, exc_info=True,
                 extra={"quire": {k: v for k, v in fields.items() if v is not None}})


def reason_of(details: dict[str, Any]) -> str:
    """A refusal's reason: its ``details.reason`` when that is a short word, else ""."""
    r = details.get("reason")
    return r if isinstance(r, str) and r.replace("_", "").isalnum() and len(r) <= 40 else ""


def _record_fields(record: logging.LogRecord) -> dict[str, Any]:
    out: dict[str, Any] = {}
    info = _current.get()
    if info is not None:
        out["request_id"] = info.request_id
    out.update(getattr(record, "quire", None) or {})
    return out


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        doc.update(_record_fields(record))
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False, default=str, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%H:%M:%S", time.localtime(record.created))
        parts = [f"{ts}.{int(record.msecs):03d}", record.levelname, record.name,
                 record.getMessage()]
        parts += [f"{k}={v}" for k, v in _record_fields(record).items()]
        line = " ".join(str(p) for p in parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def setup(level: str = "info", fmt: str = "auto", stream: Any = None) -> None:
    """Configure the root logger once for a hub process. ``fmt``: ``json``, ``text`` or
    ``auto`` (JSON unless the stream is a terminal). Uvicorn's own loggers propagate here
    and keep to warnings: the access line is ours."""
    stream = stream or sys.stderr
    if fmt == "auto":
        fmt = "text" if getattr(stream, "isatty", lambda: False)() else "json"
    if fmt not in ("json", "text"):
        raise ValueError(f"log_format must be auto, json or text, not {fmt!r}")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        lg = logging.getLogger(name)
        lg.handlers.clear()
        lg.propagate = True
        lg.setLevel(max(logging.WARNING, root.level))
