"""The client address a rate limit keys on: proxy headers only from trusted proxies.

    TCP peer ──in trusted_proxies?── no ──> the peer (headers ignored: anyone can send them)
                     │ yes
                     v
    the one header the proxy sets (``proxy_header``: X-Forwarded-For by default, or
    Forwarded's for=… (RFC 7239), or X-Real-IP), read right to left; each hop that is
    itself a trusted proxy is skipped; the first one that is not is the client. A hop that
    is not an address stops the walk at the last trusted hop. Every other proxy header is
    ignored: a proxy overwrites the header it sets, but passes the others on as the client
    sent them (nginx set X-Forwarded-For and passed a client's Forwarded, which this module
    preferred, so any client picked its own address: docs/decisions.md, D117).

``quire hub serve`` runs uvicorn with ``proxy_headers=False``, so ``request.client`` is
always the TCP peer and this module is the one place headers are read (uvicorn's default
trusts ``X-Forwarded-For`` from 127.0.0.1, which let a local caller rotate the header to
escape every per-address limit). No Starlette import: the caller passes the peer and headers.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Protocol

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_FOR = re.compile(r'(?i)(?:^|;)\s*for\s*=\s*("?)([^";,]*)\1')


@lru_cache(maxsize=64)
def parse_trusted(spec: str) -> tuple[Network, ...]:
    """``"10.0.0.0/8, 127.0.0.1"`` -> networks; raises ValueError naming a bad item."""
    nets = []
    for item in spec.replace(";", ",").split(","):
        item = item.strip()
        if not item:
            continue
        try:
            nets.append(ipaddress.ip_network(item, strict=False))
        except ValueError as e:
            raise ValueError(f"trusted_proxies: {item!r} is not an address or network") from e
    return tuple(nets)


def _addr(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    t = text.strip()
    if t.startswith("[") and "]" in t:  # [v6]:port (Forwarded) or [v6]
        t = t[1:t.index("]")]
    elif t.count(":") == 1:  # v4:port
        t = t.split(":")[0]
    try:
        return ipaddress.ip_address(t)
    except ValueError:
        return None


def _trusted(a: object, nets: tuple[Network, ...]) -> bool:
    return any(a in n for n in nets)


HEADERS = ("x-forwarded-for", "forwarded", "x-real-ip")  # values of ``proxy_header``


def check_header(name: str) -> str:
    """``proxy_header`` as the hub reads it; raises ValueError naming the choices."""
    n = name.strip().lower()
    if n not in HEADERS:
        raise ValueError(f"proxy_header: {name!r} is not one of {', '.join(HEADERS)}")
    return n


def _hops(headers: Iterable[tuple[str, str]], header: str) -> list[str]:
    """The hops named by ``header`` (lower case), every instance of it in order."""
    hops: list[str] = []
    for name, value in headers:
        if name.lower() != header:
            continue
        if header == "forwarded":
            for element in value.split(","):
                m = _FOR.search(element)
                hops.append(m.group(2) if m else "")
        else:
            hops.extend(value.split(","))
    return hops


def client_address(peer: str | None, headers: Iterable[tuple[str, str]],
                   trusted: tuple[Network, ...], header: str = "x-forwarded-for") -> str:
    """The address to key limits on (see the module docstring)."""
    if not peer:
        return "?"
    p = _addr(peer)
    if p is None or not trusted or not _trusted(p, trusted):
        return peer
    last = peer
    for hop in reversed(_hops(headers, header)):
        a = _addr(hop)
        if a is None:
            return last
        if not _trusted(a, trusted):
            return str(a)
        last = str(a)
    return last


class ProxySettings(Protocol):
    trusted_proxies: str
    proxy_header: str


def client_of(peer: str | None, headers: Iterable[tuple[str, str]],
              settings: ProxySettings) -> str:
    """``client_address`` with the hub's ``trusted_proxies`` and ``proxy_header``."""
    return client_address(peer, headers, parse_trusted(settings.trusted_proxies),
                          check_header(settings.proxy_header))
