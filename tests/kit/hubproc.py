"""Hub processes: ``quire hub init`` run in this process (``init_hub``), and ``quire hub
serve`` on an initialized data folder (``serve_hub``, a ``HubProcess``)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from tests.kit.host import REPO, free_port, free_ports


def hub_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "hub.cli", *args]


def init_hub(data: Path, db: str | None = None) -> str:
    """``quire hub init --data DATA [--db DB] --json``, run in this process by the real
    command's ``main`` (hub/cli.py): a subprocess paid ~1 s of imports per hub, most of a
    hub test's setup (tests/hub/test_publish.py: 3.5 s a test on a loaded machine). The
    command line itself is tested as a process by the docs and operations tests."""
    from hub import cli as hub_cli

    argv = ["init", "--data", str(data), "--json", *(["--db", db] if db else [])]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = hub_cli.main(argv)
    if code != 0:
        raise RuntimeError(f"quire hub init failed ({code}):\n{out.getvalue()}\n"
                           f"{err.getvalue()}")
    return json.loads(out.getvalue())["enrollment_code"]


@dataclass
class HubProcess:
    data: Path
    port: int
    proc: subprocess.Popen[bytes]
    log: Path
    logfile: Any = None
    metrics_port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        """The process's separate metrics listener (never the public port)."""
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def stop(self, sig: int = 15) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.logfile is not None and not self.logfile.closed:
            self.logfile.close()


def serve_hub(data: Path, port: int | None = None, db: str | None = None,
              env: dict[str, str] | None = None, workers: int = 1) -> HubProcess:
    port = port or free_port()
    cmd = hub_cmd("serve", "--data", str(data), "--port", str(port), "--workers", str(workers))
    if db:
        cmd += ["--db", db]
    log = data / f"serve-{port}.log"
    f = open(log, "ab")  # noqa: SIM115 (kept open for the child's life)
    env = {"QUIRE_HUB_METRICS_PORT": str(free_ports(workers)), **(env or {})}
    proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=REPO,
                            env={**os.environ, **env})
    hp = HubProcess(data, port, proc, log, f, int(env["QUIRE_HUB_METRICS_PORT"]))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            f.close()
            raise RuntimeError(f"hub exited: {log.read_text()}")
        try:
            if httpx2.get(hp.url + "/healthz", timeout=1).status_code == 200:
                return hp
        except httpx2.HTTPError:
            pass
        time.sleep(0.05)
    hp.stop(9)
    raise RuntimeError(f"hub did not start: {log.read_text()}")
