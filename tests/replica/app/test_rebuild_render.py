"""``quire vault rebuild`` renders every file from the store as the syncs wrote it
(replica/app/rebuild.py ``expected_files``), against the real hub in-process; its command,
doctor's advice and the refusal to overwrite edits are tests/replica/cli/test_vault_rebuild.py."""

from __future__ import annotations

import pytest

from shared.entry import Entry


@pytest.fixture
def pair(tmp_path, space):
    a, b = space.replica(tmp_path, "a"), space.replica(tmp_path, "b")
    yield a, b
    a.close()
    b.close()


def _fill(a, n: int) -> None:
    for i in range(n):
        a.write(Entry(id=f"page/p{i:03}", title=f"p{i}", body=f"page {i}\n"))
    a.sync()


def test_the_rebuild_renders_every_file_as_the_vault_holds_it_a_held_one_too(pair, space):
    """``quire vault rebuild`` writes what ``expected_files`` renders (replica/app/rebuild.py):
    byte for byte what the syncs wrote, the conflict marker of a held entry included."""
    from replica.app.rebuild import expected_files
    from replica.vault import markdown as md

    a, b = pair
    _fill(a, 3)
    b.sync()
    a.write(Entry(id="page/p000", title="p0", body="ann's version\n"))
    a.sync()
    b.write(Entry(id="page/p000", title="p0", body="bob's version\n"))
    b.sync()
    assert b.held() == {"page/p000"}
    want = expected_files(b.store)
    assert {md.entry_path(b.vault, i).relative_to(b.vault).as_posix(): data
            for i, data in want.items()} == b.files()
    assert b"quire:" in want["page/p000"]
