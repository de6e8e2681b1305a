"""Sync against an in-memory hub: merge outcomes, outbox recovery, epochs, hostile hubs."""

from __future__ import annotations

import httpx2
import pytest

from replica.client import HubUnverified
from shared.entry import Entry
from shared.errors import TransferFailed
from tests.replica.fakehub import FakeHub
from tests.replica.inproc import Local


@pytest.fixture
def hub():
    return FakeHub()


@pytest.fixture
def pair(tmp_path, hub):
    a, b = Local(tmp_path, hub, "a"), Local(tmp_path, hub, "b")
    yield a, b
    a.close()
    b.close()


PAGE = Entry(id="page/deploy", title="Deploy", body="one\ntwo\nthree\nfour\nfive\n")


def converge(*rs: Local) -> None:
    for _ in range(2):
        for r in rs:
            r.sync()


def test_local_create_is_published_and_reaches_the_other_replica(pair, hub):
    a, b = pair
    a.sync()
    b.sync()
    a.write(PAGE)
    rep = a.sync()
    assert rep.pushed == 1 and len(hub.batches) == 1
    b.sync()
    assert b.read("page/deploy").version == PAGE.version
    assert a.files() == b.files() and a.store.digest() == b.store.digest()


def test_non_overlapping_edits_on_both_sides_converge(pair, hub):
    a, b = pair
    a.write(PAGE)
    converge(a, b)
    a.write(Entry(id=PAGE.id, title="Deploy", body="ONE\ntwo\nthree\nfour\nfive\n"))
    b.write(Entry(id=PAGE.id, title="Deploy", body="one\ntwo\nthree\nfour\nFIVE\n",
                  tags=("ops",)))
    converge(a, b)
    assert a.read(PAGE.id).body == "ONE\ntwo\nthree\nfour\nFIVE\n"
    assert a.read(PAGE.id).tags == ("ops",)
    assert a.files() == b.files() and a.store.digest() == b.store.digest()
    assert not a.held() and not b.held()


def test_overlapping_body_edits_are_held_not_pushed_and_other_entries_still_publish(pair, hub):
    a, b = pair
    a.write(PAGE)
    converge(a, b)
    a.write(Entry(id=PAGE.id, title="Deploy", body="uno\ntwo\nthree\nfour\nfive\n"))
    a.sync()
    b.write(Entry(id=PAGE.id, title="Deploy", body="eins\ntwo\nthree\nfour\nfive\n"))
    b.write(Entry(id="note/other", title="Other", body="fine\n"))
    rep = b.sync()
    assert rep.held == ["page/deploy"]
    assert b.held() == {"page/deploy"}
    assert "note/other" in hub.live()
    assert hub.live()["page/deploy"].body.startswith("uno")
    # ours stays in the vault, marked; both versions are kept in the store
    text = b.path(PAGE.id).read_text()
    assert "eins" in text and "quire:" in text and "conflict" in text
    c = b.store.conflicts()[0]
    assert c.ours.body.startswith("eins") and c.theirs.body.startswith("uno")
    assert c.base.body.startswith("one") and c.theirs_author is not None
    # a second sync pushes nothing for the held entry
    before = len(hub.batches)
    b.sync()
    assert len(hub.batches) == before


def test_removing_the_marker_publishes_the_resolution(pair, hub):
    a, b = pair
    a.write(PAGE)
    converge(a, b)
    a.write(Entry(id=PAGE.id, title="A"))
    a.sync()
    b.write(Entry(id=PAGE.id, title="B"))
    b.sync()
    assert b.held() == {PAGE.id}
    b.write(Entry(id=PAGE.id, title="A and B"))  # rewritten without the quire block
    b.sync()
    assert not b.held()
    assert hub.live()[PAGE.id].title == "A and B"
    converge(a, b)
    assert a.files() == b.files()


def test_edit_against_delete_is_held_with_the_local_edit_kept(pair, hub):
    a, b = pair
    a.write(PAGE)
    converge(a, b)
    a.path(PAGE.id).unlink()
    a.sync()
    b.write(Entry(id=PAGE.id, title="Deploy", body="edited\n"))
    b.sync()
    assert b.held() == {PAGE.id}
    assert "edited" in b.path(PAGE.id).read_text()
    assert PAGE.id not in hub.live()


def test_create_against_create_is_held_on_the_side_that_synced_last(pair, hub):
    a, b = pair
    a.sync()
    b.sync()
    a.write(Entry(id="page/new", title="from a"))
    b.write(Entry(id="page/new", title="from b"))
    a.sync()
    b.sync()
    assert not a.held() and b.held() == {"page/new"}
    assert hub.live()["page/new"].title == "from a"
    assert b.read("page/new").title == "from b"


