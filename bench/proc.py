"""Processes the benchmarks start: timed commands with their peak RSS, and servers on free
loopback ports that are always stopped (by their own process group, never by name).

Peak RSS of a command comes from ``wait4`` (the kernel's ``ru_maxrss`` for that child).
The kernel carries the RSS a process had before ``exec`` into that figure, and a child of
this (large) process would start with our RSS; so commands are started through a tiny
interpreter (``python -S``, a few MB) that spawns the command, waits, and reports the
command's own wall time and ``ru_maxrss``. For a running server it is ``VmHWM`` from ``/proc``, which ``reset_peak`` clears, so a
scenario can measure the peak of one phase of a long-lived process.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx


class Unavailable(Exception):
    """A system or scenario could not run; the message goes into the status column."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Timed:
    seconds: float
    peak_rss_mb: float
    returncode: int
    stdout: str
    stderr: str
    cpu_s: float = 0.0  # user + system CPU of the command (and the children it waited for)

    def check(self, what: str) -> Timed:
        if self.returncode != 0:
            tail = (self.stderr or self.stdout).strip().splitlines()[-3:]
            raise Unavailable(f"{what} exited {self.returncode}: {' | '.join(tail)[:300]}")
        return self


# Runs argv[2:] and writes "<seconds> <ru_maxrss KiB> <exit code> <CPU seconds>" to argv[1].
_MEASURE = """
import os, shutil, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
exe = shutil.which(cmd[0]) or cmd[0]
t = time.perf_counter()
pid = os.posix_spawn(exe, cmd, os.environ)
_, status, ru = os.wait4(pid, 0)
t = time.perf_counter() - t
with open(out, "w") as f:
    f.write(f"{t} {ru.ru_maxrss} {os.waitstatus_to_exitcode(status)} "
            f"{ru.ru_utime + ru.ru_stime}")
"""


def run_timed(cmd: Sequence[str], *, cwd: Path | None = None,
              env: Mapping[str, str] | None = None, timeout: float = 1800) -> Timed:
    """Run a command to completion; its wall time, CPU time and own peak RSS (ru_maxrss)."""
    base = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-{os.getpid()}-{time.monotonic_ns()}"
    paths = [Path(f"{base}.{x}") for x in ("out", "err", "m")]
    try:
        with open(paths[0], "w+b") as out, open(paths[1], "w+b") as err:
            proc = subprocess.Popen([sys.executable, "-S", "-c", _MEASURE, str(paths[2]),
                                     *cmd], cwd=cwd, env=dict(env) if env else None,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    start_new_session=True)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            out.seek(0)
            err.seek(0)
            stdout = out.read().decode("utf-8", "replace")
            stderr = err.read().decode("utf-8", "replace")
        try:
            sec, rss, code, cpu = paths[2].read_text().split()
        except (OSError, ValueError):
            return Timed(float(timeout), 0.0, proc.returncode or -1, stdout,
                         stderr + f"\n(no measurement: {cmd[0]} did not run or timed out)")
        return Timed(float(sec), int(rss) / 1024.0, int(code), stdout, stderr, float(cpu))
    finally:
        for p in paths:
            p.unlink(missing_ok=True)


class Server:
    """A long-running child in its own process group, with its log in a file."""

    def __init__(self, name: str, cmd: Sequence[str], *, log_dir: Path,
                 cwd: Path | None = None, env: Mapping[str, str] | None = None):
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(list(cmd), cwd=cwd, env=dict(env) if env else None,
                                     stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text("utf-8", "replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])[-400:]

    def wait_http(self, url: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Unavailable(f"{self.name} exited {self.proc.returncode}: {self.log_tail()}")
            try:
                if httpx.get(url, timeout=1).status_code < 500:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise Unavailable(f"{self.name} did not answer {url} within {timeout:.0f}s")

    def wait_tcp(self, port: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Unavailable(f"{self.name} exited {self.proc.returncode}: {self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise Unavailable(f"{self.name} did not listen on {port} within {timeout:.0f}s")

    def reset_peak(self) -> None:
        """Clear the kernel's peak-RSS mark so the next reading covers one phase only."""
        try:
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")
        except OSError:
            pass

    def peak_rss_mb(self) -> float | None:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
        except OSError:
            return None
        return None

    def rss_mb(self) -> float | None:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        except OSError:
            return None
        return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        self._log.close()


def tree_cpu(pid: int) -> float:
    """User+system CPU seconds of ``pid`` and its living descendants (from ``/proc``)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(x) for x in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return total
