"""What ``quire status --json`` costs, at 1,000 and 100,000 entries, without a
watcher and with one running, wall time of the whole process (start-up included).

A real ``quire hub serve`` process is loaded with the bench corpus (batches of 500, through
the guard); one member joins with the real CLI (snapshot into its vault). Then, each
``--runs`` times (median reported): ``quire status --json`` on a clean vault, the same with
10 hand edits waiting (they are found by the vault scan), ``quire status --json --fast``
(no scan), and a no-op ``quire sync`` for comparison; then the same with ``quire watch``
running for the space: ``quire status`` then reads the watcher's journal of changed paths
(replica/ipc/journal.py, a cookie round trip) instead of the size-and-mtime scan a sync makes.

    python -m bench.status_cost [--sizes 1000,100000] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.corpus import corpus
from bench.proc import run_timed
from bench.quire_side import Hub, Member, Publisher, quire_cmd


def _median(times: list[float]) -> float:
    return round(statistics.median(times), 3)


def _timed(m: Member, *args: str, runs: int) -> dict[str, Any]:
    times, doc = [], {}
    for _ in range(runs):
        t = run_timed([*quire_cmd(), *args, "--json"], env=m.env, timeout=1800)
        times.append(t.seconds)
        doc = json.loads(t.stdout.strip().splitlines()[-1])
    return {"median_s": _median(times), "runs_s": [round(x, 3) for x in times],
            "state": doc.get("state"),
            "unpublished": (doc.get("unpublished") or {}).get("count"),
            "source": (doc.get("unpublished") or {}).get("source")}


def _edit(vault: Path, n: int, tag: str) -> list[Path]:
    files = sorted(vault.rglob("*.md"))[:n]
    for p in files:
        p.write_text(p.read_text(encoding="utf-8") + f"\nedited by hand ({tag})\n",
                     encoding="utf-8")
    return files


def _series(m: Member, vault: Path, runs: int, tag: str) -> dict[str, Any]:
    out = {"status": _timed(m, "status", runs=runs),
           "status_fast": _timed(m, "status", "--fast", runs=runs)}
    _edit(vault, 10, tag)
    out["status_10_edits"] = _timed(m, "status", runs=runs)
    m.sync()  # publish the edits; the next syncs have nothing to do
    out["noop_sync"] = _timed(m, "sync", runs=runs)
    return out


def wait_idle(status_path: Path, timeout: float = 600, journal: bool = False) -> None:
    """Idle with the event stream up (and with ``journal``, the journal valid: the scan that
    arming the file events starts is over; at 100,000 entries it holds the lock a while)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            doc = json.loads(status_path.read_text())
        except (OSError, ValueError):
            doc = {}
        if (doc.get("state") == "idle" and doc.get("stream") == "up"
                and (not journal or (doc.get("journal") or {}).get("valid"))):
            return
        time.sleep(0.2)
    raise RuntimeError(f"watcher not idle: {status_path}")


def joined_member(hub: Hub, n: int, root: Path, label: str,
                  keep: list[Publisher] | None = None) -> tuple[Member, Path, float]:
    """A space of ``n`` corpus entries published on ``hub`` (batches of 500, through the
    guard), and one member joined to it with the real CLI: (member, vault, join seconds).
    ``keep``: the publisher is appended to it, open (another member who can publish more),
    instead of closed."""
    pub = Publisher(hub.url, hub.enrollment_code, f"bench-{label}")
    space = pub.http.post("/v1/spaces", json={"name": f"{label}-{n}"}).json()["space"]["id"]
    pub.attach(space)
    entries = corpus(n)
    for i in range(0, len(entries), 500):
        pub.publish(entries[i:i + 500])
    code = pub.http.post(f"/v1/spaces/{space}/invites", json={"role": "editor"}).json()
    if keep is None:
        pub.close()
    else:
        keep.append(pub)
    m = Member(f"m{n}", root, dict(os.environ))
    vault = root / f"vault-{n}"
    return m, vault, m.join(hub.url, code["code"], vault).seconds


def run_size(n: int, runs: int, root: Path) -> dict[str, Any]:
    hub = Hub(f"hub-{n}", root, dict(os.environ))
    hub.init()
    hub.start()
    try:
        m, vault, join_s = joined_member(hub, n, root, "status")
        out: dict[str, Any] = {"entries": n, "join_s": round(join_s, 1)}
        out["without_watcher"] = _series(m, vault, runs, "a")
        with watching(m, wait_idle):
            out["with_watcher"] = {"status": _timed(m, "status", runs=runs),
                                   "status_fast": _timed(m, "status", "--fast", runs=runs)}
        return out
    finally:
        hub.stop()


@contextmanager
def watching(m: Member, ready: Callable[[Path], None]) -> Iterator[subprocess.Popen[bytes]]:
    """``quire watch`` for the member's one space, once ``ready(watch.json)`` returned."""
    space_dir = next((m.home / "spaces").iterdir())
    watcher = subprocess.Popen([*quire_cmd(), "watch"], env=m.env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ready(space_dir / "watch.json")
        yield watcher
    finally:
        watcher.terminate()
        watcher.wait(120)


def each_size(sizes: str, prefix: str, run: Callable[[int, Path], dict[str, Any]]
              ) -> list[dict[str, Any]]:
    """``run(n, folder)`` for each size, each in a fresh temporary folder; printed as it ends."""
    results = []
    for n in (int(s) for s in sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            results.append(run(n, Path(tmp)))
            print(json.dumps(results[-1]), flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,100000")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    results = each_size(args.sizes, "quire-bench-status-",
                        lambda n, root: run_size(n, args.runs, root))
    doc = {"load_average": os.getloadavg(), "cores": os.cpu_count(), "results": results}
    out = Path(__file__).resolve().parent / "results" / f"status_cost_{args.sizes.replace(',', '_')}.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
