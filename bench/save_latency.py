"""Editor-to-vault latency: from a file's save on one machine to the page in every other
vault (standalone; not a timed test). Run through ``python -m bench.watch_latency
--from-save`` or directly:

    python -m bench.save_latency [--watchers 3,20] [--saves 40] [--bursts 4]
                                 [--burst-size 5] [--env QUIRE_WATCH_DEBOUNCE_MS=500 ...]

1. Starts a hub (SQLite in a temp folder, or ``--db``), joins machines with the real CLI:
   the first (the writer) as an editor, the others as viewers, and runs one ``quire
   watch`` per machine, the writer's included (``--watchers`` counts them all: with 20,
   the writer and 19 readers). Each is ready when caught up, its stream up and its vault's
   file events armed.
2. Paced saves: ``--saves`` saves, one at a time, each written into the writer's vault the
   way editors save: a new page written to a temporary file and renamed over (atomic), an
   existing page changed by the same, a new page written in place, an existing page
   changed in place (``open(path, "wb")``), in turn. The save's time is taken when the
   rename or the close returned; the save has arrived when every reader's vault holds
   exactly the bytes saved (polled every 2 ms). Then a pause of 100-200 ms (random).
3. Bursts: ``--bursts`` times, ``--burst-size`` new pages saved back to back (atomic, 10 ms
   apart, as an agent writing several pages); each page's latency runs from its own save.
4. Per phase: p50/p95/p99/max, the CPU time (``/proc``) of the writer's watcher, of each
   reader's watcher (mean) and of the hub, per save; how the writer published (its syncs
   and scans, from its status file); the load average before and after.

Writes ``bench/results/save_latency.json`` (``--out``) and prints a table. Goals (issue
33): p95 under 200 ms with 20 watchers, paced and in bursts, and at most 3 ms of CPU per
reader per received change (the paced phase's "each reader" column).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.fleet import ROOT, Fleet, hub_cpu_s, loadavg, pct, procs_cpu_s

GOAL_P95_MS = 200
GOAL_READER_CPU_MS = 3.0  # per reader per received change (paced)


def page_bytes(entry_id: str, title: str, body: str) -> bytes:
    """The page as every vault shows it (the writer's save is already in that form, so a
    reader's file is compared byte for byte)."""
    from replica.vault import markdown as md
    from shared.entry import make_entry

    return md.render(make_entry({"id": entry_id, "title": title, "body": body}))


def save(path: Path, data: bytes, atomic: bool) -> float:
    """Save as an editor does; returns the time (Unix s) the save was complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if atomic:  # write a temporary file beside it, then rename over (vim, VS Code, …)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    else:  # truncate and write in place
        with open(path, "wb") as f:
            f.write(data)
    return time.time()


def arrived(paths: list[Path], data: bytes) -> list[Path]:
    """The paths that do not hold ``data`` yet."""
    out = []
    for p in paths:
        try:
            if p.stat().st_size == len(data) and p.read_bytes() == data:
                continue
        except OSError:
            pass
        out.append(p)
    return out


class Run:
    def __init__(self, b: Fleet, n: int):
        self.b, self.n = b, n
        self.writer = b.members[0][1]
        self.readers = [v for _, v in b.members[1:n]]
        self.pids = [w.pid for w in b.watchers]

    def cpu(self) -> tuple[float, float, float]:
        return (procs_cpu_s(self.pids[:1]), procs_cpu_s(self.pids[1:]), hub_cpu_s(self.b.hub.pid))

    def wait_all(self, waits: list[tuple[str, float, bytes]], timeout: float = 60
                 ) -> list[float]:
        """Latency (ms) of each (entry id, save time, bytes), from its save to the moment
        the last reader's vault held exactly those bytes."""
        from replica.vault import markdown as md

        todo = {i: [md.entry_path(v, eid) for v in self.readers]
                for i, (eid, _, _) in enumerate(waits)}
        done: dict[int, float] = {}
        deadline = time.monotonic() + timeout
        while todo:
            for i in list(todo):
                todo[i] = arrived(todo[i], waits[i][2])
                if not todo[i]:
                    done[i] = time.time()
                    del todo[i]
            if todo:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"saves {sorted(todo)} did not reach "
                                       f"{sum(len(v) for v in todo.values())} vault files")
                time.sleep(0.002)
        return [1000 * (done[i] - waits[i][1]) for i in range(len(waits))]

    def paced(self, count: int) -> dict[str, Any]:
        kinds = [("new", True), ("changed", True), ("new", False), ("changed", False)]
        lat: dict[str, list[float]] = {"atomic": [], "in_place": []}
        c0 = self.cpu()
        for i in range(count):
            what, atomic = kinds[i % 4]
            page = i // 2  # saves 0,1 create and change one page; 2,3 the next
            eid = f"page/w{self.n}-save-{page}"  # new in each run
            data = page_bytes(eid, f"save {page}", f"{what} by save {i}\n")
            t = save(vlt_path(self.writer, eid), data, atomic)
            lat["atomic" if atomic else "in_place"] += self.wait_all([(eid, t, data)])
            time.sleep(0.1 + 0.1 * random.random())
        return self.summary(lat["atomic"] + lat["in_place"], c0, count,
                            by_method={k: stats(v) for k, v in lat.items() if v})

    def burst(self, bursts: int, size: int) -> dict[str, Any]:
        lat: list[float] = []
        c0 = self.cpu()
        for r in range(bursts):
            waits = []
            for k in range(size):
                eid = f"page/w{self.n}-burst-{r}-{k}"
                data = page_bytes(eid, f"burst {r} {k}", f"page {k} of burst {r}\n")
                waits.append((eid, save(vlt_path(self.writer, eid), data, True), data))
                time.sleep(0.01)
            lat += self.wait_all(waits)
            time.sleep(0.3)
        return self.summary(lat, c0, bursts * size)

    def summary(self, lat: list[float], c0: tuple[float, float, float], saves: int,
                **extra: Any) -> dict[str, Any]:
        c1 = self.cpu()
        n = max(1, saves)
        return {"saves": saves, "latency_ms": stats(lat), **extra,
                "cpu_ms_per_save": {
                    "writer_watcher": round(1000 * (c1[0] - c0[0]) / n, 1),
                    "each_reader_watcher": round(1000 * (c1[1] - c0[1]) / n
                                                 / max(1, len(self.readers)), 1),
                    "hub": round(1000 * (c1[2] - c0[2]) / n, 1)},
                "loadavg_after": loadavg()}


