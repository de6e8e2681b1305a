"""A clone cut by a kill or a power loss (replica/vault/created.py): the files it created are
unrecorded (one transaction), and after a power cut any of them may be missing, empty, cut
short or zero-filled, or never finished (mode 0). The next sync must take every such file
for its own unfinished write (remove it, write it again from the hub) and never for a
person's edit (publish a cut entry, or hold it as a conflict); a file a person wrote there
since is theirs and stays."""

from __future__ import annotations

import os

import pytest

import replica.engine.clone as clone_mod
import replica.engine.clone_writers as vw
from replica.vault import created as clonefiles
from shared.entry import Entry
from tests.kit.inproc import Local, Space

N = 23


class Crash(BaseException):
    """Stands in for SIGKILL in-process: no cleanup code runs (the clone's ``except
    Exception`` repair does not)."""


def _team(tmp_path, space: Space) -> Local:
    a = space.replica(tmp_path, "a")
    a.sync()
    for i in range(N):
        a.write(Entry(id=f"page/p{i:03d}", title=f"page {i}", body=f"body {i}\n" * 40,
                      tags=("t",), meta={"n": i}))
    a.sync()
    return a


def _cut_clone(tmp_path, space: Space, monkeypatch, min_entries: int) -> Local:
    """b's clone killed at its third chunk: two chunks' files created, nothing recorded."""
    monkeypatch.setattr(clone_mod, "CHUNK", 5)
    monkeypatch.setattr(vw, "MIN_ENTRIES", min_entries)
    b = space.replica(tmp_path, "b")
    calls = []

    def crash(name: str) -> None:
        if name == "mid_clone":
            calls.append(name)
            if len(calls) == 3:
                raise Crash(name)

    monkeypatch.setattr(clone_mod, "crash_point", crash)
    with pytest.raises(Crash):
        b.sync()
    monkeypatch.setattr(clone_mod, "crash_point", lambda name: None)
    assert b.store.head() is None and b.store.get_meta(clonefiles.MARK)
    return b


