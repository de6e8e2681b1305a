"""The deployment files must stay loadable and keep the settings SSE depends on.

No container engine runs here: the compose file is loaded and validated by a Compose client
(``docker compose config`` or Debian's ``docker-compose config``) and nginx checks its own
configuration (``nginx -t``). .ci/run installs both; without them these checks skip on a
developer's machine and fail under CI (``tests.kit.host.unavailable``).
"""

from __future__ import annotations

import plistlib
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from tests.kit.host import unavailable

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def test_compose_runs_postgres_two_hubs_and_a_proxy() -> None:
    services = _compose()["services"]
    assert {"postgres", "hub-init", "hub1", "hub2", "proxy"} <= set(services)
    for hub in ("hub1", "hub2"):
        svc = services[hub]
        assert svc["command"][0] == "serve"
        assert "postgresql://" in svc["environment"]["QUIRE_HUB_DB_URL"]
        assert svc["depends_on"]["hub-init"]["condition"] == "service_completed_successfully"
        assert any(v.endswith(":/data") for v in svc["volumes"]), "hubs must share one hub key"
    assert any(str(p).endswith(":80") for p in services["proxy"]["ports"])
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])


def test_hub_processes_share_the_data_volume_with_init() -> None:
    services = _compose()["services"]
    vols = {s: services[s]["volumes"] for s in ("hub-init", "hub1", "hub2")}
    assert len({tuple(v) for v in vols.values()}) == 1


def _compose_client() -> list[str]:
    """``docker compose`` (the plugin) or ``docker-compose`` (Debian's package, which .ci/run
    installs): both load the file as Compose does and validate it against the schema."""
    for cmd in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(cmd[0]) and subprocess.run([*cmd, "version"], capture_output=True
                                                   ).returncode == 0:
            return cmd
    unavailable("neither 'docker compose' nor 'docker-compose' is installed "
                    "(apt-get install docker-compose)")
    raise AssertionError("unreachable")


def _compose_config(cmd: list[str], path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*cmd, "-f", str(path), "config", "-q"], capture_output=True,
                          text=True, cwd=path.parent)


def test_compose_client_accepts_the_file_and_refuses_a_broken_one(tmp_path: Path) -> None:
    cmd = _compose_client()
    r = _compose_config(cmd, DEPLOY / "compose.yaml")
    assert r.returncode == 0, r.stderr
    # the same check refuses what Compose would refuse: it really validates
    text = (DEPLOY / "compose.yaml").read_text()
    for broken in (text.replace("condition: service_healthy", "condition: when_ready"),
                   text.replace("    restart: unless-stopped", "    restart_policy: sometimes")):
        assert broken != text
        (tmp_path / "compose.yaml").write_text(broken)
        assert _compose_config(cmd, tmp_path / "compose.yaml").returncode != 0


def test_nginx_streams_events_unbuffered() -> None:
    conf = (DEPLOY / "nginx" / "quire.conf").read_text()
    m = re.search(r"location ~ \^/v1/spaces/\[\^/\]\+/events\$ \{(.*?)\}", conf, re.S)
    assert m, "no location for /v1/spaces/*/events"
    block = m.group(1)
    assert "proxy_buffering off;" in block
    assert re.search(r"proxy_read_timeout\s+(\d+)h;", block)
    assert "proxy_http_version 1.1;" in conf
    compose_ups = (DEPLOY / "nginx" / "quire-upstreams.compose.conf").read_text()
    assert "server hub1:8470" in compose_ups and "server hub2:8470" in compose_ups
    mounts = _compose()["services"]["proxy"]["volumes"]
    assert "./nginx/quire.conf:/etc/nginx/conf.d/quire.conf:ro" in mounts
    assert ("./nginx/quire-upstreams.compose.conf:/etc/nginx/quire-upstreams.conf:ro"
            in mounts)


def _nginx_t(site_text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``nginx -t`` on the compose configuration (nginx.conf including the site, which
    includes the upstreams) with the site's text as given."""
    # compose host names do not resolve here; nginx resolves upstreams at load time
    ups = tmp_path / "quire-upstreams.conf"
    ups.write_text((DEPLOY / "nginx" / "quire-upstreams.compose.conf").read_text()
                   .replace("hub1:8470", "127.0.0.1:18471")
                   .replace("hub2:8470", "127.0.0.1:18472"))
    site = tmp_path / "quire.conf"
    site.write_text(site_text.replace("listen 80;", "listen 127.0.0.1:18080;")
                    .replace("/etc/nginx/quire-upstreams.conf", str(ups)))
    conf = (DEPLOY / "nginx.conf").read_text().replace("/etc/nginx/conf.d/quire.conf",
                                                       str(site))
    path = tmp_path / "nginx.conf"
    path.write_text(conf)
    (tmp_path / "logs").mkdir(exist_ok=True)
    return subprocess.run(["nginx", "-t", "-q", "-c", str(path), "-p", str(tmp_path),
                           "-g", f"error_log {tmp_path / 'logs' / 'error.log'};"],
                          capture_output=True, text=True)


def test_nginx_accepts_the_compose_configuration_and_refuses_a_broken_one(
        tmp_path: Path) -> None:
    if shutil.which("nginx") is None:
        unavailable("nginx is not installed (apt-get install nginx)")
    site = (DEPLOY / "nginx" / "quire.conf").read_text()
    r = _nginx_t(site, tmp_path)
    assert r.returncode == 0, r.stderr
    # nginx's own parser, not a look at the text: a misspelt directive fails the same check
    broken = site.replace("proxy_buffering off;", "proxy_bufering off;")
    assert broken != site
    assert _nginx_t(broken, tmp_path).returncode != 0


def test_launchd_plist_and_systemd_units_are_well_formed() -> None:
    plist = plistlib.loads((DEPLOY / "launchd" / "dev.quire.watch.plist").read_bytes())
    assert plist["ProgramArguments"][1] == "watch"
    units = [DEPLOY / "systemd" / "quire-hub.service", DEPLOY / "systemd" / "quire-hub@.service",
             DEPLOY / "systemd" / "user" / "quire-watch@.service"]
    for unit in units:
        text = unit.read_text()
        for section in ("[Unit]", "[Service]", "[Install]"):
            assert section in text, f"{unit.name} lacks {section}"
        assert re.search(r"^ExecStart=.*quire (hub serve|watch)", text, re.M), unit.name


def test_dockerfile_serves_the_hub() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert text.startswith("#") and "FROM python:3.11-slim" in text
    assert "pip install ." in text
    assert '"quire", "hub"' in text and '"serve"' in text
    assert "USER quire" in text
