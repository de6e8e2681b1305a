"""A partial replica of one folder against a full one, beside git's sparse clone of the same
folder, in one run (docs/replica.md, "Scoped and partial replicas").

    python -m bench.partial [--entries N] [--rounds N] [--fs journal|tmp|DIR] [--out FILE]
                            [--profile DIR]

The space: ``bench.corpus`` at ``--entries``, with every hundredth entry moved into one
folder, ``page/alpha/`` (1 % of the space; links to a moved entry dropped). Quire: a real
``quire hub serve`` (SQLite), loaded by the protocol-level publisher in batches of 500 (as
``bench.run`` loads it); git: the same files in one commit of a bare repository served by
``git daemon`` on loopback (``uploadpack.allowFilter`` on), as ``bench/peers/git_peer.py``.

Measured, each the wall time of whole commands as a user runs them (process start included),
rounds alternating and medians reported:

- clone: ``quire join --vault`` + ``quire sync`` of the whole space, against the same with
  ``--only 'page/alpha/*'``; ``git clone`` against ``git clone --filter=blob:none --sparse``
  + ``git sparse-checkout set page/alpha``. Each checks its folder is all there.
- sync of 10 changes in the folder, published by another member (pushed, for git): one
  ``quire sync`` on the partial replica and one on the full replica of the same head;
  ``git pull`` on the sparse and on the full clone.

Goals (docs/replica.md): partial clone ≤ 0.05 × full clone; partial sync ≤ full sync.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench import corpus as corpus_mod
from bench import workfs
from bench.peers.git_peer import GitPeer
from bench.proc import Unavailable, run_timed
from bench.quire_side import PY, Hub, Member, Publisher, quire_cmd

FOLDER = "page/alpha"
GLOB = f"{FOLDER}/*"
EVERY = 100  # one entry in EVERY is in the folder: 1 %


def log(msg: str) -> None:
    print(f"[partial {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def scoped_corpus(n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the whole space, the entries of its folder ``page/alpha/``: every hundredth)."""
    entries = corpus_mod.corpus(n)
    moved = {e["id"] for i, e in enumerate(entries) if i % EVERY == EVERY // 2}
    out, folder = [], []
    for e in entries:
        links = [x for x in e["links"] if x not in moved]
        if e["id"] in moved:
            e = dict(e, id=f"{FOLDER}/{e['id'].split('/', 1)[1]}", links=links)
            folder.append(e)
        else:
            e = dict(e, links=links)
        out.append(e)
    return out, folder


def _count(folder: Path) -> int:
    return sum(1 for _ in folder.rglob("*.md")) if folder.exists() else 0


class QuireSide:
    """The hub, the loaded space, and replicas joined through the CLI."""

    def __init__(self, root: Path, env: dict[str, str]):
        self.root = root
        self.hub = Hub("partial", root, env)
        self.hub.init()
        self.hub.start()
        self.env = env
        self.owner = Member("owner", root, env)
        self.owner.join(self.hub.url, self.hub.enrollment_code)
        self.space = ""
        self.pub: Publisher | None = None

    def load(self, entries: list[dict[str, Any]], batch: int = 500) -> float:
        self.space = self.owner.create_space("partial")
        self.pub = Publisher(self.hub.url, self.owner.invite(self.space), name="loader")
        self.pub.attach(self.space)
        start = time.perf_counter()
        for i in range(0, len(entries), batch):
            self.pub.publish(entries[i:i + batch])
        return time.perf_counter() - start

    def clone(self, name: str, only: list[str], expect: int) -> tuple[Member, dict[str, Any]]:
        member = Member(name, self.root, self.env)
        vault = self.root / f"vault-{name}"
        join = member.join(self.hub.url, self.owner.invite(self.space), vault, only=only)
        sync = member.sync()
        files, in_folder = _count(vault), _count(vault / FOLDER)
        if in_folder != expect:
            raise Unavailable(f"{name}: {in_folder} of {expect} folder entries after join+sync")
        return member, {"seconds": join.seconds + sync.seconds, "join_s": round(join.seconds, 3),
                        "sync_s": round(sync.seconds, 3), "files": files,
                        "peak_rss_mb": round(max(join.peak_rss_mb, sync.peak_rss_mb), 1)}

    def snapshot_s(self, only: list[str]) -> float:
        """The hub's side alone: one snapshot streamed and discarded by the loader."""
        assert self.pub is not None
        start = time.perf_counter()
        with self.pub.http.stream("GET", f"/v1/spaces/{self.space}/snapshot",
                                  params={"only": only} if only else None) as r:
            for _line in r.iter_lines():
                pass
        return time.perf_counter() - start

    def profile_join(self, out: Path) -> dict[str, Any]:
        """One more partial join + sync, each under cProfile (the CLI as a user runs it);
        the profiles are written to ``out`` and their top functions returned."""
        import pstats

        member = Member("profiled", self.root, self.env)
        vault = self.root / "vault-profiled"
        script = quire_cmd()[-1]
        tops: dict[str, Any] = {}
        for step, args in (("join", ["join", self.hub.url, "--invite",
                                     self.owner.invite(self.space), "--device", "profiled",
                                     "--vault", str(vault), "--only", GLOB]),
                           ("sync", ["sync"])):
            prof = out / f"partial-{step}.prof"
            t = run_timed([PY, "-m", "cProfile", "-o", str(prof), script, *args, "--json"],
                          env=member.env).check(f"profiled quire {step}")
            stats = pstats.Stats(str(prof))
            rows = sorted(stats.stats.items(),  # type: ignore[attr-defined]
                          key=lambda kv: -kv[1][3])[:25]
            tops[step] = {"seconds": round(t.seconds, 3), "top_cumulative": [
                f"{v[3]:.3f}s {Path(k[0]).name}:{k[1]} {k[2]}" for k, v in rows]}
        return tops

    def close(self) -> None:
        if self.pub:
            self.pub.close()
        self.hub.stop()


class GitSide:
    """The same files in a bare repository behind ``git daemon``; full and sparse clones."""

    def __init__(self, root: Path, env: dict[str, str], entries: list[dict[str, Any]]):
        self.peer = GitPeer(root, env)
        self.peer.start()
        start = time.perf_counter()
        self.work = self.peer.create("space", entries)
        self.build_s = time.perf_counter() - start
        # a partial clone asks the server to filter blobs out; upload-pack refuses unless told
        self.peer.git("config", "uploadpack.allowFilter", "true",
                      cwd=self.peer.base / "space.git")
        self.root = root

    def clone(self, name: str, sparse: bool, expect: int) -> tuple[Path, dict[str, Any]]:
        dest = self.root / f"clone-{name}"
        url = self.peer.url("space")
        if sparse:
            steps = [self.peer.git("clone", "-q", "--filter=blob:none", "--sparse", url,
                                   str(dest)),
                     self.peer.git("sparse-checkout", "set", FOLDER, cwd=dest)]
        else:
            steps = [self.peer.git("clone", "-q", url, str(dest))]
        in_folder = _count(dest / FOLDER)
        if in_folder != expect:
            raise Unavailable(f"git {name}: {in_folder} of {expect} folder files")
        return dest, {"seconds": sum(s.seconds for s in steps), "files": _count(dest),
                      "steps_s": [round(s.seconds, 3) for s in steps],
                      "peak_rss_mb": round(max(s.peak_rss_mb for s in steps), 1)}

    def close(self) -> None:
        self.peer.stop()


def _changed_in(vault: Path, changed: list[dict[str, Any]], round_: int) -> None:
    probe = corpus_mod.vault_path(vault, changed[0]["id"])
    if f"Edited in round {round_}." not in probe.read_text("utf-8"):
        raise Unavailable(f"the change did not reach {vault.name} after one sync")


def _median(xs: list[float]) -> float:
    return round(statistics.median(xs), 3)


def run(root: Path, entries_n: int, rounds: int, profile: Path | None = None
        ) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("QUIRE_HOME", None)
    env.setdefault("QUIRE_HUB_ACCESS_TTL", str(6 * 3600))
    entries, folder = scoped_corpus(entries_n)
    res: dict[str, Any] = {"entries": len(entries), "folder": FOLDER, "in_folder": len(folder),
                           "corpus": corpus_mod.digest(entries), "rounds": rounds}
    log(f"{len(entries)} entries, {len(folder)} in {FOLDER}")
    quire = QuireSide(root / "quire", env)
    git = None
    try:
        res["quire_load_s"] = round(quire.load(entries), 1)
        log(f"quire space loaded in {res['quire_load_s']} s")
        git = GitSide(root / "git", env, entries)
        res["git_build_s"] = round(git.build_s, 1)
        log(f"git repository built in {res['git_build_s']} s")
        clones: dict[str, list[dict[str, Any]]] = {k: [] for k in
                                                  ("quire_full", "quire_partial",
                                                   "git_full", "git_sparse")}
        quire_replicas: dict[str, Member] = {}
        git_clones: dict[str, Path] = {}
        for r in range(rounds):  # alternating: the load moves under both sides alike
            for kind, only in (("partial", [GLOB]), ("full", [])):
                member, doc = quire.clone(f"{kind}{r}", only, len(folder))
                clones[f"quire_{kind}"].append(doc)
                quire_replicas.setdefault(kind, member)
                log(f"quire {kind} clone: {doc['seconds']:.2f} s, {doc['files']} files")
            for kind, sparse in (("sparse", True), ("full", False)):
                dest, doc = git.clone(f"{kind}{r}", sparse, len(folder))
                clones[f"git_{kind}"].append(doc)
                git_clones.setdefault(kind, dest)
                log(f"git {kind} clone: {doc['seconds']:.2f} s, {doc['files']} files")
        syncs: dict[str, list[float]] = {k: [] for k in
                                         ("quire_full", "quire_partial", "git_full", "git_sparse")}
        assert quire.pub is not None
        for r in range(1, rounds + 2):  # the first clone of each kind syncs every round
            changed = corpus_mod.edited(folder, 10, r)
            quire.pub.publish(changed)
            order = ("partial", "full") if r % 2 else ("full", "partial")
            for kind in order:
                member = quire_replicas[kind]
                syncs[f"quire_{kind}"].append(member.sync().seconds)
                _changed_in(member.home.parent / f"vault-{member.name}", changed, r)
            git.peer.change_and_push(git.work, changed)
            for kind in ("sparse", "full") if r % 2 else ("full", "sparse"):
                syncs[f"git_{kind}"].append(git.peer.pull(git_clones[kind]).seconds)
                _changed_in(git_clones[kind], changed, r)
            log(f"sync round {r}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in syncs.items()))
        res["clone_s"] = {k: _median([d["seconds"] for d in v]) for k, v in clones.items()}
        res["clone_runs"] = clones
        res["sync10_s"] = {k: _median(v) for k, v in syncs.items()}
        res["sync10_runs_s"] = {k: [round(x, 3) for x in v] for k, v in syncs.items()}
        c, s = res["clone_s"], res["sync10_s"]
        res["ratios"] = {
            "quire_partial_clone_vs_full": round(c["quire_partial"] / c["quire_full"], 4),
            "git_sparse_clone_vs_full": round(c["git_sparse"] / c["git_full"], 4),
            "quire_partial_sync_vs_full": round(s["quire_partial"] / s["quire_full"], 3),
            "git_sparse_pull_vs_full": round(s["git_sparse"] / s["git_full"], 3),
        }
        res["goals"] = {
            "partial clone <= 0.05 x full clone":
                res["ratios"]["quire_partial_clone_vs_full"] <= 0.05,
            "partial sync of 10 <= full sync of 10":
                res["ratios"]["quire_partial_sync_vs_full"] <= 1.0,
        }
        # the hub's share: the same snapshots streamed by a protocol client, no replica
        res["hub_snapshot_s"] = {
            "full": round(min(quire.snapshot_s([]) for _ in range(2)), 3),
            "partial": round(min(quire.snapshot_s([GLOB]) for _ in range(2)), 3)}
        if profile is not None:
            profile.mkdir(parents=True, exist_ok=True)
            res["profile"] = quire.profile_join(profile)
    finally:
        quire.close()
        if git is not None:
            git.close()
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.partial", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--entries", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--fs", default="journal", help="journal, tmp or a folder (bench/workfs.py)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--profile", type=Path, default=None,
                   help="also profile one partial join + sync (cProfile) into this folder")
    args = p.parse_args(argv)
    load0 = [round(x, 2) for x in os.getloadavg()]
    started = time.time()
    with workfs.work_folder(args.fs, "quire-bench-partial-") as (root, fs):
        res = run(root, args.entries, args.rounds, args.profile)
    res.update(load_avg=[load0, [round(x, 2) for x in os.getloadavg()]], filesystem=fs,
               cores=os.cpu_count(), elapsed_s=round(time.time() - started, 1),
               started_at=time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(started)))
    print(json.dumps(res, indent=2))
    if args.out:
        args.out.write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
