"""Attacks on the vault walk by folder descriptor and the walk run ahead (replica/vault/walk.py):
the walk must see every entry file whatever the tree's shape and whatever happens during it,
and must never leave descriptors behind."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator
from pathlib import Path

import pytest

from replica.vault import walk as vaultscan
from shared.entry import Entry
from tests.kit.cli import CliTeam
from tests.kit.host import as_anyone, code_for_anyone
from tests.replica.vault.test_vault import write


@contextlib.contextmanager
def fd_limit(soft: int) -> Iterator[None]:
    """RLIMIT_NOFILE lowered to ``soft`` (1024: the usual Linux default; 256: macOS's), for
    this process and the processes it starts meanwhile."""
    old = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, old)


def open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")}


def wide(vault: Path, n: int) -> None:
    """``page/f<i>/e.md`` for i < n: one kind folder with n subfolders (a folder a project,
    a day, a person ...)."""
    for i in range(n):
        write(vault, f"page/f{i}/e.md", f"---\ntitle: e{i}\n---\n{i}\n")


def test_a_wide_folder_is_walked_whole_under_the_usual_fd_limit(tmp_path: Path) -> None:
    """The walk opens every subfolder of a folder when it lists it and keeps the descriptors
    until it gets to them: a folder with more subfolders than the descriptor limit leaves the
    rest "cannot be read" (EMFILE), on every walk, so their edits are never seen."""
    vault = tmp_path / "v"
    wide(vault, 1100)
    with fd_limit(1024):
        walked, problems = vaultscan.walk(vault)
    assert problems == []
    assert len(walked) == 1100


def test_the_walk_holds_few_descriptors_on_a_wide_tree(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    wide(vault, 300)
    with fd_limit(len(open_fds()) + 64):
        walked, problems = vaultscan.walk(vault)
    assert problems == [] and len(walked) == 300


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd")
def test_a_file_gone_during_the_walk_leaks_no_descriptor(tmp_path: Path,
                                                          monkeypatch) -> None:
    """A file deleted between the folder's listing and its lstat (a person deleting it while
    the walk runs): the walk must neither fail (the old walk did too) nor leave the pending
    folders' descriptors open (a ``quire watch`` or MCP server walks again and again)."""
    vault = tmp_path / "v"
    wide(vault, 50)
    write(vault, "page/x/gone.md", "x")
    real = os.scandir

    def listing_then_delete(path=None):
        it = real(path)
        entries = list(it)
        it.close()
        if any(de.name == "gone.md" for de in entries):
            (vault / "page" / "x" / "gone.md").unlink(missing_ok=True)
        return contextlib.nullcontext(iter(entries))

    monkeypatch.setattr(vaultscan.os, "scandir", listing_then_delete)
    before = open_fds()
    walked: set[tuple[str, int, int]] | None = None
    problems: list = []
    with contextlib.suppress(FileNotFoundError):
        walked, problems = vaultscan.walk(vault)
    monkeypatch.undo()
    leaked = open_fds() - before
    assert not leaked, f"{len(leaked)} descriptors left open"
    assert walked is not None, "a file deleted during the walk failed the whole walk"
    assert {w[0] for w in walked} == {f"page/f{i}/e" for i in range(50)} and problems == []


def test_a_wide_vault_syncs_every_entry_under_the_usual_fd_limit(team: CliTeam) -> None:
    """End to end, real CLI: 1100 entries one a folder, created and synced under a soft
    limit of 1024 descriptors (a login shell's usual ``ulimit -n``). Every one must be
    published, and no folder reported unreadable; else the same folders are skipped by
    every sync and their entries never go out."""
    a = team.member("a")
    for i in range(1100):
        a.write(Entry(id=f"page/f{i}/e", title=f"e{i}", body=f"{i}\n"))
    with fd_limit(1024):
        first = a.sync()
        second = a.sync()
    assert first["sync"]["pushed"] + second["sync"]["pushed"] == 1100
    assert [p["reason"] for p in first["sync"]["problems"]][:1] == []
    assert second["sync"]["problems"] == []


# ---------------------------------------------------------------- folders a person cannot read

