"""A vault scan scoped by a running watcher's journal (docs/decisions.md, "Scans by the
watcher's journal"): what
``vaultscan.scan_changes`` would find, looking only where the watcher saw something change.

    journal (replica/ipc/journal.py): every path changed since scan S, and where S found problems
                │
                ▼
    regions: each path with everything under it (a folder moved out or in is one event for
             all its files); a path no walk looks at (hidden, temp files) is dropped; plus
             S's problem paths and each entry whose recorded stat is unknown (racily clean,
             or a write the person's edit skipped): a walk looks at those again every time
             (a file that does not parse is re-read and fails again; a link is judged by
             its target, which may have changed without an event of the link's own)
                │
                ▼
    each region: the entries the store records in it (one id range) against what is there
             now, as the walk would see it: a file its stat, a folder ``scan_changes``
             under it, nothing (or a parent that is no folder) every recorded entry missing
                │
                ▼
    Changes: changed, missing and problems exactly as a walk finds them (the caller adds
             the read and parse problems of the changed files, as after a walk)

Whatever it cannot vouch for (no journal, the vault root itself in it, too many paths, a
path it cannot look at) gives None: the caller walks the whole vault.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replica.store import store as st
from replica.store.db import Conn
from replica.vault import files as vlt
from replica.vault import markdown as md
from replica.vault import walk as vaultscan
from replica.vault.ignore import IgnoreRules, leave_out

MAX_PATHS = 10_000  # more changed paths than this: the whole walk costs about as much


@dataclass(frozen=True)
class Journal:
    """What a running watcher vouches for: ``paths`` (absolute) holds every vault path that
    changed since a scan, which found problems at ``problem_paths`` (relative); nothing
    else in the vault changed since, and the store recorded what that scan saw."""

    paths: list[str]
    problem_paths: list[str]

    @classmethod
    def from_json(cls, doc: Any) -> Journal | None:
        """From a watcher's journal document (``Watcher.journal``); None when it is not valid
        or does not carry its problems."""
        if not isinstance(doc, dict) or doc.get("valid") is not True:
            return None
        paths, problems = doc.get("paths"), doc.get("problem_paths")
        if not (isinstance(paths, list) and isinstance(problems, list)
                and all(isinstance(p, str) for p in paths + problems)):
            return None
        return cls(paths, problems)


def changes_txn(conn: Conn, vault: Path, journal: Journal | None,
                walked: vaultscan.Walked | None = None) -> tuple[vaultscan.Changes, str]:
    """(what a walk of the vault finds against the store, "journal" or "scan": how);
    ``walked``: the walk already made (run ahead), else a walk is made here."""
    rules = IgnoreRules.load(vault)  # before anything is read: a bad one refuses the run
    if journal is not None:
        found = scoped_txn(conn, vault, journal)
        if found is not None:
            return leave_out(rules, found), "journal"
    found = vaultscan.scan_changes(vault, st.file_index_txn(conn), walked)
    return leave_out(rules, found), "scan"


def scoped_txn(conn: Conn, vault: Path, journal: Journal) -> vaultscan.Changes | None:
    """``scan_changes`` of the whole vault, computed from the journal's paths; None: walk."""
    base = os.fspath(vault).rstrip("/")
    if len(journal.paths) > MAX_PATHS or not os.path.isdir(base):
        return None
    rels = _relative(base, journal.paths + [f"{base}/{p}" for p in journal.problem_paths])
    if rels is None:
        return None
    rels |= {r[0] + ".md" for r in conn.connection.execute(
        f"SELECT id FROM entries INDEXED BY entries_unsettled WHERE {st.UNSETTLED_WHERE}")}
    regions = {r for r in rels if not any(a in rels for a in _ancestors(r))}
    changed: list[vlt.FileStat] = []
    missing: set[str] = set()
    problems: list[md.Problem] = []
    root = vault.resolve()
    folders: dict[str, bool] = {}
    try:
        for r in sorted(regions):
            rows = _recorded_txn(conn, r)
            path = f"{base}/{r}"
            found_stat = _lstat(path) if _reachable(base, r, folders) else None
            if found_stat is not None and stat.S_ISDIR(found_stat.st_mode):
                found = vaultscan.scan_changes(vault, rows, under=r)
                changed += found.changed
                missing |= found.missing
                problems += found.problems
                continue
            seen = _one(r, path, found_stat, {x[0]: x for x in rows}, root, changed, problems)
            missing |= {x[0] for x in rows} - seen
    except (PermissionError, FileNotFoundError, NotADirectoryError):
        return None  # a region changed under us or cannot be read: the walk decides
    problems.sort(key=lambda p: p.path)
    changed.sort()
    # missing as the walk decides it: only what is absent now, links on the way not followed
    return vaultscan.Changes(changed, vaultscan.confirm_missing(vault, missing), problems)


