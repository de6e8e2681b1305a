"""Clone and incremental sync of the text-only corpus, one tree against another, back to back.

    python -m bench.clone_ab --base TREE_A --head TREE_B [--entries 20000] [--rounds 4]
                             [--changed 10] [--out FILE]

Each tree (a worktree with its own ``.venv``, e.g. the last release and main) gets a *side*:
its own ``quire hub serve``, its own CLI and its own bench code, loaded with the same
corpus (bench/corpus.py) through its own protocol client::

    orchestrator ──stdin "clone"/"incr"──▶ side(TREE_A): hub A + quire join/sync of tree A
                 ──stdin "clone"/"incr"──▶ side(TREE_B): hub B + quire join/sync of tree B
                 ◀──── one JSON line a measurement (wall, CPU of the command, hub CPU)

Rounds alternate which tree goes first, so the machine's load (other work on a shared
machine) hits both alike. A clone is ``quire join --vault`` + ``quire sync`` into a fresh
home; an incremental is ``--changed`` entries published by the loader, then one ``quire
sync`` of the first clone. Each command's wall time and CPU time (user + system from
``wait4``, the command process and the children it waited for) are its own, start-up
included; the hub's CPU over the same command comes from ``/proc``. Both trees are
byte-compiled first: with PYTHONDONTWRITEBYTECODE set, a tree without ``.pyc`` files
compiles every module in every command (bench/profiles.md). With ``QUIRE_AB_PROFILE=DIR``
each clone's ``join`` and ``sync`` run under cProfile, a ``.prof`` file each in DIR.
Prints the medians and the head/base ratios of wall, CPU and user CPU, with the load
average. On a shared machine the user CPU is the figure to hold against a goal: the system
part of a clone (writing 20,000 files) grew from 1 to 5 s over rounds with other people's
disk work, in both trees alike.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


# ---------------------------------------------------------------- the side (runs in a tree)


def _timed(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run ``cmd``; its wall time, its CPU time (wait4) and its last JSON line."""
    out = tempfile.TemporaryFile()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    lines = [ln for ln in out.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    doc = json.loads(lines[-1]) if lines else {}
    if proc.returncode not in (0, 3):
        raise RuntimeError(f"{cmd[1:3]} exited {proc.returncode}: {str(doc)[:300]}")
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "sys_s": ru.ru_stime, "doc": doc}


class Side:
    def __init__(self, root: Path, entries: int):
        sys.path.insert(0, os.getcwd())  # this tree's bench, hub, replica, shared
        from bench import corpus
        from bench.quire_side import Hub, Member, Publisher, quire_cmd

        self.corpus, self.Member, self.quire = corpus, Member, quire_cmd()
        self.root = root
        self.env = dict(os.environ, QUIRE_HUB_ACCESS_TTL=str(6 * 3600))
        self.env.pop("QUIRE_HOME", None)
        self.data = corpus.corpus(entries)
        self.hub = Hub("hub", root, self.env)
        self.hub.init()
        self.hub.start()
        self.owner = Member("owner", root, self.env)
        self.owner.join(self.hub.url, self.hub.enrollment_code)
        self.space = self.owner.create_space("ab")
        self.pub = Publisher(self.hub.url, self.owner.invite(self.space), name="loader")
        self.pub.attach(self.space)
        for i in range(0, len(self.data), 500):
            self.pub.publish(self.data[i:i + 500])
        self.clones = 0
        self.first: Any = None
        self.incr_round = 0

    def _cpu_of_hub(self) -> float:
        from bench.proc import tree_cpu

        assert self.hub.server is not None
        return tree_cpu(self.hub.server.pid)

    def clone(self) -> dict[str, Any]:
        self.clones += 1
        member = self.Member(f"c{self.clones}", self.root, self.env)
        quire = self.quire
        if os.environ.get("QUIRE_AB_PROFILE"):  # cProfile of each command, one file each
            out = Path(os.environ["QUIRE_AB_PROFILE"]) / f"{Path.cwd().name}-c{self.clones}"
            quire = [sys.executable, "-m", "cProfile", "-o", "{}", *self.quire]
            join_cmd = [x.format(str(out) + "-join.prof") for x in quire]
            sync_cmd = [x.format(str(out) + "-sync.prof") for x in quire]
        else:
            join_cmd = sync_cmd = quire
        vault = self.root / f"vault-{self.clones}"
        code = self.owner.invite(self.space)
        load, hub0 = os.getloadavg()[0], self._cpu_of_hub()
        join = _timed([*join_cmd, "join", self.hub.url, "--invite", code, "--device",
                       member.name, "--vault", str(vault), "--json"], member.env)
        sync = _timed([*sync_cmd, "sync", "--json"], member.env)
        hub_cpu = self._cpu_of_hub() - hub0
        files = sum(1 for _ in vault.rglob("*.md"))
        if files < len(self.data):
            raise RuntimeError(f"clone wrote {files} of {len(self.data)} files")
        if self.first is None:
            self.first = (member, vault)
        else:
            shutil.rmtree(member.home, ignore_errors=True)
            shutil.rmtree(vault, ignore_errors=True)
        return {"wall_s": join["wall_s"] + sync["wall_s"], "cpu_s": join["cpu_s"] + sync["cpu_s"],
                "join_wall_s": join["wall_s"], "sync_wall_s": sync["wall_s"],
                "join_cpu_s": join["cpu_s"], "sync_cpu_s": sync["cpu_s"],
                "sys_s": join["sys_s"] + sync["sys_s"],
                "user_s": join["cpu_s"] + sync["cpu_s"] - join["sys_s"] - sync["sys_s"],
                "hub_cpu_s": hub_cpu, "load": load, "files": files}

    def incr(self, changed: int) -> dict[str, Any]:
        if self.first is None:
            self.clone()
        member, vault = self.first
        self.incr_round += 1
        edits = self.corpus.edited(self.data, changed, self.incr_round)
        self.pub.publish(edits)
        load, hub0 = os.getloadavg()[0], self._cpu_of_hub()
        t = _timed([*self.quire, "sync", "--json"], member.env)
        hub_cpu = self._cpu_of_hub() - hub0
        probe = self.corpus.vault_path(vault, edits[0]["id"])
        if f"Edited in round {self.incr_round}." not in probe.read_text("utf-8"):
            raise RuntimeError("the change did not reach the vault after one sync")
        return {"wall_s": t["wall_s"], "cpu_s": t["cpu_s"], "sys_s": t["sys_s"],
                "user_s": t["cpu_s"] - t["sys_s"], "hub_cpu_s": hub_cpu,
                "load": load}

    def close(self) -> None:
        self.pub.close()
        self.hub.stop()


