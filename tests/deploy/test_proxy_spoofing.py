"""Per-address limits hold behind the shipped proxies whatever headers a client sends.

Attack (issue 29): the hub preferred ``Forwarded`` when present and deploy/nginx/quire.conf
passed a client's ``Forwarded`` through (it only set ``X-Forwarded-For``), so a client that
sent a new ``Forwarded: for=…`` each time escaped every per-address limit: 40 of 40 invite
redemptions and 20 of 20 device logins reached the handler. Here the shipped nginx and
Caddy configurations run for real in front of a real ``quire hub serve`` that trusts the
proxy (``QUIRE_HUB_TRUSTED_PROXIES=127.0.0.1``); the client connects from 127.0.0.2 (any
address other than the proxy's: the loopback network is 127.0.0.0/8) and rotates both
``Forwarded`` and ``X-Forwarded-For``. The hub must key its limits on 127.0.0.2 alone.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.deploy.test_deploy_files import _wait_up
from tests.kit.host import REPO, free_port, unavailable
from tests.kit.hubproc import HubProcess, init_hub, serve_hub

DEPLOY = REPO / "deploy"
# the client's own address: not the proxy's, not trusted (one per proxy: one hub serves both)
CLIENTS = {"nginx": "127.0.0.2", "caddy": "127.0.0.3"}
KEY = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"  # any Ed25519 public key


def _nginx(tmp_path: Path, hub: HubProcess, port: int) -> subprocess.Popen[bytes]:
    """deploy/nginx/quire.conf as shipped; only the listen port and upstream file move."""
    ups = tmp_path / "quire-upstreams.conf"
    ups.write_text(f"server 127.0.0.1:{hub.port};\n")
    site = (DEPLOY / "nginx" / "quire.conf").read_text()
    site = site.replace("listen 80;", f"listen 127.0.0.1:{port};").replace(
        "include /etc/nginx/quire-upstreams.conf;", f"include {ups};")
    (tmp_path / "quire.conf").write_text(site)
    main = tmp_path / "nginx.conf"
    main.write_text(f"""
pid {tmp_path}/nginx.pid;
error_log {tmp_path}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {tmp_path}/body;
    proxy_temp_path {tmp_path}/proxy;
    fastcgi_temp_path {tmp_path}/fastcgi;
    uwsgi_temp_path {tmp_path}/uwsgi;
    scgi_temp_path {tmp_path}/scgi;
    include {tmp_path}/quire.conf;
}}
""")
    log = tmp_path / "proxy.out"
    with open(log, "wb") as f:
        return subprocess.Popen(["nginx", "-c", str(main), "-p", str(tmp_path), "-g",
                                 "daemon off;"], stdout=f, stderr=subprocess.STDOUT)


def _caddy(tmp_path: Path, hub: HubProcess, port: int) -> subprocess.Popen[bytes]:
    """deploy/Caddyfile as shipped, with its documented variables."""
    env = dict(os.environ, HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path),
               XDG_CONFIG_HOME=str(tmp_path), QUIRE_CADDY_ADMIN="off",
               QUIRE_SITE=f"http://127.0.0.1:{port}", QUIRE_HUBS=f"127.0.0.1:{hub.port}")
    log = tmp_path / "proxy.out"
    with open(log, "wb") as f:
        return subprocess.Popen(["caddy", "run", "--config", str(DEPLOY / "Caddyfile"),
                                 "--adapter", "caddyfile"], stdout=f,
                                stderr=subprocess.STDOUT, env=env, cwd=tmp_path)


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    """One hub that trusts the proxy on 127.0.0.1; each proxy's client has its own address,
    so each starts with full buckets."""
    data = tmp_path_factory.mktemp("hub") / "data"
    init_hub(data)
    hp = serve_hub(data, env={"QUIRE_HUB_TRUSTED_PROXIES": "127.0.0.1"})
    yield hp
    hp.stop()


@pytest.fixture(params=["nginx", "caddy"])
def proxied(request: pytest.FixtureRequest, hub: HubProcess, tmp_path: Path
            ) -> Iterator[tuple[str, str]]:
    """(the public URL of a shipped proxy in front of the hub, the client's address)."""
    if shutil.which(request.param) is None:
        unavailable(f"{request.param} not installed (Debian: apt-get install "
                    f"{request.param})")
    port = free_port()
    proc = (_nginx if request.param == "nginx" else _caddy)(tmp_path, hub, port)
    try:
        _wait_up(f"http://127.0.0.1:{port}/healthz", proc, tmp_path / "proxy.out")
        yield f"http://127.0.0.1:{port}", CLIENTS[request.param]
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _spoofed(i: int) -> dict[str, str]:
    fake = f"198.51.100.{i % 250 + 1}"
    return {"Forwarded": f"for={fake};proto=https", "X-Forwarded-For": fake}


def _attempts(url: str, client: str, path: str, body: dict[str, str], n: int, ok: int
              ) -> tuple[int, float]:
    """n requests, each with new spoofed client headers, from ``client``: (reached,
    seconds)."""
    reached = 0
    t0 = time.monotonic()
    transport = httpx2.HTTPTransport(local_address=client)
    with httpx2.Client(base_url=url, timeout=30, transport=transport) as c:
        for i in range(n):
            r = c.post(path, headers=_spoofed(i), json=body)
            assert r.status_code in (ok, 429), r.text
            reached += r.status_code != 429
    return reached, time.monotonic() - t0


def test_spoofed_forwarded_headers_do_not_escape_per_address_limits(
        proxied: tuple[str, str]) -> None:
    url, client = proxied
    redeems, took = _attempts(url, client, "/v1/invites/redeem",
                              {"code": "qi_nope", "device_name": "d", "device_key": KEY},
                              40, 401)
    # burst 10, then one a second, for the one client address there is
    assert redeems <= 10 + math.ceil(took) + 1, (redeems, took)
    logins, took = _attempts(url, client, "/v1/device/code",
                             {"device_name": "d", "device_key": KEY}, 20, 201)
    # device_codes_per_min (12): a burst of 12, then one every 5 s
    assert logins <= 12 + math.ceil(took / 5) + 1, (logins, took)
