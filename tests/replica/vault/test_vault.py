"""Vault parsing and writing: problem files are reported with path, line and reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from replica.vault import files as vlt
from replica.vault import markdown as md
from replica.vault import walk as vaultscan
from shared.entry import Entry, EntryError


def write(root: Path, rel: str, data: bytes | str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    return p


@pytest.mark.parametrize("rel,reason", [
    ("page/notes.tmp", "must not end in '.md' or '.tmp'"),  # (notes.txt: an attachment)
    ("page/a\\b.md", "invalid entry id"),  # a backslash: a folder on Windows
    ("page/cafe\u0301.md", "NFC form; rename it to 'page/caf\u00e9.md'"),
    ("Notes/x.tmp.md", "must not end in '.md' or '.tmp'"),
])
def test_files_that_cannot_be_entries_are_reported(tmp_path, rel, reason):
    write(tmp_path, rel, "---\ntitle: x\n---\nbody\n")
    s = vlt.scan(tmp_path)
    assert not s.files
    assert [p.path for p in s.problems] == [rel]
    assert reason in s.problems[0].reason


def test_symlink_out_of_the_vault_is_reported_and_not_followed(tmp_path):
    vault, outside = tmp_path / "v", tmp_path / "secret.md"
    outside.write_text("---\ntitle: s\n---\nsecret\n")
    (vault / "page").mkdir(parents=True)
    os.symlink(outside, vault / "page" / "leak.md")
    s = vlt.scan(vault)
    assert not s.files
    assert s.problems[0].path == "page/leak.md"
    assert "out of the vault" in s.problems[0].reason
    assert s.problem_ids() == {"page/leak"}


def test_symlinked_kind_folder_is_reported(tmp_path):
    vault = tmp_path / "v"
    (tmp_path / "elsewhere").mkdir()
    vault.mkdir()
    os.symlink(tmp_path / "elsewhere", vault / "page")
    s = vlt.scan(vault)
    assert s.problems[0].path == "page" and "out of the vault" in s.problems[0].reason


def test_hidden_and_temp_files_are_ignored(tmp_path):
    write(tmp_path, "page/.x.md.swp", "junk")
    write(tmp_path, "page/a.md" + md.TMP_SUFFIX, "junk")
    write(tmp_path, ".git/config", "junk")
    s = vlt.scan(tmp_path)
    assert not s.files and not s.problems


@pytest.mark.parametrize("data,line,reason", [
    (b"---\ntitle: [unclosed\n---\nbody\n", 3, "not valid YAML"),
    (b"---\ntitle: x\nbody without fence\n", 1, "not closed"),
    (b"---\ntitle: x\n---\nok\n\xff\xfe broken\n", 5, "not valid UTF-8"),
    (b"---\ntags: [\"a b\"]\n---\n", 2, "invalid tag"),
])
def test_unparseable_files_give_line_and_reason(tmp_path, data, line, reason):
    with pytest.raises(EntryError) as e:
        md.read_entry(tmp_path, "page/x", data)
    assert e.value.line == line
    assert reason in str(e.value)


def test_written_file_reads_back_to_the_same_version(tmp_path):
    e = Entry(id="page/deep/nested", title="T", body="hello\n", tags=("a",),
              links=("page/x",), meta={"k": "v"})
    path = md.entry_path(tmp_path, e.id)
    assert path == tmp_path / "page" / "deep" / "nested.md"
    vlt.write_atomic(tmp_path, path, md.render(e))
    back, local = md.read_entry(tmp_path, e.id, path.read_bytes())
    assert back.version == e.version and local == {}
    assert not list(path.parent.glob("*" + md.TMP_SUFFIX))


def test_writes_never_go_through_a_symlink(tmp_path):
    vault = tmp_path / "v"
    (vault / "page").mkdir(parents=True)
    target = tmp_path / "outside.md"
    target.write_text("mine")
    os.symlink(target, vault / "page" / "x.md")
    with pytest.raises(OSError):
        vlt.write_atomic(vault, vault / "page" / "x.md", b"overwritten")
    assert target.read_text() == "mine"


def _odd_vault(root: Path) -> Path:
    vault = root / "v"
    for rel in ("loose.md", "page/Bad Name.md", "page/notes.txt", "Page/x.md", "page/ok.md",
                "page/deep/er/one.md", "skill/s.md", "page/.x.md.swp", ".git/config",
                "page/a.md" + md.TMP_SUFFIX, "page/b.md~"):
        write(vault, rel, "---\ntitle: x\n---\nbody\n")
    (root / "elsewhere").mkdir()
    os.symlink(root / "elsewhere", vault / "note")
    os.symlink(root / "secret.md", vault / "page" / "leak.md")
    os.mkfifo(vault / "page" / "fifo.md")  # not a regular file: never read
    return vault


def test_scan_changes_finds_what_scan_finds_and_the_same_problems(tmp_path):
    vault = _odd_vault(tmp_path)
    full = vlt.scan(vault)
    ch = vaultscan.scan_changes(vault, [])
    assert {f.entry_id for f in ch.changed} == {"page/ok", "page/deep/er/one", "skill/s",
                                                "loose", "page/Bad Name", "Page/x",
                                                "page/notes.txt"}  # an attachment (D147)
    assert {(f.entry_id, f.os_path) for f in ch.changed} <= {(f.entry_id, f.os_path)
                                                          for f in full.files.values()}
    assert [(p.path, p.reason, p.entry_id) for p in ch.problems if p.path != "page/fifo.md"
            ] == [(p.path, p.reason, p.entry_id) for p in full.problems]
    assert any(p.path == "page/fifo.md" for p in ch.problems) and not ch.missing


def test_scan_changes_compares_by_size_and_mtime(tmp_path):
    vault = _odd_vault(tmp_path)
    rec = [(f.entry_id, f.size, f.mtime_ns) for f in vaultscan.scan_changes(vault, []).changed]
    assert not vaultscan.scan_changes(vault, rec).changed  # nothing changed: nothing to look at
    p = vault / "page" / "ok.md"
    st = p.stat()
    p.write_text("---\ntitle: y\n---\nbody\n")  # same size, edited in place
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    (vault / "skill" / "s.md").unlink()
    unknown = [(i, s, None) if i == "page/deep/er/one" else (i, s, m) for i, s, m in rec]
    ch = vaultscan.scan_changes(vault, [*unknown, ("page/gone", 1, 2)])
    assert [f.entry_id for f in ch.changed] == ["page/deep/er/one", "page/ok"]
    assert ch.missing == {"skill/s", "page/gone"}


def test_bulk_writes_never_go_through_a_symlinked_folder_out_of_the_vault(tmp_path):
    vault, outside = tmp_path / "v", tmp_path / "outside"
    (vault / "page").mkdir(parents=True)
    outside.mkdir()
    os.symlink(outside, vault / "page" / "deep")
    with pytest.raises(OSError):
        vlt.write_many(vault, [(os.fspath(vault / "page" / "deep" / "er" / "x.md"), b"x"),
                               (vault / "page" / "ok.md", b"y")], exclusive=True)
    assert not list(outside.rglob("*"))
    inside = vault / "page" / "real"
    inside.mkdir()
    os.symlink(inside, vault / "page" / "alias")  # a link that stays inside: allowed
    done = vlt.write_many(vault, [(vault / "page" / "alias" / "y.md", b"z"),
                                  (os.fspath(vault / "note" / "a" / "b" / "c.md"), b"c")])
    assert len(done) == 2 and (inside / "y.md").read_bytes() == b"z"
    assert (vault / "note" / "a" / "b" / "c.md").read_bytes() == b"c"


@pytest.mark.parametrize("data,line,reason", [
    # the example: severity is on line 4, not line 2 (the title)
    (b"---\ntitle: No force push\ntags: [git]\nmeta:\n  severity: high\n---\nNever.\n", 5,
     "meta.severity must be one of info, warn, block"),
    (b"---\ntitle: t\nmeta: {severity: high}\n---\n", 3, "meta.severity must be one of"),
    (b"---\ntitle: t\ntags:\n  - ok\n  - ok\n  - \"a b\"\n---\n", 6, "invalid tag 'a b'"),
    (b"---\ntitle: t\nlinks:\n  - page/a\n  - no//pe\n---\n", 5, "invalid link 'no//pe'"),
    (b"---\ntitle: t\nmeta:\n  a: 1\n  b:\n    c: 1.5\n---\n", 6, "meta.b.c: numbers"),
    (b"---\ntitle: t\naliases: 1.5\n---\n", 3, "meta.aliases: numbers"),
    (b"---\ntags: [a]\ntitle: |\n  two\n  lines\n---\n", 3, "title must be one line"),
    (b"---\ntitle: t\nmeta: [1]\n---\n", 3, "meta must be a mapping"),
    (b"---\ntitle: t\n\nquire: 5\n---\n", 4, "reserved for Quire"),
])
def test_front_matter_errors_name_the_line_and_key(tmp_path, data, line, reason):
    kind = "guardrail" if b"severity" in data else "page"
    with pytest.raises(EntryError) as e:
        md.read_entry(tmp_path, f"{kind}/x", data)
    assert (e.value.line, reason in str(e.value)) == (line, True), (e.value.line, str(e.value))


def test_a_bad_guardrail_is_reported_as_path_line_and_key(tmp_path):
    data = b"---\ntitle: No force push\nmeta:\n  severity: high\n---\nNever force-push main.\n"
    with pytest.raises(EntryError) as e:
        md.read_entry(tmp_path, "guardrail/no-force-push", data)
    assert e.value.key == "meta.severity"
    p = md.Problem("guardrail/no-force-push.md", e.value.line, str(e.value), None)
    assert f"{p.path}:{p.line}: {p.reason}" == (
        "guardrail/no-force-push.md:4: meta.severity must be one of info, warn, block")


def test_a_file_name_in_another_encoding_is_a_problem_that_can_be_printed(tmp_path):
    """A name written by a Windows-1252 system (``café`` as the byte 0xE9) is no UTF-8: a
    problem naming the file and its likely name, printable and JSON-safe (its bad byte
    escaped), never an entry."""
    import json

    (tmp_path / "page").mkdir()
    (tmp_path / "page").joinpath(os.fsdecode(b"caf\xe9.md")).write_text("---\ntitle: x\n---\n")
    s = vaultscan.scan_changes(tmp_path, [])
    assert not s.changed and len(s.problems) == 1
    shown = s.problems[0].to_json()
    assert shown["path"] == "page/caf\\udce9.md"
    assert "not valid UTF-8" in shown["reason"] and "rename it to 'page/café.md'" in \
        shown["reason"]
    json.dumps(shown, ensure_ascii=False).encode("utf-8")  # does not raise


def test_bulk_writes_into_the_vault_itself_take_it_as_it_is_and_a_gone_vault_is_refused(
        tmp_path):
    """The vault folder is not resolved again at each write (the watcher writes one file per
    publication): a vault reached through a link, or holding a link named like the probe the
    old check made, still takes writes; a vault that is gone is still not made by a write."""
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(tmp_path / "elsewhere", real / "x")  # a dangling link in the vault's root
    vault = tmp_path / "v"
    os.symlink(real, vault)
    assert vlt.write_many(vault, [(vault / "a.md", b"a"), (vault / "page" / "b.md", b"b")])
    assert (real / "a.md").read_bytes() == b"a" and (real / "page" / "b.md").read_bytes() == b"b"
    gone = tmp_path / "gone"
    with pytest.raises(OSError):
        vlt.write_many(gone, [(gone / "a.md", b"a")])
    assert not gone.exists()
