"""Watcher propagation latency and idle cost (standalone; not a timed test).

    python -m bench.watch_latency [--watchers 20] [--publications 200] [--idle 100]
                                  [--idle-seconds 60] [--db postgresql://…]

1. Starts a hub (SQLite in a temp folder, or ``--db``), joins ``--watchers`` machines with
   the real CLI (one ``QUIRE_HOME`` each) and runs one ``quire watch`` process per machine.
2. Publishes ``--publications`` batches through the protocol (one new page each, one at a
   time) and measures, per publication, from its commit (the receipt's ``accepted_at``, hub
   clock = this machine's clock) to the moment the *last* watcher's vault holds the page
   (polled every 5 ms). Reports p50/p95/p99/max, and the CPU time spent meanwhile by
   the watcher processes, the hub and this process (its polling loop, so one can see it
   does not steal the CPU it measures), per publication; and how the watchers got there
   (changes applied from head events, full syncs, vault scans: from their status files).
3. Stops those watchers, starts ``--idle`` watchers (more machines joined as needed) and
   measures the hub process's CPU time (``/proc/PID/stat`` utime+stime) over
   ``--idle-seconds`` while nothing is published.

Writes ``bench/results/watch_latency.json`` and prints a table. Goals: p95 under
250 ms with 20 watchers; idle hub CPU under 2 % of one core with 100 watchers.

``--from-save``: the user's path instead, from a file saved in one machine's vault (its own
``quire watch`` publishes it) to the page in every other vault: bench/save_latency.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.fleet import ROOT, Fleet, hub_cpu_s, loadavg, pct, procs_cpu_s, procs_sys_s


def publish_and_time(b: Fleet, n_watchers: int, count: int, first: int = 0) -> list[float]:
    from replica.app.service import open_client as _client
    from replica.machine.home import Home
    from shared.entry import make_entry
    from shared.ids import new_id
    from shared.signing import load_private
    from shared.wire import Op, build_batch

    home = Home(b.owner)
    hub = home.hubs()[0]
    key = load_private(hub.key_path)
    vaults = [v for _, v in b.members[:n_watchers]]
    out: list[float] = []
    with _client(hub) as c:
        replica = c.register_replica(b.space["id"], "bench-publisher")
        h = c.head(b.space["id"])
        parent = (h["seq"], h["digest"])
        for i in range(first, first + count):
            entry = make_entry({"id": f"page/bench-{i}", "title": f"bench {i}",
                                "body": f"publication {i}\n"})
            batch = build_batch(key, batch_id=new_id(), replica_id=replica,
                                space=h["space"], epoch=h["epoch"], parent_seq=parent[0],
                                parent_digest=parent[1], ops=[Op(entry, None)])
            receipt = c.push(b.space["id"], batch)
            parent = (receipt["seq"], receipt["head"])
            committed = receipt["accepted_at"]
            paths = [v / "page" / f"bench-{i}.md" for v in vaults]
            deadline = time.monotonic() + 30
            while paths:
                paths = [p for p in paths if not p.exists()]
                if paths and time.monotonic() > deadline:
                    raise RuntimeError(f"publication {i} did not reach {len(paths)} vaults")
                if paths:
                    time.sleep(0.005)
            out.append(time.time() * 1000 - committed)
            time.sleep(0.02)
    return out


def watcher_paths(b: Fleet, n: int) -> dict[str, int]:
    """Summed over the watchers' status files: how they caught up."""
    out = {"applied_from_events": 0, "full_syncs": 0, "vault_scans": 0}
    for home, _ in b.members[:n]:
        try:
            s = json.loads((next((home / "spaces").iterdir()) / "watch.json").read_text())
        except (OSError, ValueError, StopIteration):
            continue
        out["applied_from_events"] += int(s.get("applied") or 0)
        out["full_syncs"] += int(s.get("syncs") or 0)
        out["vault_scans"] += int(s.get("scans") or 0)
    return out


