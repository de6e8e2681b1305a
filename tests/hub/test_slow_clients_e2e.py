"""Slow clients against a real ``quire hub serve`` reached without a proxy: a connection
that sends its headers (slowloris) or its body a byte at a time is cut at the hub's
``header_timeout_s`` / ``body_timeout_s``, and honest requests, event streams included,
are untouched. Before, uvicorn kept such a connection open for as long as the client kept
sending (no header or body timeout), so a few hundred of them held every socket.

Each slow client is a bounded loop on loopback that stops by itself; the test waits for the
hub to close the connection by polling, with a generous deadline."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import httpx2
import pytest

from tests.kit.hubproc import HubProcess, init_hub, serve_hub

pytestmark = pytest.mark.e2e
DEADLINE_S = 20.0  # far beyond the timeouts set below: a cut comes long before


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    data = tmp_path_factory.mktemp("slow") / "hub"
    init_hub(data)
    proc = serve_hub(data, env={"QUIRE_HUB_HEADER_TIMEOUT_S": "2",
                                "QUIRE_HUB_BODY_TIMEOUT_S": "3"})
    yield proc
    proc.stop()


def _dribble(port: int, first: bytes, drip: bytes) -> tuple[bool, bytes, float]:
    """Send ``first``, then ``drip`` a byte every 0.2 s until the hub closes the connection
    or ``DEADLINE_S`` passes: (closed by the hub, what it answered, seconds it took)."""
    start = time.monotonic()
    got = b""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(first)
        s.settimeout(0.2)
        i = 0
        while time.monotonic() - start < DEADLINE_S:
            try:
                chunk = s.recv(65536)
                if not chunk:
                    return True, got, time.monotonic() - start
                got += chunk
            except TimeoutError:
                pass
            except (ConnectionResetError, BrokenPipeError):
                return True, got, time.monotonic() - start
            try:
                s.sendall(drip[i % len(drip):i % len(drip) + 1])
            except (ConnectionResetError, BrokenPipeError):
                return True, got, time.monotonic() - start
            i += 1
    return False, got, time.monotonic() - start


def test_headers_sent_a_byte_at_a_time_are_cut(hub: HubProcess) -> None:
    closed, _got, took = _dribble(hub.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n",
                                  b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n")
    assert closed, f"the connection was still open after {took:.0f} s"
    assert httpx2.get(hub.url + "/healthz").status_code == 200  # others are served


def test_a_body_sent_a_byte_at_a_time_is_cut_with_an_answer(hub: HubProcess) -> None:
    head = (b"POST /v1/invites/redeem HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
            b"\r\nContent-Length: 2000\r\n\r\n")
    closed, got, took = _dribble(hub.port, head, b" ")
    assert closed, f"the connection was still open after {took:.0f} s"
    assert b"body_timeout" in got, got[:300]
    # answered at once (too large for this endpoint): the rest is not waited for either
    head = head.replace(b"Content-Length: 2000", b"Content-Length: 100000")
    closed, got, took = _dribble(hub.port, head, b" ")
    assert closed and b"too_large" in got, (took, got[:300])
    r = httpx2.post(hub.url + "/v1/invites/redeem", json={"code": "qi_x", "device_name": "d",
                                                         "device_key": "k"})
    assert r.status_code in (401, 404, 422), r.text  # an honest body is read and judged
    assert b"body_timeout" not in r.content

