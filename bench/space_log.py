"""What the space log costs a publication (docs/decisions.md, D140): the publish rate with
the log on (a leaf per batch, the checkpoint signed into each head, one witness required by
the space's policy) and off (the leaf insert replaced by a no-op and no policy: heads then
carry the checkpoint of an empty log), side by side in one run, rounds alternating so
machine load hits both alike. Each publication asks for the head (its checkpoint computed
and signed) and pushes a one-entry batch, as ``bench/state_root.py`` does. Witnesses are
asked by replicas when they sync, never on the publication path.

    python -m bench.space_log [--publishes N] [--rounds N] [--out FILE]

Runs the real hub application in-process on SQLite (tests/kit/inproc.py), one process.
Rates are given per wall second and per CPU second of the process (client and hub): on a
shared, loaded machine the CPU rate is the one to compare.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hub.store import batches
from shared.entry import Entry
from shared.ids import new_id
from shared.signing import new_private_key, public_b64
from shared.wire import Op, build_batch


def publish(dev: Any, space_id: str, n: int,
            id_of: Callable[[int], str] = lambda i: f"page/p{i}") -> tuple[float, float]:
    """``n`` one-entry batches (entry ``id_of(i)``), one after the other; (wall, CPU)
    seconds taken."""
    with dev.client() as c:
        replica_id = c.register_replica(space_id, "bench")
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(n):
            h = c.head(space_id)
            e = Entry(id=id_of(i), title=f"p{i}", body=f"page {i}\n")
            c.push(space_id, build_batch(dev.key, batch_id=new_id(), replica_id=replica_id,
                                         space=space_id, epoch=h["epoch"],
                                         parent_seq=h["seq"], parent_digest=h["digest"],
                                         ops=[Op(e, None)]))
        return time.perf_counter() - t0, time.process_time() - c0


def on_off_rates(publishes: int, rounds: int, label: str,
                 switch: Callable[[bool, Any], None],
                 id_of: Callable[[int], str] = lambda i: f"page/p{i}") -> dict[str, Any]:
    """The publish rate with a feature on and off, side by side: ``rounds`` rounds on a
    fresh in-process hub, alternating which side goes first; ``switch(on, space)`` turns
    the feature on or off (and sets up the fresh space) before each side publishes."""
    from tests.kit.inproc import InprocHub

    hub = InprocHub()
    rate: dict[bool, list[float]] = {True: [], False: []}
    cpu: dict[bool, list[float]] = {True: [], False: []}
    try:
        for r in range(rounds):
            for on in ((True, False) if r % 2 == 0 else (False, True)):
                space = hub.space()
                switch(on, space)
                secs, cpus = publish(space.device("pub"), space.id, publishes, id_of)
                rate[on].append(publishes / secs)
                cpu[on].append(publishes / cpus)
                print(f"round {r + 1} {label} {'on ' if on else 'off'}: {rate[on][-1]:.1f} "
                      f"publications/s, {cpu[on][-1]:.1f} per CPU second", flush=True)
    finally:
        switch(True, None)
        hub.close()
    res = {"publish_rate_on": statistics.median(rate[True]),
           "publish_rate_off": statistics.median(rate[False]),
           "cpu_rate_on": statistics.median(cpu[True]),
           "cpu_rate_off": statistics.median(cpu[False]),
           "publishes": publishes, "rounds": rounds}
    res["publish_ratio"] = res["publish_rate_on"] / res["publish_rate_off"]
    res["cpu_ratio"] = res["cpu_rate_on"] / res["cpu_rate_off"]
    return res


def emit(res: dict[str, Any], out: Path | None) -> int:
    """Print the result and write it to ``out`` when given."""
    print(json.dumps(res, indent=2))
    if out:
        out.write_text(json.dumps(res, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.space_log", description=__doc__)
    p.add_argument("--publishes", type=int, default=300)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    real = batches.leaf_txn
    witness = {"name": "w1", "key": public_b64(new_private_key()), "url": "http://w1"}

    def switch(on: bool, space: Any) -> None:
        batches.leaf_txn = real if on else (lambda *a, **k: None)  # type: ignore
        if on and space is not None:
            space.admin.admin_post(f"/v1/spaces/{space.id}/witnesses",
                                   {"quorum": 1, "witnesses": [witness]})

    res = on_off_rates(args.publishes, args.rounds, "log", switch)
    res["goal_ratio"] = 0.9
    return emit(res, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