def _exit_on_term() -> None:
    """SIGTERM runs the ``finally`` blocks: the hubs are stopped, never left behind."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def side_main(root: Path, entries: int) -> int:
    _exit_on_term()
    side = Side(root, entries)
    print(json.dumps({"ready": True}), flush=True)
    try:
        for line in sys.stdin:
            cmd, _, arg = line.strip().partition(" ")
            if cmd == "quit":
                break
            res = side.clone() if cmd == "clone" else side.incr(int(arg or 10))
            print(json.dumps(res), flush=True)
    finally:
        side.close()
    return 0


# ---------------------------------------------------------------- the orchestrator


class Remote:
    """A side process in one tree, driven line by line."""

    def __init__(self, tree: Path, root: Path, entries: int):
        subprocess.run([str(tree / ".venv/bin/python"), "-m", "compileall", "-q", "-j0",
                        "hub", "replica", "shared"], cwd=tree, check=True,
                       stdout=subprocess.DEVNULL)
        self.tree = tree
        self.commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree,
                                     capture_output=True, text=True).stdout.strip()
        self.proc = subprocess.Popen(
            [str(tree / ".venv/bin/python"), str(HERE), "--side", str(root),
             "--entries", str(entries)], cwd=tree, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True)

    def ask(self, line: str) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        if line:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        got = self.proc.stdout.readline()
        if not got:
            raise RuntimeError(f"side in {self.tree} exited {self.proc.wait()}")
        return dict(json.loads(got))

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=120)


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return round(statistics.median(r[key] for r in rows), 3)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.clone_ab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--side", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--base", type=Path)
    p.add_argument("--head", type=Path, default=HERE.parents[1])
    p.add_argument("--entries", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--changed", type=int, default=10)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    if args.side:
        return side_main(args.side, args.entries)
    if args.base is None:
        p.error("--base TREE is required")
    _exit_on_term()
    load0 = os.getloadavg()
    res: dict[str, Any] = {"entries": args.entries, "changed": args.changed,
                           "rounds": args.rounds, "load_avg_at_start": [round(x, 2) for x in load0]}
    with tempfile.TemporaryDirectory(prefix="quire-clone-ab-") as d:
        sides = {"base": Remote(args.base.resolve(), Path(d) / "base", args.entries),
                 "head": Remote(args.head.resolve(), Path(d) / "head", args.entries)}
        try:
            for s in sides.values():
                s.ask("")  # ready: loaded
            got: dict[str, dict[str, list[dict[str, Any]]]] = {
                k: {"clone": [], "incr": []} for k in sides}
            for r in range(args.rounds):
                order = ["base", "head"] if r % 2 == 0 else ["head", "base"]
                for what in ("clone", f"incr {args.changed}"):
                    for k in order:
                        row = sides[k].ask(what)
                        got[k][what.split()[0]].append(row)
                        print(f"round {r + 1} {what.split()[0]} {k}: wall {row['wall_s']:.2f} s "
                              f"cpu {row['cpu_s']:.2f} s hub cpu {row['hub_cpu_s']:.2f} s "
                              f"load {row['load']:.1f}", file=sys.stderr, flush=True)
        finally:
            for s in sides.values():
                s.close()
    for k, s in sides.items():
        res[k] = {"tree": str(s.tree), "commit": s.commit}
        for what, rows in got[k].items():
            res[k][what] = {m: _median(rows, m)
                            for m in ("wall_s", "cpu_s", "user_s", "sys_s", "hub_cpu_s")}
            res[k][what]["runs"] = rows
    for what in ("clone", "incr"):
        res[f"{what}_ratio_wall"] = round(res["head"][what]["wall_s"] / res["base"][what]["wall_s"], 3)
        for m in ("cpu", "user"):
            res[f"{what}_ratio_{m}"] = round(res["head"][what][f"{m}_s"]
                                             / res["base"][what][f"{m}_s"], 3)
    res["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(res, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    summary = {k: v for k, v in res.items() if "_ratio_" in k}
    for k in ("base", "head"):
        summary[k] = {w: {m: res[k][w][m] for m in ("wall_s", "cpu_s", "user_s", "hub_cpu_s")}
                      for w in ("clone", "incr")}
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
