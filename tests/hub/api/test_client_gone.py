"""A client that goes away in the middle of sending its body is no hub error.

Found by tests/e2e/test_save_race_fuzz_e2e.py: a `quire sync` or watcher killed while
sending a batch made ``read_json`` (hub/api/http.py) raise Starlette's ``ClientDisconnect``,
which the hub answered and counted as a 500 ``internal`` and logged with two tracebacks,
the signal operators alert on. A body that ends early is a refused request now. Real hub
process; the request is written by hand on a socket and the socket closed; the outcome is
polled in the hub's log."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import httpx2

from tests.kit.hubproc import init_hub, serve_hub
from tests.kit.watcher import wait_for


def _refusals(metrics_url: str, code: str) -> float:
    text = httpx2.get(metrics_url, timeout=10).text
    return sum(float(v) for v in re.findall(
        r'^quire_refusals_total\{code="' + code + r'"[^}]*\} (\S+)$', text, re.M))


def test_a_client_gone_mid_body_is_a_refused_request_not_an_internal_error(
        tmp_path: Path) -> None:
    data = tmp_path / "hub"
    init_hub(data)
    hub = serve_hub(data, env={"QUIRE_HUB_LOG_LEVEL": "info"})
    try:
        with socket.create_connection(("127.0.0.1", hub.port), timeout=10) as s:
            s.sendall(b"POST /v1/invites/redeem HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      b"Content-Type: application/json\r\nContent-Length: 4000\r\n\r\n"
                      b'{"code": "qi_')
        # the hub answers the cut request; its access line says how
        def answered() -> list[dict[str, object]]:
            return [x for line in hub.log.read_text().splitlines() if line.startswith("{")
                    and (x := json.loads(line)).get("route") == "/v1/invites/redeem"]
        lines = wait_for(answered, 60, lambda: hub.log.read_text()[-3000:])
        assert (lines[0]["status"], lines[0].get("code")) == (422, "invalid_request"), lines
        log = hub.log.read_text()
        assert "Traceback" not in log and "unhandled error" not in log, log[-3000:]
        assert _refusals(hub.metrics_url, "internal") == 0
    finally:
        hub.stop()
