"""Proxy headers count only from trusted proxies (``trusted_proxies``, default none).

Attack (issue 17): after draining the invite-redemption bucket from 127.0.0.1, attempts
with a different ``X-Forwarded-For`` each all reached the handler, because uvicorn trusts
proxy headers from 127.0.0.1 by default. Tested against ``quire hub serve`` processes."""

from __future__ import annotations

import math
import time
from pathlib import Path

import httpx2
import pytest

from hub.clientaddr import check_header, client_address, parse_trusted
from tests.kit.hubproc import init_hub, serve_hub

T = parse_trusted("127.0.0.1, 10.0.0.0/8, ::1")


@pytest.mark.parametrize("peer,headers,want", [
    ("203.0.113.9", [("x-forwarded-for", "1.2.3.4")], "203.0.113.9"),  # untrusted peer
    ("127.0.0.1", [("x-forwarded-for", "1.2.3.4")], "1.2.3.4"),
    ("127.0.0.1", [("x-forwarded-for", "6.6.6.6, 1.2.3.4")], "1.2.3.4"),  # spoofed left part
    ("127.0.0.1", [("x-forwarded-for", "1.2.3.4, 10.1.1.1")], "1.2.3.4"),  # two proxies
    ("127.0.0.1", [("x-forwarded-for", "1.2.3.4"), ("x-forwarded-for", "5.6.7.8")], "5.6.7.8"),
    ("127.0.0.1", [("x-forwarded-for", "junk, 10.1.1.1")], "10.1.1.1"),
    ("127.0.0.1", [("x-forwarded-for", "10.1.1.1")], "10.1.1.1"),  # all trusted: leftmost
    ("127.0.0.1", [], "127.0.0.1"),
    ("::1", [("x-forwarded-for", "192.0.2.1:5555")], "192.0.2.1"),
    ("testclient", [("x-forwarded-for", "1.2.3.4")], "testclient"),
    # issue 29: a client's own Forwarded, passed on by a proxy that sets X-Forwarded-For,
    # is not read (it was preferred, so a client picked its address)
    ("127.0.0.1", [("forwarded", "for=6.6.6.6"), ("x-forwarded-for", "192.0.2.60")],
     "192.0.2.60"),
    ("127.0.0.1", [("forwarded", "for=6.6.6.6")], "127.0.0.1"),
    ("127.0.0.1", [("x-real-ip", "6.6.6.6")], "127.0.0.1"),
])
def test_client_address(peer: str, headers: list[tuple[str, str]], want: str) -> None:
    assert client_address(peer, headers, T) == want


@pytest.mark.parametrize("header,headers,want", [
    ("forwarded", [("forwarded", 'for="[2001:db8::1]:4711";proto=https')], "2001:db8::1"),
    ("forwarded", [("forwarded", "for=6.6.6.6, for=192.0.2.60"),
                   ("x-forwarded-for", "7.7.7.7")], "192.0.2.60"),
    ("forwarded", [("x-forwarded-for", "7.7.7.7")], "127.0.0.1"),  # only the one header
    ("x-real-ip", [("x-real-ip", "192.0.2.7"), ("x-forwarded-for", "7.7.7.7")], "192.0.2.7"),
])
def test_only_the_configured_proxy_header_is_read(header: str, headers: list[tuple[str, str]],
                                                  want: str) -> None:
    assert client_address("127.0.0.1", headers, T, check_header(header)) == want


def test_untrusted_peer_headers_ignored_by_default() -> None:
    assert client_address("127.0.0.1", [("x-forwarded-for", "1.2.3.4")], ()) == "127.0.0.1"
    with pytest.raises(ValueError, match="trusted_proxies"):
        parse_trusted("10.0.0.0/8, localhost")
    with pytest.raises(ValueError, match="proxy_header"):
        check_header("x-client-ip")


def _redeem_attempts(url: str, n: int, xff: list[str]) -> tuple[int, float]:
    """n redemptions of an unknown code; returns (how many reached the handler, seconds)."""
    reached = 0
    t0 = time.monotonic()
    with httpx2.Client(base_url=url, timeout=30) as c:
        for i in range(n):
            r = c.post("/v1/invites/redeem", headers={"X-Forwarded-For": xff[i % len(xff)]},
                       json={"code": "qi_nope", "device_name": "d", "device_key": "A" * 43})
            # reached the handler (an unknown invite) or stopped by the limit, nothing else
            assert (r.status_code, r.json()["error"]["code"]) in (
                (401, "unauthorized"), (429, "rate_limited")), r.text
            reached += r.status_code != 429
    return reached, time.monotonic() - t0


def test_rotating_forwarded_for_from_untrusted_peer_does_not_escape_the_limit(
        tmp_path: Path) -> None:
    data = tmp_path / "hub"
    init_hub(data)
    hub = serve_hub(data)
    try:
        rotating = [f"198.51.100.{i}" for i in range(1, 255)]
        reached, took = _redeem_attempts(hub.url, 40, rotating)
    finally:
        hub.stop()
    # burst 10, then 1 a second: what the one peer may get in the time the run took
    assert reached <= 10 + math.ceil(took) + 1, (reached, took)


def test_forwarded_for_from_a_configured_proxy_is_honoured(tmp_path: Path) -> None:
    data = tmp_path / "hub"
    init_hub(data)
    hub = serve_hub(data, env={"QUIRE_HUB_TRUSTED_PROXIES": "127.0.0.1"})
    try:
        distinct = [f"198.51.100.{i}" for i in range(1, 41)]
        reached, _ = _redeem_attempts(hub.url, 40, distinct)
        assert reached == 40  # each client its own bucket
        one, took = _redeem_attempts(hub.url, 40, ["203.0.113.7"])
        assert one <= 10 + math.ceil(took) + 1, (one, took)  # one client is still limited
    finally:
        hub.stop()
