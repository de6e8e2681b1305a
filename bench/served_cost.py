"""What ``quire status --json`` and a no-op ``quire sync --json`` cost when a running
``quire watch`` serves them over its socket (replica/cli/entry.py,
replica/watch/server.py), side by side with the same commands run by the process itself.

A real ``quire hub serve`` process is loaded with the bench corpus (batches of 500, through
the guard); one member joins with the real CLI. Then ``quire watch`` runs for the space and
each command is run ``--runs`` times through the ``quire`` console script, alternately
served (``QUIRE_WATCHER_SOCKET=require``) and local (``=off``). Reported per command: the
median wall time of the whole ``quire`` process (start-up included), its CPU (user + sys,
from wait4) and the watcher's CPU spent meanwhile (from /proc/<pid>/stat: the work a
served command moved into the watcher); and the load average.

    python -m bench.served_cost [--sizes 1000,100000] [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import watcher_side as ws
from bench.corpus import corpus, edited, vault_path
from bench.quire_side import Hub, Member, Publisher
from bench.status_cost import each_size, joined_member, wait_idle, watching
from bench.watcher_side import cpu_of as _cpu_of
from bench.watcher_side import entry_cmd as _entry


def _once(cmd: list[str], env: dict[str, str], watcher: int | None) -> dict[str, Any]:
    before = _cpu_of(watcher) if watcher else 0.0
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode not in (0, 3):
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {stdout}{stderr}")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime,
            "watcher_cpu": (_cpu_of(watcher) - before) if watcher else 0.0,
            "state": json.loads(stdout.strip().splitlines()[-1]).get("state")}


def _series(env: dict[str, str], args: list[str], runs: int, modes: list[str],
            watcher: int | None) -> dict[str, Any]:
    got: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for _ in range(runs):  # interleaved: load drifts the same way for both
        for mode in modes:
            got[mode].append(_once([*_entry(), *args], dict(env, QUIRE_WATCHER_SOCKET=mode),
                                   watcher))
    out = {}
    for mode, rows in got.items():
        med = {k: round(statistics.median(r[k] for r in rows), 4)
               for k in ("wall", "cpu", "watcher_cpu")}
        out["served" if mode == "require" else "local"] = dict(
            med, runs_wall=[round(r["wall"], 4) for r in rows], state=rows[-1]["state"])
    return out


def run_size(n: int, runs: int, root: Path) -> dict[str, Any]:
    hub = Hub(f"hub-{n}", root, dict(os.environ))
    hub.init()
    hub.start()
    try:
        publisher: list[Publisher] = []
        m, vault, _join_s = joined_member(hub, n, root, "served", publisher)
        out: dict[str, Any] = {"entries": n}
        out["no_watcher"] = {
            "status": _series(m.env, ["status", "--json"], runs, ["off"], None),
            "noop_sync": _series(m.env, ["sync", "--json"], runs, ["off"], None)}
        with watching(m, lambda p: wait_idle(p, 1800, journal=True)) as watcher:
            out["with_watcher"] = {
                "status": _series(m.env, ["status", "--json"], runs, ["require", "off"],
                                  watcher.pid),
                "status_fast": _series(m.env, ["status", "--json", "--fast"], runs,
                                       ["require", "off"], watcher.pid),
                "noop_sync": _series(m.env, ["sync", "--json"], runs, ["require", "off"],
                                     watcher.pid)}
            out["with_watcher"]["served"] = ws.served_noop(m, watcher, runs)
            out["with_watcher"]["incremental"] = _incremental(m, vault, watcher, publisher[0],
                                                              n, runs)
        return out
    finally:
        for p in publisher:
            p.close()
        hub.stop()


def _incremental(m: Member, vault: Path, watcher: Any, pub: Publisher, n: int, runs: int
                 ) -> list[dict[str, Any]]:
    """10 entries changed by another member (``pub``, who published the corpus; rounds
    1..runs), each followed at once by the served ``quire sync --json``
    (bench/watcher_side.py)."""
    entries = corpus(n)
    rows = []
    for round_ in range(1, runs + 1):
        changed = edited(entries, 10, round_)
        probe = (vault_path(vault, changed[0]["id"]), f"Edited in round {round_}.")
        rows.append(ws.served_incremental(m, watcher, pub, changed, probe))
        ws.wait_ready(m)  # the watcher's own apply of the same changes is over
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,100000")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args(argv)

    def one(n: int, root: Path) -> dict[str, Any]:
        load = os.getloadavg()
        return dict(run_size(n, args.runs, root), load_before=load, load_after=os.getloadavg())

    results = each_size(args.sizes, "quire-bench-served-", one)
    doc = {"cores": os.cpu_count(), "python": sys.version.split()[0], "results": results}
    out = (Path(__file__).resolve().parent / "results"
           / f"served_cost_{args.sizes.replace(',', '_')}.json")
    out.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
