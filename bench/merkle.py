"""What checking the space log costs a replica (shared/merkle.py): the CPU time of one
consistency proof and one inclusion proof against a tree of 1,000,000 leaves (a space with
a million batches), and the proofs' length. The goal (docs/decisions.md, D140): under 1 ms
of CPU per check.

    python -m bench.merkle [--size N] [--checks N] [--out FILE]

The tree is built once in memory (every perfect node, ~2N hashes); the time is
``time.process_time`` over ``--checks`` verifications of proofs from a size a little
behind (the last sync) to the full size, divided by the count.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from shared import merkle


def build(size: int) -> dict[tuple[int, int], bytes]:
    nodes: dict[tuple[int, int], bytes] = {}
    frontier: list[bytes] = []
    for i in range(size):
        frontier, new = merkle.append(i, frontier, merkle.leaf_hash(i.to_bytes(8, "big")))
        nodes.update(new)
    return nodes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.merkle")
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--checks", type=int, default=2000)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    tree = merkle.Tree.over(build(a.size))
    built = time.perf_counter() - t0
    rng = random.Random(140)
    root = tree.root(a.size)
    cases = []
    for _ in range(a.checks):
        first = a.size - rng.randint(1, 5000)
        index = rng.randrange(a.size)
        cases.append((first, tree.root(first), tree.consistency_proof(first, a.size), index,
                      merkle.leaf_hash(index.to_bytes(8, "big")),
                      tree.inclusion_proof(index, a.size)))
    c0 = time.process_time()
    for first, old, proof, *_ in cases:
        merkle.verify_consistency(first, a.size, old, root, proof)
    cons = (time.process_time() - c0) / a.checks
    c0 = time.process_time()
    for *_, index, leaf, proof in cases:
        merkle.verify_inclusion(leaf, index, a.size, proof, root)
    incl = (time.process_time() - c0) / a.checks
    row = {"size": a.size, "checks": a.checks, "build_s": round(built, 2),
           "consistency_cpu_ms": round(cons * 1000, 4),
           "inclusion_cpu_ms": round(incl * 1000, 4),
           "consistency_hashes_max": max(len(c[2]) for c in cases),
           "inclusion_hashes_max": max(len(c[5]) for c in cases),
           "goal_ms": 1.0, "ok": cons < 0.001 and incl < 0.001}
    print(json.dumps(row, indent=2))
    if a.out:
        a.out.write_text(json.dumps(row, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
