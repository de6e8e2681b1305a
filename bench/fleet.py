"""A hub and the machines joined to it, each running ``quire watch``, as real processes for
the watcher benchmarks (bench/watch_latency.py from a publication, bench/save_latency.py
from a save in one vault); and the CPU and load counters those benchmarks read from
``/proc``.

``Fleet(root, db)`` initializes and serves a hub (SQLite under ``root``, or ``db``), joins an
owner and creates a space; ``join(n)`` joins machines with the real CLI (one
``QUIRE_HOME`` and vault each), ``start_watchers(n)`` runs a watcher per machine and waits
until each is idle with its stream up and file events armed; ``close()`` stops them all.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.proc import free_port

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
CLK_TCK = os.sysconf("SC_CLK_TCK")


def quire(home: Path | None, *args: str, timeout: float = 120) -> dict[str, Any]:
    env = dict(os.environ)
    if home is not None:
        env["QUIRE_HOME"] = str(home)
    p = subprocess.run([PY, "-m", "replica.cli.main", *args, "--json"], capture_output=True,
                       text=True, env=env, cwd=ROOT, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"quire {' '.join(args)}: {p.stdout}{p.stderr}")
    return json.loads(p.stdout)


def hub_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def procs_cpu_s(pids: list[int]) -> float:
    return sum(hub_cpu_s(p) for p in pids)


def procs_sys_s(pids: list[int]) -> float:
    """Kernel time only (stime): file writes, fsyncs, sockets, inotify."""
    return sum(int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[12])
               for p in pids) / CLK_TCK


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    k = max(0, min(len(s) - 1, round(p / 100 * (len(s) - 1))))
    return s[k]


class Fleet:
    def __init__(self, root: Path, db: str | None):
        self.root = root
        self.data = root / "hub"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        init = [PY, "-m", "hub.cli", "init", "--data", str(self.data), "--json"]
        if db:
            init += ["--db", db]
        self.code = json.loads(subprocess.run(init, check=True, capture_output=True,
                                              text=True, cwd=ROOT).stdout)["enrollment_code"]
        self.log = open(root / "hub.log", "ab")  # noqa: SIM115
        self.hub = subprocess.Popen([PY, "-m", "hub.cli", "serve", "--data", str(self.data),
                                     "--port", str(self.port)], cwd=ROOT, stdout=self.log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        import httpx2

        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx2.get(self.url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("hub did not start")
            time.sleep(0.1)
        self.owner = root / "owner"
        quire(self.owner, "join", self.url, "--invite", self.code, "--device", "owner")
        self.space = quire(self.owner, "admin", "space", "create", "bench")["space"]
        self.members: list[tuple[Path, Path]] = []
        self.watchers: list[subprocess.Popen[bytes]] = []

    def invite(self, role: str = "viewer") -> str:
        from replica.app.service import open_client as _client
        from replica.machine.home import Home

        with _client(Home(self.owner).hubs()[0]) as c:
            return str(c.create_invite(self.space["id"], role)["code"])

    def join(self, n: int, parallel: int = 4, editors: int = 0) -> None:
        """Join machines until there are ``n`` (the joins run ``parallel`` at a time); the
        first ``editors`` machines may publish, the others view."""
        todo = list(range(len(self.members), n))
        while todo:
            chunk, todo = todo[:parallel], todo[parallel:]
            procs = []
            for i in chunk:
                home, vault = self.root / f"m{i}" / "home", self.root / f"m{i}" / "vault"
                code = self.invite("editor" if i < editors else "viewer")
                env = dict(os.environ, QUIRE_HOME=str(home))
                procs.append((i, subprocess.Popen(
                    [PY, "-m", "replica.cli.main", "join", self.url, "--invite", code, "--vault",
                     str(vault), "--device", f"m{i}", "--json"], cwd=ROOT, env=env,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
            for i, p in procs:
                out, err = p.communicate(timeout=120)
                if p.returncode and b'"rate_limited"' in out:
                    # the hub limits invite redemptions per address: wait as it says, again
                    time.sleep(1 + json.loads(out)["error"]["details"].get("retry_after", 1))
                    shutil.rmtree(self.root / f"m{i}", ignore_errors=True)  # from scratch
                    todo.append(i)
                    continue
                if p.returncode:
                    raise RuntimeError(f"join failed: {out!r} {err!r}")
                self.members.append((self.root / f"m{i}" / "home",
                                     self.root / f"m{i}" / "vault"))
            self.members.sort(key=lambda m: int(m[0].parent.name[1:]))

    def start_watchers(self, n: int, extra_env: dict[str, str] | None = None) -> None:
        for home, _ in self.members[:n]:
            env = dict(os.environ, QUIRE_HOME=str(home), **(extra_env or {}))
            log = open(home.parent / "watch.log", "ab")  # noqa: SIM115
            self.watchers.append(subprocess.Popen([PY, "-m", "replica.cli.main", "watch"], cwd=ROOT,
                                                  env=env, stdout=log, stderr=log))
        deadline = time.monotonic() + 60 + n
        for home, _ in self.members[:n]:
            status = next((home / "spaces").iterdir()) / "watch.json"
            while True:
                try:
                    s = json.loads(status.read_text())
                    if s.get("stream") == "up" and s.get("state") == "idle" and (
                            s.get("journal") or {}).get("valid"):  # file events armed too
                        break
                except (OSError, ValueError):
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"watcher of {home} not ready")
                time.sleep(0.05)

    def stop_watchers(self) -> None:
        for w in self.watchers:
            w.send_signal(signal.SIGTERM)
        for w in self.watchers:
            try:
                w.wait(30)
            except subprocess.TimeoutExpired:
                w.kill()
        self.watchers = []

    def close(self) -> None:
        self.stop_watchers()
        os.killpg(self.hub.pid, signal.SIGTERM)
        try:
            self.hub.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.hub.pid, signal.SIGKILL)
        self.log.close()
