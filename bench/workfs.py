"""The file system a benchmark run writes its vaults, clones and databases on.

    with work_folder("journal") as (root, fs):   # a fresh journaled ext4 (loop mount)
        ...                                        # fs: what it is, for the JSON report

Why (bench/profiles.md, "The bench's file system"): the root file system of the bench VM is
ext4 *without a journal*. There ext4 checks every free inode it considers for a recent
deletion (``recently_deleted``), so creating files shortly after many were deleted costs
0.5–1 ms each instead of ~20 µs, and whichever system creates files first after a deletion
pays for it: clone figures moved 3× with the order of the scenarios, not with the code. A
fresh journaled ext4 image, the default of ``mkfs.ext4`` and of the file systems users run,
puts every system on the same, ordinary file system, created for the run and gone after it.

``kind``: ``journal`` (that image; needs root, ``mkfs.ext4`` and loop devices, else it falls
back to ``tmp`` and says why), ``tmp`` (a folder under ``$TMPDIR``, as before), or a path
(an existing folder, e.g. another disk).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

IMAGE_GB = 24  # sparse: only what the run writes takes disk space (a full run: ~6 GB)


def _run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)


def _mount_journaled(base: Path) -> tuple[Path, Path]:
    """A fresh ext4 (with its journal) in a sparse image under ``base``, loop-mounted."""
    image = base / "fs.img"
    mnt = base / "mnt"
    mnt.mkdir()
    with open(image, "wb") as f:
        f.truncate(IMAGE_GB << 30)
    _run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=1,lazy_journal_init=1",
          str(image)])
    _run(["mount", "-o", "loop", str(image), str(mnt)])
    return image, mnt


def _describe(path: Path) -> dict[str, Any]:
    """Device, type and options of the file system holding ``path`` (/proc/self/mounts)."""
    best: tuple[int, dict[str, Any]] = (-1, {})
    real = os.path.realpath(path)
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            dev, mnt, typ, opts = line.split()[:4]
            if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) > best[0]:
                best = (len(mnt), {"device": dev, "mount": mnt, "type": typ, "options": opts})
    except OSError:
        pass
    info = best[1]
    if info.get("type") == "ext4":
        task = Path(f"/sys/fs/ext4/{os.path.basename(info['device'])}/journal_task")
        try:
            info["journal"] = task.read_text().strip() not in ("", "<none>")
        except OSError:
            pass
    return info


@contextmanager
def work_folder(kind: str, prefix: str) -> Iterator[tuple[Path, dict[str, Any]]]:
    """(an empty folder for the run, what file system it is on); everything is removed at
    the end unless ``QUIRE_BENCH_KEEP`` is set."""
    keep = bool(os.environ.get("QUIRE_BENCH_KEEP"))
    base = Path(tempfile.mkdtemp(prefix=prefix))
    image = mnt = None
    why = ""
    if kind == "journal":
        try:
            image, mnt = _mount_journaled(base)
        except (OSError, subprocess.SubprocessError) as e:
            why = f"no journaled ext4 image ({type(e).__name__}: {str(e)[:120]}); fell back to tmp"
            kind = "tmp"
    elif kind not in ("tmp", ""):
        base_given = Path(kind)
        shutil.rmtree(base)
        base = Path(tempfile.mkdtemp(prefix=prefix, dir=base_given))
        kind = "path"
    root = (mnt / "run") if mnt is not None else base
    root.mkdir(exist_ok=True)
    fs = dict(_describe(root), kind=kind, path=str(root))
    if why:
        fs["note"] = why
    try:
        yield root, fs
    finally:
        if not keep:
            if mnt is not None:
                try:
                    _run(["umount", str(mnt)])
                except (OSError, subprocess.SubprocessError):
                    _run(["umount", "-l", str(mnt)])
            shutil.rmtree(base, ignore_errors=True)