_AS_NOBODY = r"""
import json, sys
from pathlib import Path
from replica.vault import walk as vaultscan
vault = Path(sys.argv[1])
recorded = [(e, None, None) for e in json.loads(sys.argv[2])]
out = {}
ch = vaultscan.scan_changes(vault, recorded)
out["inline"] = sorted(ch.missing), [(p.path, p.entry_id) for p in ch.problems]
walk = vaultscan.Prefetch.start(vault)
ch = vaultscan.scan_changes(vault, recorded, walk.take())
out["ahead"] = sorted(ch.missing), [(p.path, p.entry_id) for p in ch.problems]
print(json.dumps(out))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become nobody")
@pytest.mark.parametrize("mode", [0o300, 0o600, 0o000])
def test_a_folder_its_owner_cannot_list_or_search_is_no_delete(mode: int) -> None:
    """Run as an ordinary user (root reads every folder): a folder without read (0o300),
    without search (0o600: listed, every lstat refused) or without both. Its entries are
    recorded; none may come out missing (a published delete), inline or walked ahead, and
    the walk must not fail (0o600 failed the old walk with PermissionError too)."""
    import json
    import subprocess
    import tempfile

    root = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        os.chmod(root, 0o755)
        vault = root / "v"
        for rel in ("page/ok.md", "page/locked/a.md", "page/locked/deep/b.md"):
            write(vault, rel, "---\ntitle: x\n---\nx\n")
        for dirpath, dirnames, filenames in os.walk(root):
            for n in dirnames + filenames:
                os.chown(os.path.join(dirpath, n), 65534, 65534)
        os.chmod(vault / "page" / "locked", mode)
        ids = ["page/ok", "page/locked/a", "page/locked/deep/b"]
        # the walk's code copied where uid 65534 can read it: the clone may sit in a home
        # nobody else can enter
        with code_for_anyone("replica.vault.walk") as lib:
            p = subprocess.run([*as_anyone(_AS_NOBODY, lib), str(vault), json.dumps(ids)],
                               user=65534, group=65534, capture_output=True, text=True,
                               cwd=root, timeout=60)
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)
        for how in ("inline", "ahead"):
            missing, problems = out[how]
            assert missing == [], (how, missing)
            assert ["page/locked", None] in problems, (how, problems)
    finally:
        os.chmod(root / "v" / "page" / "locked", 0o755)
        import shutil

        shutil.rmtree(root)


# ---------------------------------------------------------------- the walker and the space lock

_LOCKED_WALKER = r"""
import fcntl, os, sys, time
from pathlib import Path
from replica.vault import walk as vaultscan

def stuck(vault):  # the child: says it walks, then never ends
    os.write(1, b"walking\n")
    time.sleep(3600)

vaultscan.walk = stuck
fd = os.open(sys.argv[2], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)  # as replica/machine/home.py space_lock; the child inherits it
w = vaultscan.Prefetch.start(Path(sys.argv[1]))
os.write(1, f"{w._pid}\n".encode())
time.sleep(3600)
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_a_killed_sync_leaves_no_walker_holding_the_space_lock(tmp_path: Path) -> None:
    """The space lock is a flock, shared with the forked walker (one open file description):
    if the walker outlived a ``quire sync`` killed with SIGKILL, the lock would stay held
    (every later sync: LockHeld) and a walk would run with nobody to read it."""
    import fcntl
    import signal
    import subprocess
    import sys
    import time

    vault = tmp_path / "v"
    write(vault, "page/a.md", "x")
    lock = tmp_path / "lock"
    p = subprocess.Popen([sys.executable, "-c", _LOCKED_WALKER, str(vault), str(lock)],
                         stdout=subprocess.PIPE, text=True,
                         cwd=Path(__file__).resolve().parents[3])
    assert p.stdout is not None
    with p.stdout:
        lines = {p.stdout.readline().strip(), p.stdout.readline().strip()}
    assert "walking" in lines
    child = int(next(x for x in lines if x != "walking"))
    p.kill()
    p.wait(timeout=30)
    deadline = time.monotonic() + 30
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not _gone(child):
        os.kill(child, signal.SIGKILL)
        raise AssertionError("the walker outlived its sync")
    fd = os.open(lock, os.O_RDWR)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, "the space lock is still held"
                time.sleep(0.05)
    finally:
        os.close(fd)


