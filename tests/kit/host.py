"""What the machine gives a test: the checkout's path, free ports, temporary folders, a
pseudo-terminal, what to do when something a test needs is missing (skip on a developer's
machine, fail under CI), and children run as another user that never read the checkout
(``as_anyone``, ``code_for_anyone``)."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import shutil
import socket
import subprocess
import sys
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


# ---------------------------------------------------------------- children run as another user

def python_for_anyone() -> str:
    """An interpreter another user can run: the one this virtual environment was made from.
    The venv's own ``python`` is a link inside the checkout, and a checkout may sit in a
    folder only its owner can enter (a 0700 home, the default for new accounts on Debian)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


# what importing the given modules loads from the checkout (the working folder) or the
# virtual environment's site-packages: every top-level package and its file
_PROBE = r"""
import importlib, json, os, site, sys
roots = [os.getcwd(), *site.getsitepackages()]
before = set(sys.modules)
for m in sys.argv[1:]:
    importlib.import_module(m)
out = {}
for name in set(sys.modules) - before:
    top = name.partition(".")[0]
    f = getattr(sys.modules.get(top), "__file__", None)
    if f and any(f.startswith(r.rstrip("/") + "/") for r in roots):
        out[top] = f
print(json.dumps(out))
"""


@contextlib.contextmanager
def code_for_anyone(*modules: str) -> Iterator[Path]:
    """A folder under /tmp that every user can read, holding copies of ``modules`` and of
    every package they import from outside the standard library (this checkout's, the
    virtual environment's). A child run as another user puts it first on ``sys.path`` and
    so never reads the checkout, wherever the clone lives (see ``python_for_anyone``)."""
    probe = subprocess.run([sys.executable, "-c", _PROBE, *modules], capture_output=True,
                           text=True, check=True, cwd=REPO)
    root = Path(tempfile.mkdtemp(prefix="quire-code-", dir="/tmp"))
    try:
        for top, f in json.loads(probe.stdout).items():
            src = Path(f)
            if src.name == "__init__.py":
                shutil.copytree(src.parent, root / top,
                                ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(src, root / src.name)
        for dirpath, _dirnames, filenames in os.walk(root):
            os.chmod(dirpath, 0o755)
            for n in filenames:
                os.chmod(os.path.join(dirpath, n), 0o644)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def as_anyone(script: str, lib: Path | None = None) -> list[str]:
    """The command line that runs ``script`` (Python source) with ``python_for_anyone``,
    isolated from the environment and the user's and system's site-packages; ``lib`` (from
    ``code_for_anyone``) is put first on its path."""
    head = f"import sys; sys.path.insert(0, {str(lib)!r})\n" if lib is not None else ""
    return [python_for_anyone(), "-I", "-S", "-c", head + script]


NOBODY = 65534


@contextlib.contextmanager
def folder_for_anyone() -> Iterator[Path]:
    """A fresh folder under /tmp that every user can enter (pytest's own are 0700 and
    may sit in a 0700 home), removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="quire-anyone-", dir="/tmp"))
    os.chmod(root, 0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def acting_as_nobody(root: Path) -> Iterator[None]:
    """This process acts as uid 65534 (nobody) for the duration, so file permissions hold
    for it: as root, everything under ``root`` is handed to that user and the effective uid
    and gid become it (the real ones stay 0, so they come back); as any other user the
    permissions already hold and nothing changes. Whatever runs meanwhile must need
    nothing else from disk (import what it needs first: the checkout may sit in a 0700
    home)."""
    if os.geteuid() != 0:
        yield
        return
    for dirpath, _dirnames, filenames in os.walk(root):
        os.chown(dirpath, NOBODY, NOBODY)
        for n in filenames:
            os.lchown(os.path.join(dirpath, n), NOBODY, NOBODY)
    os.setegid(NOBODY)
    os.seteuid(NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)