def vlt_path(vault: Path, entry_id: str) -> Path:
    from replica.vault import markdown as md

    return md.entry_path(vault, entry_id)


def stats(lat: list[float]) -> dict[str, float]:
    lat = lat or [0.0]
    return {"p50": round(pct(lat, 50), 1), "p95": round(pct(lat, 95), 1),
            "p99": round(pct(lat, 99), 1), "max": round(max(lat), 1),
            "mean": round(sum(lat) / len(lat), 1)}


def writer_status(b: Fleet) -> dict[str, Any]:
    home = b.members[0][0]
    try:
        s = json.loads((next((home / "spaces").iterdir()) / "watch.json").read_text())
    except (OSError, ValueError, StopIteration):
        return {}
    return {k: s.get(k) for k in ("syncs", "scans", "applied")}


def measure(b: Fleet, n: int, args: argparse.Namespace, env: dict[str, str]
            ) -> dict[str, Any]:
    b.join(n, editors=1)
    b.start_watchers(n, env)
    try:
        time.sleep(1)  # the start-up syncs settle
        r = Run(b, n)
        out: dict[str, Any] = {"watchers": n, "readers": len(r.readers),
                               "loadavg_before": loadavg()}
        out["paced"] = r.paced(args.saves)
        if args.bursts:
            out["burst"] = r.burst(args.bursts, args.burst_size)
        out["writer"] = writer_status(b)
        return out
    finally:
        b.stop_watchers()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--watchers", default="3,20", help="comma-separated counts (writer incl.)")
    ap.add_argument("--saves", type=int, default=40)
    ap.add_argument("--bursts", type=int, default=4)
    ap.add_argument("--burst-size", type=int, default=5)
    ap.add_argument("--env", action="append", default=[],
                    help="NAME=VALUE for every watcher (e.g. QUIRE_WATCH_DEBOUNCE_MS=500)")
    ap.add_argument("--db", default=None, help="PostgreSQL URL (default: SQLite)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the temp folder (the watchers' logs: m*/watch.log)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "save_latency.json"))
    args = ap.parse_args(argv)
    env = dict(kv.split("=", 1) for kv in args.env)
    counts = sorted(int(x) for x in args.watchers.split(","))
    root = Path(tempfile.mkdtemp(prefix="quire-save-bench-"))
    b = Fleet(root, args.db)
    result: dict[str, Any] = {"backend": "postgresql" if args.db else "sqlite",
                              "cores": os.cpu_count(), "env": env, "goal_p95_ms": GOAL_P95_MS,
                              "goal_reader_cpu_ms": GOAL_READER_CPU_MS, "runs": []}
    try:
        for n in counts:
            result["runs"].append(measure(b, n, args, env))
    finally:
        b.close()
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"save → every other vault (ms), {result['backend']}, env {env or 'defaults'}")
    print(f"{'watchers':>8} {'phase':<8} {'saves':>5} {'p50':>7} {'p95':>7} {'p99':>7} "
          f"{'max':>7}  CPU ms/save writer/reader/hub  load before→after")
    for run in result["runs"]:
        for phase in ("paced", "burst"):
            if phase not in run:
                continue
            p, lat, c = run[phase], run[phase]["latency_ms"], run[phase]["cpu_ms_per_save"]
            print(f"{run['watchers']:>8} {phase:<8} {p['saves']:>5} {lat['p50']:>7} "
                  f"{lat['p95']:>7} {lat['p99']:>7} {lat['max']:>7}  "
                  f"{c['writer_watcher']}/{c['each_reader_watcher']}/{c['hub']}"
                  f"  {run['loadavg_before'][0]}→{p['loadavg_after'][0]}")
        for m, s in run["paced"].get("by_method", {}).items():
            print(f"{'':>8} {m:<8} {'':>5} {s['p50']:>7} {s['p95']:>7} {s['p99']:>7} "
                  f"{s['max']:>7}")
    print(f"goals: p95 < {GOAL_P95_MS} ms with 20 watchers (paced and burst), CPU of each "
          f"reader ≤ {GOAL_READER_CPU_MS:g} ms a change; written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
