"""The vault: a folder of Markdown files, ``<vault>/<id>.md`` (any path: the id is the
path without ``.md``; docs/architecture.md, "Entries and versions"): the walks, writes and
flushes that touch it.
What a file holds and what its name means (pure) is in replica/vault/markdown.py.

Reading: ``scan`` walks the folder and returns every entry file with its stat, plus the
problems it found (path, line, reason) for files that cannot be entries: a name that is no
entry id (with a name that would do), a symlink, a non-UTF-8 file, broken front matter.
Problem files are never published and never overwritten.

Writing: ``write_atomic`` writes a temp file next to the target, fsyncs it and renames it
over the target, so a crash leaves either the old or the new file, never half of one.
Nothing here writes through a symlink or outside the vault. ``write_many`` and ``remove``
take what the caller last saw at each target (``file_key``) and leave a target alone that
changed since, checked right before its rename or unlink: a rename over a file an editor is
still writing would send the rest of that save into the unlinked file
(docs/decisions.md, "What the file showed"). ``open_for_writing`` asks the kernel whether
anyone holds a file open for writing (Linux leases).
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import threading
from collections.abc import Container, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from replica.vault.markdown import (
    TMP_SUFFIX,
    Problem,
    attachment_entry_id,
    ignored,
    path_entry_id,
)

FSYNC = True  # tests of pure logic may turn it off for speed; never in production


class FileStat(NamedTuple):  # one a file on every scan: a tuple is the cheapest object
    entry_id: str
    os_path: str
    size: int
    mtime_ns: int

    @property
    def path(self) -> Path:
        return Path(self.os_path)


@dataclass(frozen=True)
class Scan:
    files: dict[str, FileStat]
    problems: list[Problem]

    def problem_ids(self) -> set[str]:
        return {p.entry_id for p in self.problems if p.entry_id}


def scan(vault: Path, known: Container[str] = ()) -> Scan:
    """Every entry file in the vault, and every file that cannot be one.

    One ``scandir`` a folder and one ``lstat`` a file, on strings (no ``Path`` a file: a
    sync with nothing to do is mostly this). ``known``: entry ids already valid (the
    store's), whose paths need no checking again."""
    files: dict[str, FileStat] = {}
    problems: list[Problem] = []
    if not vault.is_dir():
        return Scan(files, problems)
    root = vault.resolve()
    stack = [(os.fspath(vault), "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            it = os.scandir(folder)
        except OSError as e:  # unreadable: its entries are problems, nothing else is
            problems.append(Problem(prefix.rstrip("/") or ".", None,
                                    f"folder cannot be read: {e.strerror or e}"))
            continue
        with it:
            for de in it:
                name = de.name
                if not (name.endswith(".md") and name[0] != ".") and ignored(name):
                    continue
                rel = prefix + name
                if de.is_symlink():
                    if de.is_dir():  # a link to a folder: not followed
                        problems.append(Problem(rel, None, symlink_reason(root, Path(de.path))))
                    else:
                        problems.append(Problem(rel, None, symlink_reason(root, Path(de.path)),
                                                path_entry_id(rel)[0]))
                    continue
                if de.is_dir(follow_symlinks=False):
                    stack.append((de.path, rel + "/"))
                    continue
                entry_id: str | None
                if rel.endswith(".md") and rel[:-3] in known:
                    entry_id, reason = rel[:-3], None
                elif not rel.endswith(".md") and de.is_file(follow_symlinks=False):
                    # an attachment: its id is its path (replica/vault/walk.py)
                    entry_id, reason = attachment_entry_id(rel)
                    if reason is None and os.path.isfile(de.path + ".md"):
                        entry_id, reason = None, (f"{name!r} and {name + '.md'!r} would be "
                                                  f"one entry ({rel}): rename the attachment")
                else:
                    entry_id, reason = path_entry_id(rel)
                if reason:
                    problems.append(Problem(rel, None, reason))
                    continue
                assert entry_id is not None
                st = de.stat(follow_symlinks=False)
                files[entry_id] = FileStat(entry_id, de.path, st.st_size, st.st_mtime_ns)
    problems.sort(key=lambda pr: pr.path)
    return Scan(files, problems)


def symlink_reason(root: Path, p: Path) -> str:
    target = p.resolve()
    if target != root and root not in target.parents:
        return "symlink pointing out of the vault (not followed)"
    return "symlink (not followed; entries must be regular files)"


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


FileKey = tuple[int, int, int, int]  # (inode, size, mtime, ctime): a file as last seen


def file_key(info: os.stat_result) -> FileKey:
    """What tells one state of a file from another: an editor's write moves its mtime and
    ctime (and its size, mostly), a save by rename gives another inode."""
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def key_at(path: str) -> FileKey | None:
    """``file_key`` of what is at ``path`` now (not followed); None: nothing."""
    try:
        return file_key(os.lstat(path))
    except FileNotFoundError:
        return None


_leases: bool | None = None  # None: not tried yet; False: this system refuses them


def open_for_writing(path: Path | str) -> bool | None:
    """Does any process hold ``path`` open for writing? Linux answers without a scan of
    every process: a read lease (``F_SETLEASE F_RDLCK``) is refused with ``EAGAIN`` while a
    writer has it open, and is released at once when granted. None: cannot tell (no leases
    here, not our file, or a lease break signal this thread cannot ignore). A lease break
    is signalled with SIGIO, whose default action ends the process: it is ignored first."""
    global _leases
    fcntl_mod: Any
    try:
        import fcntl as fcntl_mod
    except ImportError:  # pragma: no cover - not a Unix
        return None
    setlease = getattr(fcntl_mod, "F_SETLEASE", None)
    if setlease is None or _leases is False:
        return None
    if signal.getsignal(signal.SIGIO) is not signal.SIG_IGN:
        if threading.current_thread() is not threading.main_thread():
            return None  # only the main thread may change it (the watcher's does)
        signal.signal(signal.SIGIO, signal.SIG_IGN)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        fcntl_mod.fcntl(fd, setlease, fcntl_mod.F_RDLCK)
    except OSError as e:
        if e.errno == errno.EAGAIN:
            return True
        if e.errno in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            _leases = False  # the file system or kernel has no leases: mtime alone
        return None  # EACCES (not our file), …: cannot tell
    else:
        fcntl_mod.fcntl(fd, setlease, fcntl_mod.F_UNLCK)
        _leases = True
        return False
    finally:
        os.close(fd)


def ignore_lease_breaks() -> None:
    """In the main thread of a process whose other threads write the vault (the watcher):
    a lease ``open_for_writing`` takes may be broken by an editor opening the file, which
    the kernel signals with SIGIO; ignored, so that it never ends the process."""
    if hasattr(signal, "SIGIO") and signal.getsignal(signal.SIGIO) is signal.SIG_DFL:
        signal.signal(signal.SIGIO, signal.SIG_IGN)


def write_many(vault: Path, items: list[tuple[Any, bytes]], crash_hook: Any = None,
               *, exclusive: bool = False, mtime_ns: int | None = None,
               flush_renames: bool = True,
               expected: Mapping[str, FileKey | None] | None = None) -> list[Any]:
    """``write_atomic`` for many files at once, with the same guarantee (a crash leaves each
    file either old or new, and the renames are durable on return) for two flushes of the
    file system instead of two fsyncs a file (an fsync costs milliseconds: a clone of 100k
    files would spend minutes in them). Temp files first, flushed; then every rename,
    flushed. ``exclusive``: leave alone (and do not return) a target that exists by the
    time it would be renamed over. ``mtime_ns``: given to each file before its rename (so a
    later edit of the file always changes it). ``flush_renames=False``: the caller flushes
    the renames later (``sync_files``). ``expected``: per target (``os.fspath``), the
    ``file_key`` the caller decided on (None: no file there); a target that is no longer so
    right before its rename is left alone (its temp file removed) and not returned. Paths
    are ``Path`` objects or strings; returns those written, as given."""
    made: set[str] = set()  # folders known to be real folders inside the vault
    root = os.fspath(vault)
    todo: list[tuple[str, str, Any, bytes]] = []  # temp, target, target path, bytes
    for path, data in items:
        target = os.fspath(path)
        parent = os.path.dirname(target)
        if parent not in made:  # each folder is checked once
            ensure_folder(vault, root, parent, made)
        if not exclusive and os.path.islink(target):
            # (exclusive: an existing target, a link or not, is left alone at the rename)
            raise OSError(f"refusing to write through symlink {path}")
        todo.append((target + TMP_SUFFIX, target, path, data))
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)

    def put(item: tuple[str, str, Path, bytes]) -> None:
        fd = os.open(item[0], flags, 0o644)
        try:
            view = memoryview(item[3])
            while view:
                view = view[os.write(fd, view):]
            if mtime_ns is not None:
                os.utime(fd, ns=(mtime_ns, mtime_ns))
        finally:
            os.close(fd)

    try:
        # sequential: creates in one folder serialize on its lock in the kernel, and threads
        # measured slower (45.7 s against 30.0 s for a 100k clone)
        for item in todo:
            put(item)
        sync_files(vault, [t[0] for t in todo])
        if crash_hook is not None:
            crash_hook()
        done: list[Any] = []
        for tmp, target, path, _data in todo:
            if exclusive and os.path.lexists(target):
                os.unlink(tmp)
                continue
            if expected is not None and target in expected and (
                    key_at(target) != expected[target]):
                os.unlink(tmp)  # changed since it was checked (an editor still writing)
                continue
            os.replace(tmp, target)
            done.append(path)
        if flush_renames:
            sync_files(vault, [], dirs_of=done)
        todo = []
        return done
    finally:
        for tmp, *_rest in todo:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def ensure_folder(vault: Path, root: str, folder: str, made: set[str]) -> None:
    """Make ``folder`` exist inside the vault, creating what is missing, and add it (and
    its parents) to ``made``. A folder below the vault is taken when ``lstat`` shows a real
    folder under a parent already taken (nothing to resolve: one system call a folder);
    anything else (a symlink, the vault itself) gets ``_safe_target``'s full check, which
    refuses a folder that leads out of the vault. The vault itself, when it is a folder,
    is taken as it is: it is where it resolves to, so the check could not refuse it (it
    resolved the vault's path at every write a watcher applied)."""
    if folder in made:
        return
    parent = os.path.dirname(folder)
    if folder == root and os.path.isdir(folder):
        made.add(folder)
        return
    if folder == root or not folder.startswith(root + os.sep) or parent == folder:
        _safe_target(vault, Path(folder, "x"))
        os.makedirs(folder, exist_ok=True)
        made.add(folder)
        return
    ensure_folder(vault, root, parent, made)
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        try:
            os.mkdir(folder)
        except FileExistsError:
            pass
        mode = os.lstat(folder).st_mode
    if not stat.S_ISDIR(mode):
        _safe_target(vault, Path(folder, "x"))
    made.add(folder)


_syncfs: Any = None
SYNC_EACH_MAX = 8  # up to this many files and folders: an fsync each, not a syncfs


def sync_files(vault: Path, files: list[str], dirs_of: list[Any] | None = None) -> None:
    """Make ``files`` (and the folder entries of the paths ``dirs_of``) durable: one
    ``syncfs`` of the vault's file system where Linux has it, else an fsync of each. A few
    (a watcher applying one publication) get an fsync each: a ``syncfs`` flushes what every
    process left dirty there too (bench/profiles.md, "save to every vault")."""
    global _syncfs
    if not FSYNC:
        return
    dirs = {os.path.dirname(os.fspath(p)) for p in dirs_of or ()}
    if _syncfs is None:
        try:
            import ctypes

            _syncfs = ctypes.CDLL(None, use_errno=True).syncfs
        except (OSError, AttributeError):
            _syncfs = False
    if _syncfs and len(files) + len(dirs) > SYNC_EACH_MAX:
        fd = os.open(vault, os.O_RDONLY)
        try:
            if _syncfs(fd) == 0:
                return
        finally:
            os.close(fd)
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    for d in dirs:
        _fsync_dir(Path(d))


def remove(vault: Path, path: Path, expected: FileKey | None = None) -> bool:
    """Remove ``path`` (False: it was not there, or ``expected`` was given and the file is
    no longer what it names)."""
    _safe_target(vault, path)
    if expected is not None and key_at(os.fspath(path)) != expected:
        return False
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    _fsync_dir(path.parent)
    # tidy empty folders left behind by nested slugs, never the vault itself or a kind folder
    d = path.parent
    while d != vault and d.parent != vault:
        try:
            d.rmdir()
        except OSError:
            break
        d = d.parent
    return True


def move(vault: Path, src: Path, dst: Path, expected: FileKey) -> bool:
    """Move the file at ``src`` (still ``expected``) to ``dst``, which must not exist (a hard
    link then an unlink: never over a file); False, nothing changed, when either is not so.
    The old folder is tidied as ``remove`` does."""
    _safe_target(vault, src)
    _safe_target(vault, dst)
    if key_at(os.fspath(src)) != expected:
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:  # taken meanwhile, or a file system without hard links
        return False
    _fsync_dir(dst.parent)
    remove(vault, src)  # gone meanwhile: the move is done all the same
    return True


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
