"""What the signed state root costs: publish rate and clone time with the root
on and off, side by side in one run (rounds alternate, so machine load hits both alike),
and the time to recompute a root over 100,000 entries (``quire verify``'s dominant cost).

    python -m bench.state_root [--publishes N] [--entries N] [--rounds N]

On: the hub keeps the root in each publishing transaction (setting ``state_root``) and the
replica checks it when it clones. Off: the hub setting off and the replica's check skipped
(``replica.trust.verify.check_root_txn`` replaced by a no-op): the cost the feature adds. Runs the
real hub application in-process on SQLite (tests/kit/inproc.py), one process.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.space_log import emit
from replica.trust import verify
from shared import state
from shared.entry import Entry
from shared.ids import new_id
from shared.wire import Op, build_batch


def _publish(hub: Any, dev: Any, space_id: str, n: int, start: int = 0) -> float:
    """``n`` one-entry batches, one after the other; seconds taken."""
    with dev.client() as c:
        replica_id = c.register_replica(space_id, "bench")
        t0 = time.perf_counter()
        for i in range(start, start + n):
            h = c.head(space_id)
            e = Entry(id=f"page/p{i}", title=f"p{i}", body=f"page {i}\n")
            b = build_batch(dev.key, batch_id=new_id(), replica_id=replica_id, space=space_id,
                            epoch=h["epoch"], parent_seq=h["seq"], parent_digest=h["digest"],
                            ops=[Op(e, None)])
            c.push(space_id, b)
        return time.perf_counter() - t0


def _bulk(dev: Any, space_id: str, n: int) -> None:
    with dev.client() as c:
        replica_id = c.register_replica(space_id, "bulk")
        for lo in range(0, n, 500):
            h = c.head(space_id)
            ops = [Op(Entry(id=f"page/e{i}", title=f"e{i}", body=f"entry {i}\n" * 20), None)
                   for i in range(lo, min(n, lo + 500))]
            c.push(space_id, build_batch(dev.key, batch_id=new_id(), replica_id=replica_id,
                                         space=space_id, epoch=h["epoch"], parent_seq=h["seq"],
                                         parent_digest=h["digest"], ops=ops))


def main(argv: list[str] | None = None) -> int:
    from tests.kit.inproc import InprocHub

    p = argparse.ArgumentParser(prog="python -m bench.state_root", description=__doc__)
    p.add_argument("--publishes", type=int, default=200)
    p.add_argument("--entries", type=int, default=5000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    hub = InprocHub()
    real_check = verify.check_root_txn
    pub: dict[bool, list[float]] = {True: [], False: []}
    clone: dict[bool, list[float]] = {True: [], False: []}
    try:
        for r in range(args.rounds):
            for on in ((True, False) if r % 2 == 0 else (False, True)):
                hub.hub.settings.state_root = on
                space = hub.space()
                dev = space.device("pub")
                secs = _publish(hub, dev, space.id, args.publishes)
                pub[on].append(args.publishes / secs)
                # clone: a space of --entries entries, taken by a fresh replica
                space = hub.space()
                _bulk(space.device("bulk"), space.id, args.entries)
                verify.check_root_txn = real_check if on else (lambda *a, **k: None)
                with tempfile.TemporaryDirectory() as d:
                    rep = space.replica(Path(d), "clone")
                    t0 = time.perf_counter()
                    rep.sync()
                    clone[on].append(time.perf_counter() - t0)
                    rep.close()
                verify.check_root_txn = real_check
                print(f"round {r + 1} root {'on ' if on else 'off'}: "
                      f"{pub[on][-1]:.1f} publications/s, clone of {args.entries} entries "
                      f"{clone[on][-1]:.2f} s", flush=True)
    finally:
        hub.hub.settings.state_root = True
        verify.check_root_txn = real_check
        hub.close()
    pairs = [(f"page/p{i}", hashlib.sha256(str(i).encode()).hexdigest())
             for i in range(100_000)]
    t0 = time.perf_counter()
    state.root_of_entries(pairs)
    root_100k = time.perf_counter() - t0
    res = {
        "publish_rate_on": statistics.median(pub[True]),
        "publish_rate_off": statistics.median(pub[False]),
        "clone_s_on": statistics.median(clone[True]),
        "clone_s_off": statistics.median(clone[False]),
        "entries": args.entries, "publishes": args.publishes, "rounds": args.rounds,
        "root_100k_entries_s": root_100k,
    }
    res["publish_ratio"] = res["publish_rate_on"] / res["publish_rate_off"]
    res["clone_ratio"] = res["clone_s_on"] / res["clone_s_off"]
    return emit(res, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
