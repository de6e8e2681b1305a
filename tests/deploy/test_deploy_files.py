"""The deploy files work as documented, outside compose: Debian's nginx and Caddy run the
shipped configuration in front of a real hub process on loopback (the event stream passes,
/metrics does not); the systemd units are hardened alike (systemd-analyze security) and
use the public URL of their environment file and the quire of the documented install."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.kit.host import REPO, free_port, unavailable
from tests.kit.hubproc import HubProcess, hub_cmd, serve_hub
from tests.kit.sse import SSE
from tests.kit.wire import put, redeem

DEPLOY = REPO / "deploy"
UNITS = DEPLOY / "systemd"


def _wait_up(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            httpx2.get(url, timeout=1)
            return
        except httpx2.HTTPError:
            time.sleep(0.05)
    raise AssertionError(f"proxy did not start: {log.read_text()}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:  # a graceful drain of idle upstream connections
        proc.kill()
        proc.wait(5)


@pytest.fixture
def hub_behind(tmp_path: Path) -> Iterator[tuple[HubProcess, int, str]]:
    """A hub process on loopback whose recorded public URL is the proxy's."""
    proxy_port = free_port()
    public = f"http://127.0.0.1:{proxy_port}"
    data = tmp_path / "hub"
    out = subprocess.run(hub_cmd("init", "--data", str(data), "--public-url", public,
                                     "--json"), capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    import json

    code = json.loads(out.stdout)["enrollment_code"]
    hub = serve_hub(data, env={"QUIRE_HUB_TRUSTED_PROXIES": "127.0.0.1"})
    try:
        yield hub, proxy_port, code
    finally:
        hub.stop()


def _through(hub: HubProcess, proxy_port: int, code: str) -> None:
    """What must hold through any proxy: the API, the event stream, no /metrics."""
    public = f"http://127.0.0.1:{proxy_port}"
    with httpx2.Client(base_url=public, timeout=30) as c:
        info = c.get("/v1/hub")
        assert info.status_code == 200 and info.json()["url"] == public
        assert re.fullmatch(r"[0-9a-f-]{32,36}", info.headers["x-request-id"])
        for path in ("/metrics", "/metrics/", "/metrics?name[]=x", "/metrics/x"):
            assert c.get(path).status_code == 404, path
        owner = redeem(c, code, "owner")
        space = owner.create_space("px-" + uuid.uuid4().hex[:6])
        sse = SSE(f"{public}/v1/spaces/{space}/events", owner)
        try:
            assert sse.next("head")["data"]["seq"] == 0
            assert owner.publish(space, [put("page/a")]).status_code == 201
            assert sse.next("head", timeout=30)["data"]["seq"] == 1
        finally:
            sse.close()
    # the metrics are where the scraper on the host reads them
    assert "quire_publications_total 1.0" in httpx2.get(hub.metrics_url).text


def test_nginx_outside_compose_passes_streams_and_refuses_metrics(
        hub_behind: tuple[HubProcess, int, str], tmp_path: Path) -> None:
    """The shipped deploy/nginx/quire.conf, in an nginx.conf like a distribution's; the only
    changes are the listen port and where the upstream list lives (both documented)."""
    if shutil.which("nginx") is None:
        unavailable("nginx not installed (Debian: apt-get install nginx)")
    hub, proxy_port, code = hub_behind
    ups = tmp_path / "quire-upstreams.conf"
    ups.write_text(f"server 127.0.0.1:{hub.port};\n")
    site = (DEPLOY / "nginx" / "quire.conf").read_text()
    assert "listen 80;" in site and "include /etc/nginx/quire-upstreams.conf;" in site
    site = site.replace("listen 80;", f"listen 127.0.0.1:{proxy_port};").replace(
        "include /etc/nginx/quire-upstreams.conf;", f"include {ups};")
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "quire.conf").write_text(site)
    main = tmp_path / "nginx.conf"
    main.write_text(f"""
pid {tmp_path}/nginx.pid;
error_log {tmp_path}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {tmp_path}/access.log;
    client_body_temp_path {tmp_path}/body;
    proxy_temp_path {tmp_path}/proxy;
    fastcgi_temp_path {tmp_path}/fastcgi;
    uwsgi_temp_path {tmp_path}/uwsgi;
    scgi_temp_path {tmp_path}/scgi;
    include {tmp_path}/conf.d/*.conf;
}}
""")
    log = tmp_path / "nginx.out"
    with open(log, "wb") as f:
        proc = subprocess.Popen(["nginx", "-c", str(main), "-p", str(tmp_path), "-g",
                                 "daemon off;"], stdout=f, stderr=subprocess.STDOUT)
    try:
        _wait_up(f"http://127.0.0.1:{proxy_port}/healthz", proc, log)
        _through(hub, proxy_port, code)
    finally:
        _stop(proc)