# ---------------------------------------------------------------- what comes through the pipe


def test_odd_names_come_through_the_pipe_as_walked(tmp_path: Path) -> None:
    """Names that are not UTF-8 (surrogate escapes in Python), with a newline, a backslash,
    a colon, far from ASCII: the walk run ahead gives exactly the inline walk."""
    vault = tmp_path / "v"
    write(vault, "page/ok.md", "x")
    base = os.fsencode(vault / "page")
    for raw in (b"caf\xe9.md", b"new\nline.md", b"back\\slash.md", b"c:olon.md",
                "日本語.md".encode(), b"sub\xff/x.md"):
        path = base + b"/" + raw
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"x")
    inline = vaultscan.walk(vault)
    walk = vaultscan.Prefetch.start(vault)
    assert walk is not None
    ahead = walk.take()
    assert ahead is not None
    assert ahead[0] == inline[0] and len(inline[0]) == 7
    assert [(p.path, p.line, p.reason, p.entry_id) for p in ahead[1]] == [
        (p.path, p.line, p.reason, p.entry_id) for p in inline[1]]
    recorded = [(e, s, m) for e, s, m in inline[0]]
    ch = vaultscan.scan_changes(vault, recorded, ahead)
    assert not ch.changed and not ch.missing


def test_a_walk_of_tens_of_megabytes_comes_through(tmp_path: Path, monkeypatch) -> None:
    """The child writes the whole walk before this process reads (a 64 KiB pipe): no
    deadlock, nothing cut, however large (600,000 entries with long names, ~40 MB)."""
    vault = tmp_path / "v"
    write(vault, "page/ok.md", "x")
    big = {(f"page/{'x' * 40}/{i:07d}", i, 10**18 + i) for i in range(600_000)}
    monkeypatch.setattr(vaultscan, "walk", lambda v: (big, []))
    walk = vaultscan.Prefetch.start(vault)
    assert walk is not None
    got = walk.take()
    assert got is not None and got[0] == big


# ---------------------------------------------------------------- a walk older than the scan


@pytest.mark.parametrize("ahead", ["on", "off"])
def test_a_file_the_sync_itself_removes_after_the_walk_is_no_problem(team: CliTeam, ahead: str,
                                                                      monkeypatch) -> None:
    """A remote delete pulled by a sync killed before its vault write is journaled; the next
    sync carries it out (``flush_vault``) after the walk ran ahead, which saw the file. The
    scan must not report the file the sync itself just removed as a problem ("file cannot
    be read": shown by status, published nowhere, gone next sync)."""
    monkeypatch.setenv("QUIRE_WALK_AHEAD", ahead)
    a, b = team.members("a", "b")
    a.write(Entry(id="page/x", title="x", body="x\n"))
    a.sync()
    b.sync()
    b.path("page/x").unlink()
    b.sync()
    from tests.kit.cli import quire

    p = quire(a.home, "sync", "--json", env={"QUIRE_TEST_CRASH_AT": "before_vault_write"},
              check=False)
    assert p.returncode == -9, (p.stdout, p.stderr)
    assert a.path("page/x").exists()  # the delete is journaled, not done
    report = a.sync()["sync"]
    assert not a.path("page/x").exists()
    assert report["problems"] == []
    assert report["local_changes"] == [] and report["pushed"] == 0


def _deletes(vault: Path, recorded, walked) -> set[str]:
    """What a sync would publish as deletes (replica/engine/sync.py ``scan``: missing, not a
    problem's entry, not under a folder that is a link or cannot be read)."""
    from replica.vault import faults as vaultfaults

    ch = vaultscan.scan_changes(vault, recorded, walked)
    return {e for e in ch.missing - ch.problem_ids() if not vaultfaults.blocked(ch, e)}


