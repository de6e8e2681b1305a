"""``POST /console/csp-report``: where browsers report what the console's
Content-Security-Policy blocked (its ``report-uri``, hub/console/http.py).

    browser ──(a blocked script, style, image, frame, form target …)──► POST csp-report
        └─► count: quire_console_csp_reports_total{directive}     (every report)
        └─► log:   csp_report directive=… blocked=… page=…         (at most LOG_BURST, then
                                                                   LOG_PER_S a second)

The console runs no script and loads nothing from elsewhere, so a report means something
tried: content that got past the renderer and sanitizer (hub/console/markdown.py), an
extension, or a page of ours that broke its own policy. None is expected, and the browser
tests show none after rendering hostile content. Anyone may post here (browsers send no
token with a report), so nothing is stored: the body is read up to ``MAX_BYTES``, the
directive label is one of the policy's own names (else ``other``), logged fields are cut
short, and the log is rate-limited per process (the counter is not).

Both formats are read: ``application/csp-report`` (``report-uri``, sent at once) and the
Reporting API's ``application/reports+json`` (``report-to``, batched by the browser).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from hub import logs
from hub.api.http import hub_of
from hub.ratelimit import RateLimiter

PATH = "/console/csp-report"
MAX_BYTES = 64 * 1024
LOG_PER_S, LOG_BURST = 1.0, 20
FIELD_MAX = 200
DIRECTIVES = {"default-src", "script-src", "script-src-elem", "script-src-attr", "style-src",
              "style-src-elem", "style-src-attr", "img-src", "font-src", "connect-src",
              "media-src", "object-src", "frame-src", "child-src", "worker-src",
              "manifest-src", "form-action", "frame-ancestors", "base-uri", "navigate-to",
              "prefetch-src", "trusted-types", "require-trusted-types-for"}

log = logging.getLogger("quire.hub")
_log_limit = RateLimiter(LOG_PER_S, LOG_BURST, lambda: int(time.monotonic() * 1000))


async def _body(request: Request) -> bytes | None:
    data = b""
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BYTES:
            return None
    return data


def parse(raw: bytes) -> list[dict[str, str]]:
    """The reports in a body of either format, as ``{directive, blocked, page}``."""
    try:
        doc = json.loads(raw)
    except ValueError:
        return []
    items: list[Any] = []
    if isinstance(doc, dict) and isinstance(doc.get("csp-report"), dict):
        r = doc["csp-report"]
        items.append({"directive": r.get("effective-directive") or r.get("violated-directive"),
                      "blocked": r.get("blocked-uri"), "page": r.get("document-uri")})
    elif isinstance(doc, list):
        for rep in doc[:100]:
            body = rep.get("body") if isinstance(rep, dict) else None
            if isinstance(body, dict) and rep.get("type") == "csp-violation":
                items.append({"directive": body.get("effectiveDirective"),
                              "blocked": body.get("blockedURL"),
                              "page": body.get("documentURL")})
    out = []
    for it in items:
        d = str(it["directive"] or "").split(" ", 1)[0].lower()
        out.append({"directive": d if d in DIRECTIVES else "other",
                    "blocked": str(it["blocked"] or "")[:FIELD_MAX],
                    "page": str(it["page"] or "")[:FIELD_MAX]})
    return out


async def csp_report(request: Request) -> Response:
    hub = hub_of(request)
    raw = await _body(request)
    if raw is None:
        return Response(status_code=413)
    for r in parse(raw):
        hub.metrics.csp_reports.labels(directive=r["directive"]).inc()
        if _log_limit.allow("csp")[0]:
            logs.event(log, "csp_report", logging.WARNING, **r)
    return Response(status_code=204)
