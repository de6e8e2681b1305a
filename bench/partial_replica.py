"""What a partial replica costs against a full one (docs/replica.md, "Scoped and partial
replicas"; decisions.md D149): the clone of one folder (1 % of the space) against the clone
of the whole space, and a sync that brings 10 changes inside that folder on each, side by
side with git's partial clone of the same folder (``git clone --filter=blob:none --sparse``
then ``git sparse-checkout set``, and a ``git pull`` of the same 10 changes).

    python -m bench.partial_replica [--entries N] [--rounds N] [--out FILE]

The space: ``--entries`` entries in 100 folders (``projects/pK/eI``), published in batches
of 500 through the real hub application in-process on SQLite (tests/kit/inproc.py); the
partial replica's glob is ``projects/p7/*``. Each round clones a full and a partial replica
(alternating which goes first) into fresh folders, then publishes 10 changes in the folder
and times each replica's sync. Medians over rounds; the ratios are what to compare on a
shared machine. The git side is the same files in one commit, served over ``file://`` with
``uploadpack.allowFilter``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.space_log import emit
from replica.trust.scoped import ONLY
from shared.entry import Entry
from shared.ids import new_id
from shared.wire import Op, build_batch

FOLDERS = 100
FOLDER = "projects/p7"


def _ids(n: int) -> list[str]:
    per = max(1, n // FOLDERS)
    return [f"projects/p{k}/e{i}" for k in range(FOLDERS) for i in range(per)]


def _publish(dev: Any, space_id: str, entries: list[Entry]) -> None:
    with dev.client() as c:
        replica_id = c.register_replica(space_id, "bulk")
        for lo in range(0, len(entries), 500):
            h = c.head(space_id)
            ops = [Op(e, None if e.id not in _BASES else _BASES[e.id])
                   for e in entries[lo:lo + 500]]
            c.push(space_id, build_batch(dev.key, batch_id=new_id(), replica_id=replica_id,
                                         space=space_id, epoch=h["epoch"], parent_seq=h["seq"],
                                         parent_digest=h["digest"], ops=ops))
            for e in entries[lo:lo + 500]:
                _BASES[e.id] = e.version


_BASES: dict[str, str] = {}


def _entry(eid: str, rev: int = 0) -> Entry:
    return Entry(id=eid, title=eid.rsplit("/", 1)[1], body=f"{eid} rev {rev}\n" * 20)


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "gc.auto=0", "-c", "maintenance.auto=false", *args],
                   cwd=cwd, check=True, capture_output=True)


def _git_side(ids: list[str], root: Path) -> dict[str, float]:
    """git: the same files, a partial clone of the folder and a pull of 10 changes."""
    src = root / "src"
    src.mkdir()
    _git("init", "-q", "-b", "main", cwd=src)
    _git("config", "uploadpack.allowFilter", "true", cwd=src)
    _git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=src)
    for eid in ids:
        p = src / f"{eid}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(_entry(eid).body)
    _git("add", "-A", cwd=src)
    _git("-c", "user.name=b", "-c", "user.email=b@x", "commit", "-qm", "all", cwd=src)
    full = _timed(lambda: _git("clone", "-q", f"file://{src}", str(root / "full"), cwd=root))

    def sparse() -> None:
        _git("clone", "-q", "--filter=blob:none", "--sparse", f"file://{src}",
             str(root / "part"), cwd=root)
        _git("sparse-checkout", "set", FOLDER, cwd=root / "part")

    part = _timed(sparse)
    for i in range(10):
        (src / f"{FOLDER}/e{i}.md").write_text(_entry(f"{FOLDER}/e{i}", 1).body)
    _git("-c", "user.name=b", "-c", "user.email=b@x", "commit", "-qam", "ten", cwd=src)
    pull_full = _timed(lambda: _git("pull", "-q", "--ff-only", cwd=root / "full"))
    pull_part = _timed(lambda: _git("pull", "-q", "--ff-only", cwd=root / "part"))
    return {"git_full_clone_s": full, "git_sparse_clone_s": part,
            "git_full_pull_10_s": pull_full, "git_sparse_pull_10_s": pull_part}


def main(argv: list[str] | None = None) -> int:
    from tests.kit.inproc import InprocHub

    p = argparse.ArgumentParser(prog="python -m bench.partial_replica", description=__doc__)
    p.add_argument("--entries", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    ids = _ids(args.entries)
    hub = InprocHub()
    t: dict[str, list[float]] = {k: [] for k in ("full_clone", "partial_clone", "full_sync",
                                                 "partial_sync")}
    try:
        for r in range(args.rounds):
            _BASES.clear()
            space = hub.space()
            dev = space.device("bulk")
            _publish(dev, space.id, [_entry(i) for i in ids])
            with tempfile.TemporaryDirectory() as d:
                full = space.replica(Path(d), "full", durable=False)
                part = space.replica(Path(d), "part", durable=False)
                part.store.set_meta(ONLY, [f"{FOLDER}/*"])
                order = (("full", full), ("partial", part))
                for name, rep in (order if r % 2 == 0 else order[::-1]):
                    t[f"{name}_clone"].append(_timed(rep.sync))
                _publish(dev, space.id, [_entry(f"{FOLDER}/e{i}", 1) for i in range(10)])
                for name, rep in (order if r % 2 == 0 else order[::-1]):
                    t[f"{name}_sync"].append(_timed(rep.sync))
                held = len(part.store.states())
                full.close()
                part.close()
            print(f"round {r + 1}: clone full {t['full_clone'][-1]:.2f} s, partial "
                  f"{t['partial_clone'][-1]:.2f} s ({held} entries); sync of 10 in scope "
                  f"full {t['full_sync'][-1]:.3f} s, partial {t['partial_sync'][-1]:.3f} s",
                  flush=True)
    finally:
        hub.close()
    res: dict[str, Any] = {k + "_s": statistics.median(v) for k, v in t.items()}
    res.update(entries=len(ids), folder=f"{FOLDER}/*", folder_entries=len(ids) // FOLDERS,
               rounds=args.rounds)
    res["partial_clone_ratio"] = res["partial_clone_s"] / res["full_clone_s"]
    res["partial_sync_ratio"] = res["partial_sync_s"] / res["full_sync_s"]
    if shutil.which("git"):
        # (git may still write in .git after a command returns: cleanup errors ignored)
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as d:
            res.update(_git_side(ids, Path(d)))
        res["git_sparse_clone_ratio"] = res["git_sparse_clone_s"] / res["git_full_clone_s"]
    return emit(res, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