def test_a_file_turned_into_a_link_after_the_walk_is_no_delete(tmp_path: Path) -> None:
    """``ln -sf ../note/shared.md page/x.md`` (unlink, then link) while the walk ran ahead:
    the walk saw no page/x.md, the scan finds a link there. An inline walk would report the
    link as a problem of page/x and publish nothing; the walk run ahead must not publish a
    delete of it either."""
    vault = tmp_path / "v"
    write(vault, "page/x.md", "x")
    write(vault, "note/shared.md", "y")
    st = (vault / "page" / "x.md").stat()
    recorded = [("page/x", st.st_size, st.st_mtime_ns)]
    (vault / "page" / "x.md").unlink()
    walked = vaultscan.walk(vault)  # the walk run ahead: x.md is not there
    os.symlink("../note/shared.md", vault / "page" / "x.md")
    assert _deletes(vault, recorded, None) == set()  # the inline walk, now
    assert _deletes(vault, recorded, walked) == set()


@pytest.mark.parametrize("target", ["elsewhere", "dangling"])
def test_a_folder_turned_into_a_link_after_the_walk_is_no_delete(tmp_path: Path,
                                                                 target: str) -> None:
    """A kind folder moved away and replaced by a link while the walk ran ahead (a sync tool
    or a person re-pointing ``page`` at another drive, not mounted: an empty folder or a
    dangling link). The walk saw no ``page`` at all; an inline walk now would report the
    link and hold every entry under it. No deletes either way."""
    vault = tmp_path / "v"
    write(vault, "page/a.md", "a")
    write(vault, "page/b.md", "b")
    recorded = [(e, s, m) for e, s, m in vaultscan.walk(vault)[0]]
    os.rename(vault / "page", tmp_path / "moved")
    walked = vaultscan.walk(vault)
    dest = tmp_path / "elsewhere"
    if target == "elsewhere":
        dest.mkdir()
    os.symlink(dest, vault / "page")
    assert _deletes(vault, recorded, None) == set()
    assert _deletes(vault, recorded, walked) == set()


def test_a_file_the_sync_itself_creates_after_the_walk_is_no_delete(team: CliTeam) -> None:
    """The mirror case, end to end: a remote create pulled by a sync killed before its vault
    write; the next sync writes the file (``flush_vault``) and records it after the walk ran
    ahead without it. It must not come out missing: a delete nobody made."""
    from tests.kit.cli import quire

    a, b = team.members("a", "b")
    b.write(Entry(id="page/new", title="new", body="new\n"))
    b.sync()
    p = quire(a.home, "sync", "--json", env={"QUIRE_TEST_CRASH_AT": "before_vault_write"},
              check=False)
    assert p.returncode == -9, (p.stdout, p.stderr)
    assert not a.path("page/new").exists()  # the create is journaled, not written
    report = a.sync()["sync"]
    assert a.read("page/new").body == "new\n"
    assert report["local_changes"] == [] and report["pushed"] == 0
    b.sync()
    assert b.read("page/new").body == "new\n"


def test_the_walker_forks_under_a_running_progress_bar(tmp_path: Path) -> None:
    """``quire sync`` on a terminal starts rich's progress bar (a refresh thread writing to
    stderr) before it takes the lock and forks the walker: the child must not hang on a
    lock that thread held at the fork (it takes none: no output, no import but ctypes)."""
    import io
    import threading

    from rich.console import Console
    from rich.progress import Progress

    vault = tmp_path / "v"
    wide(vault, 20)
    inline = vaultscan.walk(vault)
    bar = Progress(console=Console(file=io.StringIO(), force_terminal=True),
                   refresh_per_second=1000)
    bar.add_task("syncing", total=None)
    with bar:
        assert threading.active_count() > 1
        for _ in range(30):
            walk = vaultscan.Prefetch.start(vault)
            assert walk is not None
            assert walk.take() == inline


def test_a_deep_tree_is_walked_whole_under_a_low_fd_limit(tmp_path: Path) -> None:
    """300 nested folders under a limit of 256 descriptors (macOS's default): one held a
    level would run out; below a few dozen levels folders are opened by path."""
    p = tmp_path / "v" / "page"
    for _ in range(300):
        p = p / "d"
    write(p, "x.md", "x")
    write(tmp_path / "v" / "page", "top.md", "x")
    with fd_limit(256):
        walked, problems = vaultscan.walk(tmp_path / "v")
    assert problems == [] and len(walked) == 2
