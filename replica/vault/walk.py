"""What changed in the vault since the store recorded its files: the size-and-mtime walk a
sync and a status begin with (docs/replica.md, "Vault"), and the same walk run ahead in a
forked child.

    quire sync (this process)                    walker (forked child)
    take the space lock
    Prefetch.start(vault) ──────── fork ───────► walk: one scandir a folder, one lstat a
    import the sync engine, open the store          file (by the folder's descriptor)
    and the hub client, replay journaled        marshal (id, size, mtime) tuples and the
    vault writes, read the store's file index      problems into the pipe; _exit
    Prefetch.take() ◄────────── pipe ──────────
    scan_changes(vault, recorded, walked)  →  Changes: changed, missing, problems

Why a child: at 100,000 entries the walk is ~0.4 s on the bench VM, 70 % of it system
calls, and it was most of a sync with nothing to do. Run ahead in another process it
overlaps with the ~0.3 s this process spends getting ready, on the other core; a thread
would not do (each of the 100,000 system calls would wait for the GIL the imports hold),
and two walking threads measured slower than one (bench/profiles.md).

A walk taken from a child is what this process would have walked itself a moment earlier,
under the same lock; the only writer of the vault in between is this process (replayed
journaled writes, which change their files' stat: such a file compares as changed and is
re-read, its hash matches, nothing is published). Every "missing" file is looked at again
before it counts (``confirm_missing``): a file is taken for a person's delete only when it
is absent now. Anything wrong with the child (no fork, a crash, a short or bad reply) makes
the caller walk as before.
"""

from __future__ import annotations

import gc
import marshal
import os
import stat as stat_mod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replica.vault.files import FileStat, symlink_reason
from replica.vault.forked import die_with_parent, fork
from replica.vault.markdown import Problem, attachment_entry_id, ignored, path_entry_id

Walked = tuple[set[tuple[str, int, int]], list[Problem]]
_TOP_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
_DIR_FLAGS = _TOP_FLAGS | getattr(os, "O_NOFOLLOW", 0)  # below it, links are problems
_HELD = 64  # levels of folders the walk holds open (a deeper tree would exhaust ulimit -n)


@dataclass(frozen=True)
class Changes:
    """What a vault scan found against the store's record of the files (``scan_changes``)."""
    changed: list[FileStat]  # files whose stat differs from the record, or with no record
    missing: set[str]  # entries with a recorded file that is not there any more
    problems: list[Problem]

    def problem_ids(self) -> set[str]:
        return {p.entry_id for p in self.problems if p.entry_id}


def scan_changes(vault: Path, recorded: list[tuple[str, int | None, int | None]],
                 walked: Walked | None = None, under: str = "") -> Changes:
    """The vault files that changed since the store recorded them, by (size, mtime) alone.

    ``recorded``: (entry id, size, mtime) of every entry with a recorded file (an unknown
    stat is None, so that file counts as changed). ``walked``: a ``walk`` of this vault
    already made (``Prefetch.take``), else it is walked here. An ordinary Markdown file
    costs one tuple in a set, and the comparison is a set difference in C: a sync with
    nothing to do, mostly this, does no Python work per file beyond its stat. ``under``:
    walk that one folder only (relative, '/'-separated; a watcher's journal named it,
    replica/vault/journal_scan.py), with ``recorded`` the entries under it."""
    enabled = gc.isenabled()
    gc.disable()  # the walk makes a tuple a file and nothing cyclic (collections would
    try:  # traverse every one again and again)
        if walked is None:
            walked = walk(vault, under)
        return _compare(vault, recorded, *walked)
    finally:
        if enabled:
            gc.enable()