def main(argv: list[str] | None = None) -> int:
    if "--from-save" in (sys.argv[1:] if argv is None else argv):
        from bench.save_latency import main as from_save  # the user's path: save → vaults

        return from_save([a for a in (sys.argv[1:] if argv is None else argv)
                          if a != "--from-save"])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--watchers", type=int, default=20)
    ap.add_argument("--publications", type=int, default=200)
    ap.add_argument("--idle", type=int, default=100)
    ap.add_argument("--idle-seconds", type=float, default=60)
    ap.add_argument("--db", default=None, help="PostgreSQL URL (default: SQLite)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "watch_latency.json"))
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="quire-watch-bench-"))
    b = Fleet(root, args.db)
    result: dict[str, Any] = {"watchers": args.watchers, "publications": args.publications,
                              "backend": "postgresql" if args.db else "sqlite",
                              "cores": os.cpu_count()}
    try:
        t = time.monotonic()
        b.join(max(args.watchers, 1))
        b.start_watchers(args.watchers)
        result["setup_s"] = round(time.monotonic() - t, 1)
        result["loadavg_before"] = loadavg()
        pids = [w.pid for w in b.watchers]
        w0, h0, s0 = procs_cpu_s(pids), hub_cpu_s(b.hub.pid), time.process_time()
        k0 = procs_sys_s(pids)
        t0 = time.monotonic()
        lat = publish_and_time(b, args.watchers, args.publications) or [0.0]
        wall = time.monotonic() - t0
        w1, h1, s1 = procs_cpu_s(pids), hub_cpu_s(b.hub.pid), time.process_time()
        k1 = procs_sys_s(pids)
        n = max(1, args.publications)
        result["loadavg_after"] = loadavg()
        result["cpu_ms_per_publication"] = {
            "each_watcher": round(1000 * (w1 - w0) / n / max(1, len(pids)), 2),
            "each_watcher_kernel": round(1000 * (k1 - k0) / n / max(1, len(pids)), 2),
            "all_watchers": round(1000 * (w1 - w0) / n, 1),
            "hub": round(1000 * (h1 - h0) / n, 2),
            "bench_process": round(1000 * (s1 - s0) / n, 2)}
        result["bench_process_cpu_pct_of_one_core"] = round(100 * (s1 - s0) / wall, 2)
        result["watcher_paths"] = watcher_paths(b, args.watchers)
        result["latency_ms"] = {"p50": round(pct(lat, 50), 1), "p95": round(pct(lat, 95), 1),
                                "p99": round(pct(lat, 99), 1), "max": round(max(lat), 1),
                                "mean": round(sum(lat) / len(lat), 1)}
        result["latency_goal_p95_ms"] = 250
        b.stop_watchers()
        if args.idle:
            b.join(args.idle)
            b.start_watchers(args.idle)
            time.sleep(2)  # connections settled
            c0, t0 = hub_cpu_s(b.hub.pid), time.monotonic()
            time.sleep(args.idle_seconds)
            c1, t1 = hub_cpu_s(b.hub.pid), time.monotonic()
            result["idle"] = {"watchers": args.idle, "seconds": round(t1 - t0, 1),
                              "hub_cpu_s": round(c1 - c0, 3),
                              "hub_cpu_pct_of_one_core": round(100 * (c1 - c0) / (t1 - t0), 2),
                              "goal_pct": 2.0}
    finally:
        b.close()
        shutil.rmtree(root, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    lat = result["latency_ms"]
    rows = [("watchers", str(args.watchers)), ("publications", str(args.publications)),
            ("backend", result["backend"]),
            ("commit → last watcher p50", f"{lat['p50']} ms"),
            ("p95 (goal < 250 ms)", f"{lat['p95']} ms"), ("p99", f"{lat['p99']} ms"),
            ("max", f"{lat['max']} ms"),
            ("CPU per publication, each watcher",
             f"{result['cpu_ms_per_publication']['each_watcher']} ms (kernel "
             f"{result['cpu_ms_per_publication']['each_watcher_kernel']} ms)"),
            ("CPU per publication, hub", f"{result['cpu_ms_per_publication']['hub']} ms"),
            ("this process (polling)", f"{result['bench_process_cpu_pct_of_one_core']} % "
                                        "of one core"),
            ("load average before / after",
             f"{result['loadavg_before']} / {result['loadavg_after']}"),
            ("watchers: from events / full syncs / scans",
             " / ".join(str(v) for v in result["watcher_paths"].values()))]
    if "idle" in result:
        i = result["idle"]
        rows.append((f"hub CPU, {i['watchers']} idle watchers, {i['seconds']} s",
                     f"{i['hub_cpu_pct_of_one_core']} % of one core (goal < 2 %)"))
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{w}}  {v}")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
