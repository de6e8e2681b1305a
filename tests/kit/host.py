"""What the machine gives a test: the checkout's path, free ports, temporary folders, a
pseudo-terminal, and what to do when something a test needs is missing (skip on a
developer's machine, fail under CI)."""

from __future__ import annotations

import contextlib
import os
import pty
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def unavailable(why: str) -> None:
    """Something a test needs is missing: skip it on a developer's machine; with ``CI`` set,
    fail it (.ci/run starts or installs everything the suite needs, so a test that skips
    there is a check that never runs)."""
    import pytest

    if os.environ.get("CI"):
        pytest.fail(why + "; CI is set, so this fails instead of skipping")
    pytest.skip(why)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> int:
    """The first of ``n`` consecutive free ports (a hub with ``--workers n`` serves worker
    i's /metrics on METRICS_PORT + i: a taken neighbour left that worker without one)."""
    while True:
        first = free_port()
        if first + n > 65536:
            continue
        socks = []
        try:
            for port in range(first, first + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()


@contextlib.contextmanager
def tempdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="quire-test-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_on_pty(cmd: list[str], env: dict[str, str], *, stream: str = "stdout",
               cwd: Path = REPO, timeout: float = 60) -> tuple[int, bytes]:
    """Run ``cmd`` with ``stream`` (stdout or stderr) on a pseudo-terminal and the other
    discarded: its exit code and every byte it wrote there (a terminal's output: colours,
    progress bars)."""
    master, slave = pty.openpty()
    streams = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, stream: slave}
    p = subprocess.Popen(cmd, stdout=streams["stdout"], stderr=streams["stderr"], env=env,
                         cwd=cwd)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout)
    os.close(master)
    return p.returncode, b"".join(chunks)
