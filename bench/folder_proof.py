"""What verified completeness costs (docs/decisions.md, D143): the size of a folder proof
and the time to verify it, per 1,000 entries in scope, and a publication with the folder
tree kept against without it.

    python -m bench.folder_proof [--entries N] [--publishes N] [--rounds N] [--out FILE]

Proofs: a space of ``--entries`` live entries in 100 project folders, each with 10
subfolders (``projects/pK/sJ/eI``), plus 100 guardrails; the scope is one project and the
guardrails (``projects/p7/*``, ``guardrail/*``: 1 % of the space, and 10 % with ten
projects). The proof is built from the tree the hub keeps (``shared/foldertree.tree_of``,
as ``hub/completeness.py`` reads it) and verified as a replica does
(``shared/folderproof.verify``: every scoped folder recomputed from its entries, median of
runs), beside the state root's lattices of the same entries (the ratio is what the machine's
load does not change). Its size is its canonical JSON.

Publication: the publish rate with the tree kept (``hub/signed_state.FOLDER_TREE``) and
without, side by side, rounds alternating, one-entry batches at depth 3
(``projects/pK/notes/eI``), as ``bench/space_log.py`` publishes. Runs the real hub
application in-process on SQLite (tests/kit/inproc.py), one process; rates per wall second
and per CPU second (the one to compare on a shared machine).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time
from pathlib import Path
from typing import Any

from bench.space_log import emit, on_off_rates
from shared import folderproof, foldertree, state
from shared.canonical import canonical_str


def _space(entries: int) -> list[tuple[str, str]]:
    per = max(1, entries // 1000)
    out = [(f"projects/p{k}/s{j}/e{i}", hashlib.sha256(f"{k}/{j}/{i}".encode()).hexdigest())
           for k in range(100) for j in range(10) for i in range(per)]
    return out + [(f"guardrail/g{i}", hashlib.sha256(f"g{i}".encode()).hexdigest())
                  for i in range(100)]


def proof_cost(entries: int, projects: int, runs: int = 5) -> dict[str, Any]:
    live = _space(entries)
    nodes = foldertree.tree_of(live)
    tree = nodes[foldertree.TOP].digest.hex()
    only = [f"projects/p{k}/*" for k in range(projects)] + ["guardrail/*"]
    scope = folderproof.parse_scope(only)
    assert scope is not None
    proof = folderproof.build(nodes, scope, tree)
    held = [(i, v) for i, v in live if scope.holds(i)]
    times, base = [], []
    for _ in range(runs):  # alternating with the state root's sums of the same entries
        t0 = time.perf_counter()
        folderproof.verify(tree, scope, held, proof)
        t1 = time.perf_counter()
        state.lattices_of(held)
        base.append(time.perf_counter() - t1)
        times.append(t1 - t0)
    size = len(canonical_str(proof).encode())
    verify_s = statistics.median(times)
    return {"space_entries": len(live), "in_scope": len(held), "scope": only[-2:],
            "proof_bytes": size, "proof_bytes_per_1000": size * 1000 / len(held),
            "verify_ms": verify_s * 1000, "verify_ms_per_1000": verify_s * 1e6 / len(held),
            # the same entries' state-root lattices (what any replica already pays for them)
            "verify_vs_state_lattices": verify_s / statistics.median(base)}


def _switch(on: bool, space: Any) -> None:
    from hub import signed_state

    signed_state.FOLDER_TREE = on


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.folder_proof", description=__doc__)
    p.add_argument("--entries", type=int, default=100_000)
    p.add_argument("--publishes", type=int, default=300)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    res = {"proof_1pct": proof_cost(args.entries, 1), "proof_10pct": proof_cost(args.entries, 10),
           "publish": on_off_rates(args.publishes, args.rounds, "tree", _switch,
                                   lambda i: f"projects/p{i % 10}/notes/e{i}")}
    return emit(res, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