def test_lost_receipt_is_recovered_by_replay_without_a_second_batch(pair, hub):
    a, _ = pair
    a.sync()
    a.write(PAGE)
    def drop_response(request):
        if request.url.path.endswith("/batches"):
            hub._route(request)  # the hub commits ...
            raise httpx2.ReadTimeout("response lost")  # ... and the answer never arrives
        return None

    hub.fail_next.append(drop_response)
    with pytest.raises(TransferFailed):
        a.sync()
    assert len(hub.batches) == 1 and len(a.store.outbox()) == 1
    a.sync()
    assert len(hub.batches) == 1 and not a.store.outbox()
    assert a.store.head().seq == hub.seq


def test_epoch_change_replays_unpublished_edits_on_the_new_epoch(pair, hub):
    a, b = pair
    a.write(PAGE)
    converge(a, b)
    a.write(Entry(id=PAGE.id, title="edited offline", body=PAGE.body))
    a.write(Entry(id="note/offline", title="new offline"))
    hub.bump_epoch()
    rep = a.sync()
    assert rep.snapshot
    assert hub.live()[PAGE.id].title == "edited offline"
    assert "note/offline" in hub.live()
    assert hub.log and all(x["batch"]["epoch"] == hub.epoch for x in hub.log)
    converge(a, b)
    assert a.files() == b.files() and a.store.digest() == b.store.digest()


def test_cut_changes_stream_applies_nothing_and_is_retryable(pair, hub):
    a, b = pair
    a.sync()
    b.sync()
    a.write(PAGE)
    a.sync()

    def cut(request):
        if "/changes" in request.url.path:
            full = hub._route(request).content
            return httpx2.Response(200, content=full.splitlines(keepends=True)[0])
        return None

    hub.fail_next.append(cut)
    with pytest.raises(TransferFailed):
        b.sync()
    assert b.read(PAGE.id) is None
    b.sync()
    assert b.read(PAGE.id).version == PAGE.version


def test_head_signed_by_another_key_is_refused(pair, hub):
    a, _ = pair
    a.sync()
    from shared.signing import new_private_key, public_b64
    a.client.hub_key = public_b64(new_private_key())
    with pytest.raises(HubUnverified):
        a.sync()


def test_hub_head_rolled_back_is_refused(pair, hub):
    a, _ = pair
    a.write(PAGE)
    a.sync()
    hub.seq = 0
    with pytest.raises(HubUnverified):
        a.sync()


def test_broken_file_is_reported_never_published_or_overwritten(pair, hub):
    a, b = pair
    a.write(PAGE)
    converge(a, b)
    broken = b"---\ntitle: [oops\n---\nmine\n"
    b.path(PAGE.id).write_bytes(broken)
    a.write(Entry(id=PAGE.id, title="Deploy", body="remote edit\n"))
    a.sync()
    rep = b.sync()
    assert [(p.path, p.line) for p in rep.problems] == [("page/deploy.md", 3)]
    assert b.path(PAGE.id).read_bytes() == broken
    assert hub.live()[PAGE.id].body == "remote edit\n"
    assert len(hub.batches) == 2


def test_line_separator_characters_in_an_entry_do_not_cut_the_stream(pair, hub):
    # canonical JSON leaves U+0085, U+2028 and U+2029 unescaped; a text line reader splits
    # at them, which made every pull of such an entry fail as a "cut stream"
    a, b = pair
    a.sync()
    b.sync()
    odd = Entry(id="page/separators", title="Separators",
                body="next line\u0085here\nline\u2028separator\nparagraph\u2029separator\n")
    a.write(odd)
    assert a.sync().pushed == 1
    b.sync()  # through changes
    assert b.read("page/separators").version == odd.version
    c = Local(a.vault.parent.parent, hub, "c")  # a new replica: through the snapshot
    try:
        c.sync()
        assert c.read("page/separators").version == odd.version
        assert c.store.digest() == a.store.digest()
    finally:
        c.close()


def test_a_held_entry_that_gets_a_newer_remote_version_is_reported_held_again(pair, hub):
    a, b = pair
    a.write(PAGE)
    converge(a, b)
    a.write(Entry(id=PAGE.id, title="Deploy", body="uno\ntwo\nthree\nfour\nfive\n"))
    a.sync()
    b.write(Entry(id=PAGE.id, title="Deploy", body="eins\ntwo\nthree\nfour\nfive\n"))
    assert b.sync().held == [PAGE.id]
    a.write(Entry(id=PAGE.id, title="Deploy", body="un\ntwo\nthree\nfour\nfive\n"))
    a.sync()
    rep = b.sync()  # pulls the newer version of an entry it already holds
    assert rep.pulled == 1 and rep.held == [PAGE.id]
    assert b.store.conflicts()[0].theirs.body.startswith("un\n")