@pytest.mark.parametrize("min_entries", [0, 10 ** 9])  # the writer processes, and inline
def test_files_a_power_loss_cut_come_back_and_nothing_is_published(tmp_path, space,
                                                                    monkeypatch, min_entries):
    a = _team(tmp_path, space)
    b = _cut_clone(tmp_path, space, monkeypatch, min_entries)
    made = sorted(b.vault.rglob("*.md"))
    assert len(made) >= 10  # the first two chunks at least
    # what the disk may show after a power cut: each of these is the clone's own write
    made[0].unlink()  # the name never reached the disk
    made[1].write_bytes(b"")  # the name did, the data did not
    data = made[2].read_bytes()
    made[2].write_bytes(data[: len(data) // 2])  # part of the data (still parses)
    made[3].write_bytes(b"\0" * len(data))  # the size, not the data
    for p in made[1:4]:  # the clone's mtime had reached the disk (it comes before the data)
        os.utime(p, ns=(os.stat(made[4]).st_mtime_ns,) * 2)
    made[4].write_bytes(data[:100])  # a create that never finished: mode 0, any mtime
    os.chmod(made[4], clonefiles.UNFINISHED)
    b.close()
    b2 = b.reopen()
    report = b2.sync()
    assert not report.held and not report.local_changes
    assert b2.files() == a.files() and a.store.digest() == b2.store.digest()
    assert not space.batches(b2) and b2.store.dirty_count() == 0
    assert b2.store.get_meta(clonefiles.MARK) is None  # recorded: no longer the clone's
    for p in made[:5]:
        assert (os.stat(p).st_mode & 0o777) == clonefiles.final_mode()
    a.close()
    b2.close()


def test_a_person_s_file_after_the_cut_is_theirs(tmp_path, space, monkeypatch):
    """An edit of a file the cut clone created, and a new file at an entry path it had not
    reached: both kept (not removed as the clone's), met as creates against the hub's."""
    a = _team(tmp_path, space)
    b = _cut_clone(tmp_path, space, monkeypatch, 10 ** 9)
    made = sorted(b.vault.rglob("*.md"))
    edited = made[0]
    edited.write_text("---\ntitle: mine\n---\nmy edit after the crash\n")
    late = b.path(f"page/p{N - 1:03d}")
    assert not late.exists()
    late.write_text("---\ntitle: also mine\n---\nwritten before the sync\n")
    b.close()
    b2 = b.reopen()
    report = b2.sync()
    assert "my edit after the crash" in edited.read_text()
    assert "written before the sync" in late.read_text()
    held = {c.entry_id: c for c in b2.store.conflicts()}
    assert set(report.held) == set(held) == {"page/p000", f"page/p{N - 1:03d}"}
    assert all(c.fields == ["create"] for c in held.values())
    assert not space.batches(b2)  # held, not published over the hub's
    others = {k: v for k, v in b2.files().items()
              if k not in ("page/p000.md", f"page/p{N - 1:03d}.md")}
    assert others == {k: v for k, v in a.files().items() if k in others}
    assert len(others) == N - 2
    a.close()
    b2.close()


def test_a_refused_snapshot_removes_its_files_at_once(tmp_path, space, monkeypatch):
    """A refusal (here a writer's OSError in the third chunk) removes what the clone
    created before it is raised, and leaves no mark; files a person had there stay."""
    monkeypatch.setattr(clone_mod, "CHUNK", 5)
    a = _team(tmp_path, space)
    b = space.replica(tmp_path, "b")
    mine = b.path("page/p020")
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_text("---\ntitle: mine\n---\nmine\n")
    real = vw.apply_lines
    calls = []

    def failing(*args, **kw):
        calls.append(1)
        done, refusal = real(*args, **kw)
        return done, ("OSError", "disk full", {}) if len(calls) == 3 else refusal

    monkeypatch.setattr(vw, "apply_lines", failing)
    with pytest.raises(OSError, match="disk full"):
        b.sync()
    assert b.files() == {"page/p020.md": b"---\ntitle: mine\n---\nmine\n"}
    assert b.store.get_meta(clonefiles.MARK) is None and b.store.head() is None
    a.close()
    b.close()


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_cloned_files_get_the_mode_a_plain_write_gives(tmp_path, umask):
    """Created at mode 0 (the unfinished mark), a finished file has what ``open(…, 0o644)``
    gives under the process umask, read without changing it."""
    old = os.umask(umask)
    try:
        plain = tmp_path / "plain"
        plain.write_bytes(b"x")
        made = tmp_path / "made.md"
        assert clonefiles.create(os.fspath(made), b"data", 1_000_000_000, clonefiles.final_mode())
        assert os.stat(made).st_mode & 0o7777 == os.stat(plain).st_mode & 0o7777
        assert os.stat(made).st_mtime_ns == 1_000_000_000 and made.read_bytes() == b"data"
        assert not clonefiles.create(os.fspath(made), b"other", 1, 0o644)  # never over a file
        assert made.read_bytes() == b"data" and os.umask(umask) == umask
    finally:
        os.umask(old)


def test_a_tombstone_line_is_merged_never_created_as_a_file(tmp_path):
    """A snapshot lists live entries; a line holding a tombstone (a hub that lies) goes to
    the main process's merge (which keeps its deleted flag), never to a file and a row
    recorded as live."""
    import hashlib
    import json

    line = {"entry": {"id": "page/gone", "deleted": True}, "seq": 3}
    line["version"] = hashlib.sha256(json.dumps(line["entry"], sort_keys=True,
                                                separators=(",", ":")).encode()).hexdigest()
    done, refusal = vw.apply_lines(os.fspath(tmp_path), [json.dumps(line).encode()], {}, 1,
                                   0o644)
    assert refusal is None and [r[0] for r in done] == [vw.MERGE]
    assert not list(tmp_path.rglob("*.md"))
