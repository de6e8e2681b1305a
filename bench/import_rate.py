"""What ``quire import`` costs: entries a second for an import of a generated corpus
(tests/kit/corpus.py: notes and attachments, every style of name and front matter),
against the same files copied into a vault by hand and published by one ``quire sync``,
side by side in one run (rounds alternate, so machine load hits both alike); and the
clone of the imported space by a second member.

    python -m bench.import_rate [--notes N] [--attachments N] [--rounds N] [--out FILE]

The import plans (a walk, every file read and checked) and publishes a batch of at most
500 files or 8 MiB a sync (replica/app/importer.py); the baseline publishes the same
entries in the push's own batches of 500. ``import_ratio`` (import rate / baseline rate) is
the goal row: the price of planning, bounded batches and the resume record (goal 0.7).
Runs the real hub application in-process on SQLite (tests/kit/inproc.py), one process.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.space_log import emit


def main(argv: list[str] | None = None) -> int:
    from replica.app import importer
    from replica.store.links import live_ids_txn
    from tests.kit import corpus
    from tests.kit.inproc import InprocHub

    p = argparse.ArgumentParser(prog="python -m bench.import_rate", description=__doc__)
    p.add_argument("--notes", type=int, default=2000)
    p.add_argument("--attachments", type=int, default=300)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    hub = InprocHub()
    rate: dict[str, list[float]] = {"import": [], "sync": []}
    clone: list[float] = []
    try:
        with tempfile.TemporaryDirectory() as d:
            src = Path(d) / "corpus"
            c = corpus.build(src, notes=args.notes, attachments=args.attachments)
            n = len(c.notes) + len(c.attachments)
            for r in range(args.rounds):
                for how in (("import", "sync") if r % 2 == 0 else ("sync", "import")):
                    space = hub.space()
                    root = Path(d) / f"r{r}{how}"
                    rep = space.replica(root, "a")
                    rep.sync()
                    t0 = time.perf_counter()
                    if how == "import":
                        with rep.store.tx() as conn:
                            live = live_ids_txn(conn)
                        plan = importer.plan(src, rep.vault, rep.store, live)
                        importer.run(plan, rep.vault, rep.store, rep.sync)
                    else:
                        shutil.copytree(src, rep.vault, dirs_exist_ok=True)
                        rep.sync()
                    rate[how].append(n / (time.perf_counter() - t0))
                    if how == "import":
                        other = space.replica(root, "b")
                        t0 = time.perf_counter()
                        other.sync()
                        clone.append(time.perf_counter() - t0)
                        other.close()
                    rep.close()
                    space.close()
                    print(f"round {r + 1} {how}: {rate[how][-1]:.0f} entries/s", flush=True)
    finally:
        hub.close()
    res = {"entries": args.notes + args.attachments, "notes": args.notes,
           "attachments": args.attachments, "rounds": args.rounds,
           "import_entries_per_s": statistics.median(rate["import"]),
           "sync_entries_per_s": statistics.median(rate["sync"]),
           "clone_imported_s": statistics.median(clone)}
    res["import_ratio"] = res["import_entries_per_s"] / res["sync_entries_per_s"]
    res["goal_ratio"] = 0.7
    return emit(res, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