def test_caddy_outside_compose_passes_streams_and_refuses_metrics(
        hub_behind: tuple[HubProcess, int, str], tmp_path: Path) -> None:
    """The shipped deploy/Caddyfile as is, with its documented variables."""
    if shutil.which("caddy") is None:
        unavailable("caddy not installed (Debian: apt-get install caddy)")
    hub, proxy_port, code = hub_behind
    env = dict(os.environ, HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path),
               XDG_CONFIG_HOME=str(tmp_path), QUIRE_CADDY_ADMIN="off",
               QUIRE_SITE=f"http://127.0.0.1:{proxy_port}",
               QUIRE_HUBS=f"127.0.0.1:{hub.port}")
    log = tmp_path / "caddy.out"
    with open(log, "wb") as f:
        proc = subprocess.Popen(["caddy", "run", "--config", str(DEPLOY / "Caddyfile"),
                                 "--adapter", "caddyfile"], stdout=f,
                                stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    try:
        _wait_up(f"http://127.0.0.1:{proxy_port}/healthz", proc, log)
        _through(hub, proxy_port, code)
    finally:
        _stop(proc)


# ---------------------------------------------------------------- systemd

HARDENING = {
    "NoNewPrivileges", "CapabilityBoundingSet", "ProtectSystem", "ProtectHome", "PrivateTmp",
    "PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs",
    "ProtectControlGroups", "ProtectClock", "ProtectHostname", "ProtectProc",
    "RestrictAddressFamilies", "RestrictNamespaces", "RestrictRealtime", "RestrictSUIDSGID",
    "LockPersonality", "SystemCallArchitectures", "SystemCallFilter", "UMask",
    "StateDirectoryMode", "PrivateMounts", "RemoveIPC",
}


def _service(path: Path) -> dict[str, list[str]]:
    cp = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",),
                                   comment_prefixes=("#",))
    cp.optionxform = str  # type: ignore[assignment,method-assign]
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():  # repeated keys: keep every value
        if "=" in line and not line.startswith("#") and not line.startswith("["):
            k, _, v = line.partition("=")
            out.setdefault(k.strip(), []).append(v.strip())
    return out


def test_both_hub_units_are_hardened_alike_and_read_the_environment_file() -> None:
    """Before: the template unit lacked ten of the single unit's directives (exposure 7.4
    against 5.8) and set no public URL."""
    single, template = (_service(UNITS / n) for n in ("quire-hub.service",
                                                      "quire-hub@.service"))
    for d in sorted(HARDENING):
        assert d in single, d
        assert single[d] == template[d], d
    for unit in (single, template):
        assert unit["EnvironmentFile"] == ["/etc/quire/hub.env"]  # required: no '-'
        assert unit["User"] == ["quire"] and unit["StateDirectory"] == ["quire/hub"]
        assert unit["ExecStart"][0].startswith("/opt/quire/venv/bin/quire hub serve "
                                               "--data /var/lib/quire/hub ")
        assert not any(v.startswith("QUIRE_HUB_PUBLIC_URL") for v in unit.get("Environment",
                                                                               []))
    env = (UNITS / "hub.env").read_text()
    assert re.search(r"^QUIRE_HUB_PUBLIC_URL=https://", env, re.M)


