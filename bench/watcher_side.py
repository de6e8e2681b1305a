"""What ``quire`` costs with a ``quire watch`` running, for the full bench
(bench/run.py) and bench/served_cost.py: each command through the ``quire`` console script
(replica/cli/entry.py), which a running watcher serves over its socket.

    with watching(member) as w:               # quire watch, idle, stream up, journal valid
        served_noop(member, w, runs=5)        # no-op `sync --json` and `status --json`
        served_incremental(member, w, pub, changed, probe)   # another member publishes;
                                              # the served `sync --json` right after

Wall time is the whole ``quire`` process (start-up included); CPU is its user + sys (from
``wait4``) and the watcher's meanwhile (``/proc/<pid>/stat``). A served command is forced
(``QUIRE_WATCHER_SOCKET=require``: it fails rather than run in the process), and each row
checks the served sync scanned by the watcher's journal, not by walking the vault.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.proc import Unavailable
from bench.quire_side import Member, Publisher, quire_cmd

TICK = os.sysconf("SC_CLK_TCK")


def entry_cmd() -> list[str]:
    """The ``quire`` console script of this environment (replica.cli.entry:main), as people run
    it; ``bench.quire_side.quire_cmd`` runs the CLI module directly (never served)."""
    script = Path(sys.executable).parent / "quire"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from replica.cli.entry import main; sys.exit(main())"]


def cpu_of(pid: int) -> float:
    """User + sys seconds of a running process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def run_cli(member: Member, args: list[str], watcher: int | None = None,
            mode: str = "require") -> dict[str, Any]:
    """One ``quire`` command (``QUIRE_WATCHER_SOCKET=mode``): wall, its CPU, the watcher's
    CPU meanwhile, and its JSON document."""
    before = cpu_of(watcher) if watcher else 0.0
    env = dict(member.env, QUIRE_WATCHER_SOCKET=mode)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen([*entry_cmd(), *args], env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if code not in (0, 3):  # 3: ran, and left something for a person (docs/cli.md)
        raise Unavailable(f"quire {' '.join(args)} failed ({code}): {(stdout + stderr)[-300:]}")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime,
            "watcher_cpu": (cpu_of(watcher) - before) if watcher else 0.0,
            "doc": json.loads(stdout.strip().splitlines()[-1])}


def watch_status(member: Member) -> dict[str, Any]:
    space_dir = next((member.home / "spaces").iterdir())
    try:
        return json.loads((space_dir / "watch.json").read_text())
    except (OSError, ValueError):
        return {}


def wait_ready(member: Member, timeout: float = 1800) -> None:
    """Idle, the event stream up and the journal valid (the scan that arming the file
    events starts is over; at 100,000 entries it holds the lock a while)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        doc = watch_status(member)
        if (doc.get("state") == "idle" and doc.get("stream") == "up"
                and (doc.get("journal") or {}).get("valid")):
            return
        time.sleep(0.2)
    raise Unavailable(f"watcher not ready: {watch_status(member)}")


@contextmanager
def watching(member: Member, ready: Callable[[Member], None] = wait_ready
             ) -> Iterator[subprocess.Popen[bytes]]:
    """``quire watch`` for the member's one space, once ``ready(member)`` returned."""
    watcher = subprocess.Popen([*quire_cmd(), "watch"], env=member.env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ready(member)
        yield watcher
    finally:
        watcher.terminate()
        watcher.wait(120)


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    walls = [r["wall"] for r in rows]
    return {"median_s": round(statistics.median(walls), 4), "fastest_s": round(min(walls), 4),
            "client_cpu_s": round(statistics.median(r["cpu"] for r in rows), 4),
            "watcher_cpu_s": round(statistics.median(r["watcher_cpu"] for r in rows), 4),
            "runs_s": [round(w, 4) for w in walls]}


def _scanned_by_journal(doc: dict[str, Any], what: str) -> None:
    how = (doc.get("sync") or {}).get("scanned_by") or (doc.get("unpublished") or {}).get(
        "source")
    if how != "journal":
        raise Unavailable(f"the served {what} did not scan by the watcher's journal ({how})")


def served_noop(member: Member, watcher: subprocess.Popen[bytes], runs: int = 5
                ) -> dict[str, Any]:
    """A no-op ``quire sync --json`` and ``quire status --json`` served by the running
    watcher, ``runs`` times each, interleaved: {"sync": …, "status": …, "load": …}."""
    got: dict[str, list[dict[str, Any]]] = {"sync": [], "status": []}
    load = os.getloadavg()
    for _ in range(runs):
        for command in got:
            r = run_cli(member, [command, "--json"], watcher.pid)
            _scanned_by_journal(r["doc"], command)
            if command == "sync" and (r["doc"]["sync"]["pulled"] or r["doc"]["sync"]["pushed"]):
                raise Unavailable(f"not a no-op sync: {r['doc']['sync']}")
            got[command].append(r)
    return {c: _summary(rows) for c, rows in got.items()} | {
        "load": [round(x, 2) for x in (*load, *os.getloadavg())]}


def served_incremental(member: Member, watcher: subprocess.Popen[bytes], pub: Publisher,
                       changed: list[dict[str, Any]], probe: tuple[Path, str]
                       ) -> dict[str, Any]:
    """Another member (``pub``) publishes ``changed``; right after the publication returns,
    ``quire sync --json`` served by the running watcher; timed. The vault must hold the
    change when it exits (``probe``: a changed entry's file and text it must contain)."""
    load = os.getloadavg()
    started = time.perf_counter()
    pub.publish(changed)
    published = time.perf_counter()
    r = run_cli(member, ["sync", "--json"], watcher.pid)
    _scanned_by_journal(r["doc"], "sync")
    path, text = probe
    if text not in path.read_text("utf-8"):
        raise Unavailable("the change was not in the vault when the served sync exited")
    return {"seconds": round(r["wall"], 4), "client_cpu_s": round(r["cpu"], 4),
            "watcher_cpu_s": round(r["watcher_cpu"], 4),
            "publish_s": round(published - started, 4), "pulled": r["doc"]["sync"]["pulled"],
            "load": [round(x, 2) for x in (*load, *os.getloadavg())]}
