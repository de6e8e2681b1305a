"""Files stay as their authors wrote them (docs/decisions.md D132 part 3, D150), through
the real sync engine and the real hub in-process: what one member saves is, byte for byte,
what the other member's vault gets, by clone and by pull, for front matter in several
styles, CRLF, a byte-order mark, no front matter at all, trailing whitespace and no final
newline; a three-way merge keeps the file's own line ends and front matter style. Before,
every other vault got the canonical rendering of the parsed fields."""

from __future__ import annotations

from pathlib import Path

from shared.entry import Entry
from tests.kit.inproc import Space

FILES = {
    # keys out of order, quoted, a flow list, a comment, an unknown key
    "Notes/Styles": b"---\ntags: [ops, \"deploy\"]   # why\ntitle: \"Release Plan\"\n"
                    b"aliases:\n  - plan\nowner: 'ann'\n---\n# Plan\n\nShip it.\n",
    "Notes/Windows": b"---\r\ntitle: Windows file\r\ntags:\r\n- a\r\n---\r\nline one\r\n"
                     b"line two\r\n",
    "Notes/Bom": "\ufeff---\ntitle: Caf\u00e9\n---\nwith a byte-order mark\n".encode(),
    "Notes/Bare": b"# No front matter\n\nJust text.\n",
    "Notes/Ragged": b"---\ntitle: ragged  \n---\ntrailing spaces   \n\tand a tab\t\nno end",
    "Notes/Empty": b"",
    "guardrail/freeze": b"---\nseverity: block\ntitle: Freeze\n---\nNo deploys on Friday.\n",
}


def test_a_second_members_vault_is_byte_identical(tmp_path: Path, space: Space) -> None:
    ann = space.replica(tmp_path / "a", "ann")
    bob = carol = None
    try:
        for eid, data in FILES.items():
            ann.path(eid).parent.mkdir(parents=True, exist_ok=True)
            ann.path(eid).write_bytes(data)
        rep = ann.sync()
        assert rep.pushed == len(FILES) and not rep.problems, rep
        bob = space.replica(tmp_path / "b", "bob")  # a clone
        bob.sync()
        for eid, data in FILES.items():
            assert bob.path(eid).read_bytes() == data, eid
        live = space.live()
        assert live["Notes/Styles"].title == "Release Plan"
        assert live["Notes/Styles"].tags == ("deploy", "ops")
        assert live["Notes/Styles"].meta == {"aliases": ["plan"], "owner": "ann"}
        assert live["Notes/Windows"].body == "line one\r\nline two\r\n"
        assert live["guardrail/freeze"].meta == {"severity": "block"}
        # by pull: an edit that keeps the style arrives as written
        edited = FILES["Notes/Windows"] + b"line three\r\n"
        bob.path("Notes/Windows").write_bytes(edited)
        bob.sync()
        ann.sync()
        assert ann.path("Notes/Windows").read_bytes() == edited
        assert ann.files() == bob.files()
        # a file written by Quire (no raw) is still the canonical vault form everywhere
        carol = space.replica(tmp_path / "c", "carol")
        carol.write(Entry(id="page/plain", title="plain", body="x\n"))
        carol.sync()
        bob.sync()
        assert bob.path("page/plain").read_bytes() == carol.path("page/plain").read_bytes()
        assert space.live()["page/plain"].raw is None
    finally:
        for r in (ann, bob, carol):
            if r is not None:
                r.close()


def test_concurrent_edits_of_a_crlf_file_merge_and_keep_its_bytes(tmp_path: Path,
                                                                  space: Space) -> None:
    base = (b"---\r\nowner: 'ann'\r\nstatus: draft\r\ntitle: \"Plan\"\r\n---\r\n"
            b"one\r\ntwo\r\nthree\r\nfour\r\n")
    ann = space.replica(tmp_path / "a", "ann")
    bob = None
    try:
        ann.vault.mkdir(parents=True, exist_ok=True)
        ann.path("Plan").write_bytes(base)
        ann.sync()
        bob = space.replica(tmp_path / "b", "bob")
        bob.sync()
        ann.path("Plan").write_bytes(base.replace(b"one", b"ONE")
                                     .replace(b"'ann'", b"'ann b'"))
        bob.path("Plan").write_bytes(base.replace(b"four", b"FOUR")
                                     .replace(b"draft", b"done"))
        ann.sync()
        rep = bob.sync()  # bob's edit meets ann's: merged, not held
        assert not bob.held() and not rep.problems, rep
        ann.sync()
        want = (b"---\r\nowner: 'ann b'\r\nstatus: done\r\ntitle: \"Plan\"\r\n---\r\n"
                b"ONE\r\ntwo\r\nthree\r\nFOUR\r\n")
        assert bob.path("Plan").read_bytes() == want
        assert ann.path("Plan").read_bytes() == want
    finally:
        ann.close()
        if bob is not None:
            bob.close()
