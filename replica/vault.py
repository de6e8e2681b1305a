"""The vault: a folder of Markdown files, ``<vault>/<kind>/<slug>.md`` (DESIGN §2).

Reading: ``scan`` walks the folder and returns every entry file with its stat, plus the
problems it found (path, line, reason) for files that cannot be entries: a file outside a
``<kind>/`` folder, an invalid slug, a symlink, a non-UTF-8 file, broken front matter.
Problem files are never published and never overwritten.

Writing: ``write_atomic`` writes a temp file next to the target, fsyncs it and renames it
over the target, so a crash leaves either the old or the new file, never half of one.
Nothing here writes through a symlink or outside the vault.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.entry import Entry, EntryError, parse_markdown, to_markdown
from shared.ids import entry_id_problem

TMP_SUFFIX = ".quire-tmp"
FSYNC = True  # tests of pure logic may turn it off for speed; never in production


@dataclass(frozen=True)
class Problem:
    path: str  # relative to the vault, with '/'
    line: int | None
    reason: str
    entry_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "reason": self.reason,
                "entry": self.entry_id}


@dataclass(frozen=True)
class FileStat:
    entry_id: str
    path: Path
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Scan:
    files: dict[str, FileStat]
    problems: list[Problem]

    def problem_ids(self) -> set[str]:
        return {p.entry_id for p in self.problems if p.entry_id}


def file_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def entry_path(vault: Path, entry_id: str) -> Path:
    problem = entry_id_problem(entry_id)
    if problem:
        raise ValueError(f"invalid entry id {entry_id!r}: {problem}")
    kind, _, slug = entry_id.partition("/")
    return vault.joinpath(kind, *slug.split("/")).with_name(slug.split("/")[-1] + ".md")


def path_entry_id(rel: str) -> tuple[str | None, str | None]:
    """(entry id, None) for a relative vault path, or (None, reason)."""
    parts = rel.split("/")
    if len(parts) < 2:
        return None, "file outside a '<kind>/' folder"
    if not rel.endswith(".md"):
        return None, "not a Markdown file (entries end in .md)"
    entry_id = rel[: -len(".md")]
    problem = entry_id_problem(entry_id)
    if problem:
        return None, f"invalid entry id {entry_id!r}: {problem}"
    return entry_id, None


def _ignored(name: str) -> bool:
    # hidden files (editor swap files, .DS_Store, .git) and our own temp files
    return name.startswith(".") or name.endswith(TMP_SUFFIX) or name.endswith("~")


def scan(vault: Path) -> Scan:
    """Every entry file in the vault, and every file that cannot be one."""
    files: dict[str, FileStat] = {}
    problems: list[Problem] = []
    if not vault.is_dir():
        return Scan(files, problems)
    root = vault.resolve()
    for dirpath, dirnames, filenames in os.walk(vault, followlinks=False):
        here = Path(dirpath)
        for d in list(dirnames):
            p = here / d
            if _ignored(d):
                dirnames.remove(d)
            elif p.is_symlink():
                dirnames.remove(d)
                problems.append(Problem(_rel(vault, p), None, _symlink_reason(root, p)))
        for name in filenames:
            if _ignored(name):
                continue
            p = here / name
            rel = _rel(vault, p)
            entry_id, reason = path_entry_id(rel)
            if p.is_symlink():
                problems.append(Problem(rel, None, _symlink_reason(root, p), entry_id))
                continue
            if reason:
                problems.append(Problem(rel, None, reason))
                continue
            assert entry_id is not None
            st = p.stat()
            files[entry_id] = FileStat(entry_id, p, st.st_size, st.st_mtime_ns)
    problems.sort(key=lambda pr: pr.path)
    return Scan(files, problems)


def _rel(vault: Path, p: Path) -> str:
    return p.relative_to(vault).as_posix()


def _symlink_reason(root: Path, p: Path) -> str:
    target = p.resolve()
    if target != root and root not in target.parents:
        return "symlink pointing out of the vault (not followed)"
    return "symlink (not followed; entries must be regular files)"


def read_entry(vault: Path, entry_id: str, data: bytes) -> tuple[Entry, dict[str, Any]]:
    """Parse file bytes as ``entry_id``; raises ``EntryError`` with a line number."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise EntryError("file is not valid UTF-8", line=line) from e
    return parse_markdown(entry_id, text)


def render(entry: Entry, local: dict[str, Any] | None = None) -> bytes:
    return to_markdown(entry, local).encode("utf-8")


def _safe_target(vault: Path, path: Path) -> None:
    """Refuse a target that is a symlink or whose nearest existing folder is outside."""
    root = vault.resolve()
    if path.is_symlink():
        raise OSError(f"refusing to write through symlink {path}")
    d = path.parent
    while not d.exists() and d != d.parent:
        d = d.parent
    resolved = d.resolve()
    if resolved != root and root not in resolved.parents:
        raise OSError(f"refusing to write outside the vault: {path}")


def write_atomic(vault: Path, path: Path, data: bytes,
                 crash_hook: Any = None) -> None:
    """Temp file + fsync + rename; the folder is fsynced so the rename survives a crash."""
    _safe_target(vault, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        if FSYNC:
            os.fsync(f.fileno())
    if crash_hook is not None:
        crash_hook()
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def remove(vault: Path, path: Path) -> None:
    _safe_target(vault, path)
    try:
        path.unlink()
    except FileNotFoundError:
        return
    _fsync_dir(path.parent)
    # tidy empty folders left behind by nested slugs, never the vault itself or a kind folder
    d = path.parent
    while d != vault and d.parent != vault:
        try:
            d.rmdir()
        except OSError:
            break
        d = d.parent


def _fsync_dir(d: Path) -> None:
    if not FSYNC:
        return
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