def walk(vault: Path, under: str = "") -> Walked:
    """(entry id, size, mtime) of every ``*.md`` file under a ``<kind>/`` folder of the
    vault, and the problems of everything else there (links, other files, unreadable
    folders). Folders are opened relative to their parent's descriptor, and files stat-ed
    by name within their folder: one path component a lookup, not the whole path.

    Depth first, one open descriptor a level of the folder being read, never one a folder
    waiting to be read (a folder with more subfolders than ``ulimit -n`` would leave the
    rest unread, on every walk, and their edits unseen), and none below ``_HELD`` levels
    (opened by path there, as far as ``PATH_MAX`` allows). Every descriptor is closed
    whatever happens. ``under``: that folder of the vault alone (which the caller found
    to be a folder, not a link: ``FileNotFoundError``/``NotADirectoryError`` when it no
    longer is, for the caller to walk the whole vault instead)."""
    problems: list[Problem] = []
    walked: set[tuple[str, int, int]] = set()
    base = os.fspath(vault)
    prefix = under + "/" if under else ""
    start = os.path.join(base, under) if under else base
    try:  # the vault itself may be a link to a folder (a person's choice): followed
        top = os.open(start, _DIR_FLAGS if under else _TOP_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        if under:
            raise
        return walked, problems  # no vault: every recorded file is missing
    root = vault.resolve()
    # (descriptor or -1, "kind/sub/", path, names of its subfolders still to walk)
    stack: list[tuple[int, str, str, list[str]]] = []
    try:
        try:
            first = _read_folder(top, prefix, start, root, walked, problems)
        except BaseException:
            os.close(top)
            raise
        stack.append((top, prefix, start, first))
        while stack:
            fd, prefix, folder, subfolders = stack[-1]
            if not subfolders:
                stack.pop()
                if fd >= 0:
                    os.close(fd)
                continue
            name = subfolders.pop()
            rel, path = prefix + name, os.path.join(folder, name)
            try:  # below _HELD levels by path (the folders above it were no links)
                sub = os.open(name, _DIR_FLAGS, dir_fd=fd) if fd >= 0 else \
                    os.open(path, _DIR_FLAGS)
            except OSError as e:
                problems.append(Problem(rel, None, f"folder cannot be read: {e.strerror or e}"))
                continue
            try:
                more = _read_folder(sub, rel + "/", path, root, walked, problems)
            except BaseException:
                os.close(sub)
                raise
            if len(stack) >= _HELD:
                os.close(sub)
                sub = -1
            stack.append((sub, rel + "/", path, more))
    finally:
        for fd, *_ in stack:
            if fd >= 0:
                os.close(fd)
    return walked, problems


def _read_folder(fd: int, prefix: str, folder: str, root: Path,
                 walked: set[tuple[str, int, int]], problems: list[Problem]) -> list[str]:
    """One folder of ``walk``: its entry files into ``walked``, everything else into
    ``problems``; the names of its subfolders are returned (not opened here)."""
    try:
        with os.scandir(fd) as it:
            entries = list(it)
    except OSError as e:  # unreadable: its entries are problems, nothing else is
        problems.append(Problem(prefix.rstrip("/") or ".", None,
                                f"folder cannot be read: {e.strerror or e}"))
        return []
    plain = [de for de in entries if de.name.endswith(".md") and de.name[0] != "."
             and de.is_file(follow_symlinks=False)]
    try:
        walked.update([(prefix + de.name[:-3], st.st_size, st.st_mtime_ns)
                       for de in plain for st in (de.stat(follow_symlinks=False),)])
    except OSError:  # rare: one at a time (a file deleted since the listing is absent, and
        for de in plain:  # confirm_missing decides; a stat refused makes the folder a
            try:  # problem, so that nothing under it is taken for a delete)
                st = de.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            except OSError as e:
                problems.append(Problem(prefix.rstrip("/") or ".", None,
                                        f"folder cannot be read: {e.strerror or e}"))
                break
            walked.add((prefix + de.name[:-3], st.st_size, st.st_mtime_ns))
    subfolders: list[str] = []
    if len(plain) == len(entries):
        return subfolders
    names = {de.name for de in plain}
    for de in entries:
        name = de.name
        if de.is_file(follow_symlinks=False) and name.endswith(".md") and name[0] != ".":
            continue  # taken above
        if ignored(name):
            continue
        rel = prefix + name
        if de.is_symlink():
            path = os.path.join(folder, name)
            entry_id = None if os.path.isdir(path) else path_entry_id(rel)[0]
            problems.append(Problem(rel, None, symlink_reason(root, Path(path)), entry_id))
            continue
        if de.is_dir(follow_symlinks=False):
            subfolders.append(name)
            continue
        reason = attachment_problem(name, rel, de, names)
        if reason is None:  # any other regular file: an attachment, its id the path (D147)
            try:
                st = de.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            walked.add((rel, st.st_size, st.st_mtime_ns))
            continue
        problems.append(Problem(rel, None, reason))
    return subfolders


def attachment_problem(name: str, rel: str, de: Any, names: set[str] | None) -> str | None:
    """Why a file that is not Markdown cannot be an attachment (None: it is one): not a
    regular file, a name that is no entry id, or a Markdown file of the same id beside it
    (``x.png`` and ``x.png.md``: the Markdown file is the entry)."""
    if not de.is_file(follow_symlinks=False):
        return "not a regular file"
    entry_id, reason = attachment_entry_id(rel)
    if entry_id is None:
        return reason
    if names is not None and name + ".md" in names:
        return (f"{name!r} and {name + '.md'!r} would be one entry ({rel}): rename the "
                "attachment")
    return None


def _compare(vault: Path, recorded: list[tuple[str, int | None, int | None]],
             walked: set[tuple[str, int, int]], walk_problems: list[Problem]) -> Changes:
    problems = list(walk_problems)
    recorded_set = set(recorded)
    known = {r[0] for r in recorded}
    changed: list[FileStat] = []
    base = os.fspath(vault)
    for entry_id, size, mtime in walked - recorded_set:
        path = os.path.join(base, entry_id + ".md")
        if not os.path.isfile(path):  # no Markdown file of this id: the walk saw an
            path = os.path.join(base, entry_id)  # attachment (attachment_problem)
        elif entry_id not in known:
            reason = path_entry_id(entry_id + ".md")[1]
            if reason:
                problems.append(Problem(entry_id + ".md", None, reason))
                continue
        changed.append(FileStat(entry_id, path, size, mtime))
    missing = confirm_missing(vault, known - {w[0] for w in walked})
    problems.sort(key=lambda pr: pr.path)
    changed.sort()
    return Changes(changed, missing, problems)


def confirm_missing(vault: Path, missing: set[str]) -> set[str]:
    """The entries of ``missing`` whose file is absent now, looked at as the walk looks: by
    folder descriptor, links not followed. Absent: no such file or folder on the way, or a
    folder or other non-file in its place (as the walk finds it). Not absent: a regular
    file, or a link in its place or on the way (the walk would report the link and hold the
    entries behind it: a walk run ahead of such a change must not publish their deletes),
    or anything that cannot be looked at (never take a permission error for a delete)."""
    return {entry_id for entry_id in missing if _absent(vault, entry_id)}


def _absent(vault: Path, entry_id: str) -> bool:
    """Neither the Markdown file of ``entry_id`` nor an attachment of that name is there."""
    return _absent_file(vault, entry_id + ".md") and _absent_file(vault, entry_id)


def _absent_file(vault: Path, rel: str) -> bool:
    *folders, name = rel.split("/")
    try:
        fd = os.open(os.fspath(vault), _TOP_FLAGS)  # the vault itself may be a link
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    try:
        for folder in folders:
            try:
                sub = os.open(folder, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                return True
            except OSError:  # a link (ELOOP), a file in its place, no permission
                return False
            os.close(fd)
            fd = sub
        try:
            st = os.lstat(name, dir_fd=fd)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return not (stat_mod.S_ISREG(st.st_mode) or stat_mod.S_ISLNK(st.st_mode))
    finally:
        os.close(fd)


# ---------------------------------------------------------------- the walk run ahead


class Prefetch:
    """A ``walk`` of one vault in a forked child; ``take`` waits for it (None: walk here)."""

    def __init__(self, vault: Path, pid: int, fd: int):
        self.vault, self._pid, self._fd = vault, pid, fd

    @classmethod
    def start(cls, vault: Path) -> Prefetch | None:
        """Fork the walker, or None where that cannot be done (the caller walks itself)."""
        if not hasattr(os, "fork") or not os.path.isdir(vault):
            return None
        try:
            r, w = os.pipe()
        except OSError:
            return None
        parent = os.getpid()
        try:
            pid = fork()
        except OSError:
            os.close(r)
            os.close(w)
            return None
        if pid == 0:  # the child: walk, answer, and leave without running anything else
            code = 1
            try:
                os.close(r)
                die_with_parent(parent)
                gc.disable()
                walked, problems = walk(vault)
                data = marshal.dumps((list(walked), [(p.path, p.line, p.reason, p.entry_id)
                                                     for p in problems]))
                view = memoryview(len(data).to_bytes(8, "big") + data)
                while view:
                    view = view[os.write(w, view):]
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        return cls(vault, pid, r)

    def take(self) -> Walked | None:
        """The child's walk, or None (it failed: walk here instead)."""
        if self._fd < 0:
            return None
        try:
            chunks = []
            while True:
                chunk = os.read(self._fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
            raw = b"".join(chunks)
            size = int.from_bytes(raw[:8], "big")
            if len(raw) < 9 or len(raw) != size + 8:
                return None
            walked, problems = marshal.loads(raw[8:])
            return set(map(tuple, walked)), [Problem(*p) for p in problems]
        except (OSError, ValueError, EOFError, TypeError):
            return None
        finally:
            self.close()

    def close(self) -> None:
        """Stop the child if it still runs and reap it (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._pid:
            pid, self._pid = self._pid, 0
            try:
                if os.waitpid(pid, os.WNOHANG) == (0, 0):
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
            except OSError:
                pass

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