def test_systemd_analyze_rates_both_units_alike_and_low(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze not installed")
    shutil.copy(UNITS / "quire-hub.service", tmp_path / "quire-hub.service")
    shutil.copy(UNITS / "quire-hub@.service", tmp_path / "quire-hub@8471.service")
    levels = []
    for name in ("quire-hub.service", "quire-hub@8471.service"):
        r = subprocess.run(["systemd-analyze", "security", "--offline=true", name],
                           capture_output=True, text=True, cwd=tmp_path)
        m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout)
        if m is None:
            pytest.skip(f"systemd-analyze security --offline unsupported: {r.stderr[:200]}")
        levels.append(float(m.group(1)))
    print(f"systemd-analyze exposure: {levels}")
    assert levels[0] == levels[1] <= 2.0, levels


def test_units_use_the_quire_the_documented_install_creates() -> None:
    ops = (REPO / "docs" / "operations.md").read_text()
    assert "python3 -m venv /opt/quire/venv" in ops  # creates /opt/quire/venv/bin/quire
    watch = (UNITS / "user" / "quire-watch@.service").read_text()
    assert "ExecStart=%h/.local/bin/quire watch %i" in watch
    assert "pipx install" in ops  # puts quire in ~/.local/bin


def test_the_nginx_site_on_debians_stock_configuration(
        hub_behind: tuple[HubProcess, int, str], tmp_path: Path) -> None:
    """Debian's own /etc/nginx (nginx.conf, conf.d, sites-enabled/default) with the shipped
    site added as docs/operations.md says: the hub answers its public name, although the
    stock default site stays enabled. Before (0506cf5) the site claimed `server_name _`,
    which the stock default server shadows: `nginx -t` passed and every request got the
    default site's 404."""
    if shutil.which("nginx") is None or not Path("/etc/nginx/nginx.conf").exists():
        unavailable("Debian's nginx is not installed (apt-get install nginx)")
    hub, proxy_port, _code = hub_behind
    etc = tmp_path / "etc-nginx"
    shutil.copytree("/etc/nginx", etc, symlinks=False)
    for conf in [etc / "nginx.conf", *etc.glob("sites-enabled/*"), *etc.glob("conf.d/*")]:
        text = conf.read_text().replace("/etc/nginx", str(etc))
        text = text.replace("listen 80 default_server;", f"listen 127.0.0.1:{proxy_port} "
                                                         "default_server;")
        text = text.replace("listen [::]:80 default_server;", "")
        text = re.sub(r"^user .*;$", "", text, flags=re.M)
        text = re.sub(r"^pid .*;$", f"pid {tmp_path}/nginx.pid;", text, flags=re.M)
        text = re.sub(r"(access|error)_log [^;]+;", rf"\1_log {tmp_path}/\1.log;", text)
        conf.write_text(text)
    (etc / "quire-upstreams.conf").write_text(f"server 127.0.0.1:{hub.port};\n")
    site = (DEPLOY / "nginx" / "quire.conf").read_text()
    assert "server_name quire.example.com;" in site
    site = site.replace("listen 80;", f"listen 127.0.0.1:{proxy_port};").replace(
        "/etc/nginx", str(etc))  # the documented copy: conf.d/quire.conf
    (etc / "conf.d" / "quire.conf").write_text(site)
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (tmp_path / sub).mkdir()
    main = etc / "nginx.conf"
    main.write_text(main.read_text().replace("http {", "http {\n"
        + "".join(f"    {k}_temp_path {tmp_path}/{v};\n" for k, v in (
            ("client_body", "body"), ("proxy", "proxy"), ("fastcgi", "fastcgi"),
            ("uwsgi", "uwsgi"), ("scgi", "scgi"))), 1))
    log = tmp_path / "nginx.out"
    with open(log, "wb") as f:
        proc = subprocess.Popen(["nginx", "-c", str(main), "-p", str(tmp_path), "-e",
                                 str(tmp_path / "error.log"), "-g", "daemon off;"],
                                stdout=f, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{proxy_port}/healthz"
        _wait_up(url, proc, log)  # any answer: the stock default site's 404 too
        named = httpx2.get(url, headers={"Host": "quire.example.com"}, timeout=10)
        assert named.status_code == 200, named.text
        other = httpx2.get(url, headers={"Host": "203.0.113.9"}, timeout=10)
        assert other.status_code == 404  # the stock default site, as the doc warns
    finally:
        _stop(proc)
