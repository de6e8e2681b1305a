"""A no-op ``quire sync`` by two trees against one replica, back to back, and git beside them.

    python -m bench.noop_ab --home QUIRE_HOME --base TREE_A --head TREE_B [--git CLONE]
                            [--rounds 9] [--out FILE]

Both trees' console scripts (``TREE/.venv/bin/quire``, bytecode compiled first) sync the
same joined replica (``--home``, e.g. made by ``bench.clone_ab``'s side or by hand against
a running hub) with nothing to do, alternating which goes first; ``--git`` is a clone whose
``git pull`` has nothing to pull (and ``git status`` of it). Each command's wall time and
CPU (user + system, ``wait4``) are its own, start-up included. Prints medians and the
head ÷ base and head ÷ git ratios; on a shared machine CPU is the figure to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def timed(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> dict[str, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) not in (0, 3):
        raise RuntimeError(f"{cmd} exited {os.waitstatus_to_exitcode(status)}")
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "user_s": ru.ru_utime}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.noop_ab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", type=Path, required=True)
    p.add_argument("--base", type=Path, required=True)
    p.add_argument("--head", type=Path, required=True)
    p.add_argument("--git", type=Path, default=None)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    env = dict(os.environ, QUIRE_HOME=str(args.home), QUIRE_WATCHER_SOCKET="off")
    trees = {"base": args.base.resolve(), "head": args.head.resolve()}
    for t in trees.values():
        subprocess.run([str(t / ".venv/bin/python"), "-m", "compileall", "-q", "-j0", "hub",
                        "replica", "shared"], cwd=t, check=True, stdout=subprocess.DEVNULL)
    cmds = {k: [str(t / ".venv/bin/quire"), "sync", "--json"] for k, t in trees.items()}
    got: dict[str, list[dict[str, float]]] = {k: [] for k in (*trees, "git-pull", "git-status")}
    load0 = os.getloadavg()
    pull = bool(args.git) and subprocess.run(  # a clone with an upstream: git pull too
        ["git", "rev-parse", "@{u}"], cwd=args.git, capture_output=True).returncode == 0
    for k in trees:  # warm the page cache once each
        timed(cmds[k], env)
    for r in range(args.rounds):
        for k in (["base", "head"] if r % 2 == 0 else ["head", "base"]):
            got[k].append(timed(cmds[k], env))
        if pull:
            got["git-pull"].append(timed(["git", "pull", "-q"], env, args.git))
        if args.git:
            got["git-status"].append(timed(["git", "status", "--porcelain"], env, args.git))
        print(f"round {r + 1}: " + "  ".join(
            f"{k} {v[-1]['cpu_s']:.3f}/{v[-1]['wall_s']:.3f}" for k, v in got.items() if v),
            file=sys.stderr, flush=True)
    res: dict[str, Any] = {"home": str(args.home), "rounds": args.rounds,
                           "load_avg_at_start": [round(x, 2) for x in load0],
                           "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]}
    for k, rows in got.items():
        if rows:
            res[k] = {m: round(statistics.median(r[m] for r in rows), 4)
                      for m in ("wall_s", "cpu_s", "user_s")}
            res[k]["runs"] = rows
    for k, t in trees.items():
        res[k]["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=t,
                                          capture_output=True, text=True).stdout.strip()
    ratios = {}
    for m in ("cpu_s", "wall_s"):
        ratios[f"head_base_{m}"] = round(res["head"][m] / res["base"][m], 3)
        for g in ("git-pull", "git-status"):
            if g in res:
                ratios[f"head_{g}_{m}"] = round(res["head"][m] / res[g][m], 2)
    res["ratios"] = ratios
    if args.out:
        args.out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: ({m: v[m] for m in ("wall_s", "cpu_s")} if isinstance(v, dict)
                          and "cpu_s" in v else v) for k, v in res.items()
                      if k not in ("home",)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