def _relative(base: str, paths: list[str]) -> set[str] | None:
    out = set()
    for p in paths:
        if not p.startswith(base + "/"):
            return None  # the vault itself (moved, replaced) or a path we cannot place
        rel = p[len(base) + 1:].rstrip("/")
        parts = rel.split("/")
        if not rel or any(x in ("", ".", "..") for x in parts):
            return None
        if all(walked(x) for x in parts):
            out.add(rel)
    return out


def walked(name: str) -> bool:
    """Does a walk look at a file or folder of this name (``vaultscan.walk``'s own rule)?"""
    return (name.endswith(".md") and name[0] != ".") or not md.ignored(name)


def _ancestors(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _reachable(base: str, rel: str, folders: dict[str, bool]) -> bool:
    """Does a walk get to ``rel``: is every folder above it a real folder (not a link)?"""
    for a in _ancestors(rel):
        if a not in folders:
            s = _lstat(f"{base}/{a}")
            folders[a] = s is not None and stat.S_ISDIR(s.st_mode)
        if not folders[a]:
            return False
    return True


def _recorded_txn(conn: Conn, rel: str) -> list[tuple[str, int | None, int | None]]:
    """(id, size, mtime) of the entries with a recorded file at ``rel`` or under it."""
    sql = ("SELECT id, file_size, file_mtime_ns FROM entries INDEXED BY entries_cover"
           " WHERE file_hash IS NOT NULL AND ")
    rows = [tuple(r) for r in conn.connection.execute(
        sql + "id >= ? AND id < ?", (rel + "/", rel + "0"))]  # '0' follows '/'
    one = rel[:-3] if rel.endswith(".md") else rel  # a Markdown file's id, or an attachment's
    rows += [tuple(r) for r in conn.connection.execute(sql + "id = ?", (one,))]
    return rows


def _one(rel: str, path: str, s: os.stat_result | None,
         known: dict[str, tuple[str, int | None, int | None]], root: Path,
         changed: list[vlt.FileStat], problems: list[md.Problem]) -> set[str]:
    """A region that is no folder, as the walk of its folder sees it (``_scan_changes``):
    the recorded ids it shows; what changed or is a problem is appended."""
    if s is None:
        return set()
    name = rel.rsplit("/", 1)[-1]
    if stat.S_ISLNK(s.st_mode):  # (the walk's own reason: one wording for both)
        problems.append(md.Problem(rel, None, vlt.symlink_reason(root, Path(path)),
                                   None if os.path.isdir(path) else md.path_entry_id(rel)[0]))
        return set()
    if not (stat.S_ISREG(s.st_mode) and name[0] != "."):
        problems.append(md.Problem(rel, None, md.path_entry_id(rel)[1] or "not an entry file"))
        return set()
    if md.is_markdown(name):
        entry_id, reason = rel[:-3], None
    else:  # an attachment (D147), unless a Markdown file of its name is beside it
        entry_id, reason = rel, md.attachment_entry_id(rel)[1]
        if reason is None and os.path.isfile(path + ".md"):
            reason = f"{name!r} and {name + '.md'!r} would be one entry ({rel}): rename " \
                     "the attachment"
        if reason is not None:
            problems.append(md.Problem(rel, None, reason))
            return set()
    row = known.get(entry_id)
    if row is None:
        reason = md.path_entry_id(rel)[1] if md.is_markdown(name) else None
        if reason:
            problems.append(md.Problem(rel, None, reason))
            return set()
    elif (row[1], row[2]) == (s.st_size, s.st_mtime_ns):
        return {entry_id}
    changed.append(vlt.FileStat(entry_id, path, s.st_size, s.st_mtime_ns))
    return {entry_id}
