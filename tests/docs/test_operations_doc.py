"""docs/operations.md is tested as written: every ``sh`` block runs, in order, in bash with
the environment the document sets up (``DATA``, ``/etc/quire/hub.env``'s settings), against
a real hub process on SQLite and on PostgreSQL; backups come out mode 0600 and restore.
Blocks that need root, systemd, Docker or an owner's machine are ``text`` blocks, each
listed below with the reason and the test that covers what it does."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
import yaml

from tests.kit.host import REPO, free_port
from tests.kit.hubproc import HubProcess
from tests.kit.pg import pg_database, require_pg
from tests.kit.wire import put, redeem

DOC = REPO / "docs" / "operations.md"
BLOCK = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.S | re.M)

# text blocks: not run here, and why (what covers them instead)
NOT_RUN = {
    "# the shell the commands below expect": "sets DATA and sources /etc/quire/hub.env: the "
                                              "test sets the same variables",
    "python3 -m venv /opt/quire/venv": "root install into /opt and /etc; the units' paths "
                                       "are checked by tests/deploy/test_deploy_files.py",
    "cp deploy/systemd/quire-hub.service": "systemd is not PID 1 here; the units are checked "
                                           "by systemd-analyze in test_deploy_files.py",
    "POSTGRES_PASSWORD=": "no container engine here (tests/deploy/test_deploy.py parses "
                          "compose.yaml)",
    "systemctl stop quire-hub": "systemd; the restore blocks between stop and start run "
                                "as written in tests/docs/test_lost_data_restore.py",
    "systemctl start quire-hub": "systemd; tests/docs/test_lost_data_restore.py starts the "
                                 "hub process itself",
    "cp deploy/nginx/quire.conf": "root; the same file runs under nginx in "
                                  "test_deploy_files.py",
    "QUIRE_SITE=quire.example.com caddy run": "a public name and TLS; the same file runs "
                                              "under caddy in test_deploy_files.py",
    "https://quire.example.com/console/signin/oidc/callback": "a URI to register at the "
        "provider; tests/hub/console/test_console_oidc_browser.py registers the same path",
    "quire admin audit --verify": "an owner's machine (a joined home); run end to end, "
        "truncation and rewriting detected, in tests/replica/trust/test_audit_e2e.py",
    "quire hub key rotate --data": "rotating the key of the hub the later blocks use; run "
        "end to end, twice while serving, in tests/replica/trust/test_key_rotation_e2e.py",
    "quire hub key reset --data": "replaces the hub key without a statement (the lost-key "
        "case), which every replica refuses; run with the re-pin in "
        "tests/replica/trust/test_key_rotation_e2e.py",
    "quire repin https://": "a member's machine; run end to end (a wrong key id refused, "
        "the right one re-pinned) in tests/replica/trust/test_key_rotation_e2e.py",
    "quire hub email --data \"$DATA\" 01J2": "a user id from the listing above (which "
        "runs here); setting and clearing run in test_console_oidc_browser.py",
}


def blocks() -> list[tuple[str, str]]:
    out = []
    for m in BLOCK.finditer(DOC.read_text()):
        indent = len(m.group(1))
        body = "\n".join(line[indent:] for line in m.group(3).splitlines())
        out.append((m.group(2), body))
    return out


def test_every_block_is_run_or_listed_with_a_reason() -> None:
    seen = set()
    for lang, body in blocks():
        assert lang in ("sh", "text", "yaml", "toml"), f"block without a kind: {body[:60]!r}"
        if lang == "text":
            key = next((k for k in NOT_RUN if body.startswith(k)), None)
            assert key, f"a text block nobody runs or explains: {body[:60]!r}"
            seen.add(key)
        if lang == "yaml":
            assert yaml.safe_load(body)
        if lang == "toml":  # hub.toml settings: valid TOML, each one a setting the hub has
            import tomllib

            from hub.settings import Settings

            known = {f.name for f in dataclasses.fields(Settings)}
            assert set(tomllib.loads(body)) <= known, set(tomllib.loads(body)) - known
    assert seen == set(NOT_RUN), set(NOT_RUN) - seen


# run by tests/docs/test_lost_data_restore.py, on a hub whose data folder it removes, and
# by tests/docs/test_pg_setup_doc.py (a role and database of the server's own)
LOST_DATA = ("# Data folder lost", "# On each member's machine",
             "# PostgreSQL role and database", "# Restoring (")


def _applies(body: str, backend: str) -> bool:
    first = body.splitlines()[0]
    if first.startswith(LOST_DATA):
        return False
    if first.startswith("# PostgreSQL"):
        return backend == "postgresql"
    if first.startswith("# SQLite"):
        return backend == "sqlite"
    return True


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_operations_commands_run_as_written(tmp_path: Path, backend: str) -> None:
    if backend == "postgresql":
        require_pg()  # skips on a developer's machine, fails under CI
    import contextlib

    with contextlib.ExitStack() as stack:
        port = free_port()
        env = dict(os.environ, DATA=str(tmp_path / "hub"), QUIRE_HUB_PORT=str(port),
                   QUIRE_HUB_PUBLIC_URL=f"http://127.0.0.1:{port}",
                   PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
        env.pop("QUIRE_HUB_DB_URL", None)
        if backend == "postgresql":
            env["QUIRE_HUB_DB_URL"] = stack.enter_context(pg_database())
            env["QUIRE_SCRATCH_DB_URL"] = stack.enter_context(pg_database())
        backups = tmp_path / "backups"
        backups.mkdir()
        hub = None
        outputs = []
        try:
            for lang, body in blocks():
                if lang != "sh" or not _applies(body, backend):
                    continue
                r = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=backups,
                                   env=env, capture_output=True, text=True, timeout=120)
                assert r.returncode == 0, f"{body}\n---\n{r.stdout}\n{r.stderr}"
                outputs.append((body, r.stdout))
                if hub is None and "quire hub init" in body:
                    # what `systemctl enable --now quire-hub` does (a text block)
                    hub = _serve(env, port, tmp_path)
            assert hub is not None
        finally:
            if hub is not None:
                hub.stop()
    # what the blocks printed
    record = next(out for body, out in outputs if "quire hub record" in body)
    assert f"public_url: http://127.0.0.1:{port}" in record
    metrics = next(out for body, out in outputs if "/metrics" in body)
    assert "quire_publications_total 1.0" in metrics
    counts = [out for body, out in outputs if "count(*) FROM batches" in body]
    assert counts and counts[0].strip().splitlines()[-1] == "1", counts
    # every backup file is readable by its owner only
    files = sorted(backups.iterdir())
    names = {f.name.split("-")[0] for f in files}
    assert names == ({"quire", "hub_key"} if backend == "postgresql" else {"hub", "hub_key"})
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, (f.name, oct(f.stat().st_mode))


def _serve(env: dict[str, str], port: int, tmp: Path) -> HubProcess:
    """Start the hub as the unit would, and publish one batch so backups hold something."""
    data = Path(env["DATA"])
    log = tmp / "serve.log"
    f = open(log, "ab")  # noqa: SIM115 - closed by HubProcess.stop
    proc = subprocess.Popen(["quire", "hub", "serve", "--data", str(data), "--port",
                             str(port)], env=env, stdout=f, stderr=subprocess.STDOUT)
    hub = HubProcess(data, port, proc, log, f, port + 1000)
    _wait(hub)
    code = json.loads(subprocess.run(["quire", "hub", "enroll", "--data", str(data), "--json"],
                                     env=env, capture_output=True, text=True,
                                     check=True).stdout)["enrollment_code"]
    with httpx2.Client(base_url=hub.url, timeout=30) as c:
        owner = redeem(c, code, "owner")
        space = owner.create_space("ops-doc")
        assert owner.publish(space, [put("page/a")]).status_code == 201
    return hub


def _wait(hub: HubProcess) -> None:
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert hub.proc.poll() is None, hub.log.read_text()
        try:
            if httpx2.get(hub.url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx2.HTTPError:
            time.sleep(0.05)
    raise AssertionError(hub.log.read_text())
