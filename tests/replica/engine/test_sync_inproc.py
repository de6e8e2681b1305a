"""Sync against the real hub application in-process (tests/kit/inproc.py): merge
outcomes, outbox recovery, epochs, and hubs that lie (tests/kit/hostile.py wraps the real
one)."""

from __future__ import annotations

import httpx2
import pytest

from shared.entry import Entry
from shared.errors import HubUnverified, StaleHead, TransferFailed
from shared.signing import new_private_key
from tests.kit.hostile import Hostile, resign_head
from tests.kit.inproc import Local

PAGE = Entry(id="page/deploy", title="Deploy", body="one\ntwo\nthree\nfour\nfive\n")


@pytest.fixture
def pair(tmp_path, space):
    a, b = space.replica(tmp_path, "a"), space.replica(tmp_path, "b")
    yield a, b
    a.close()
    b.close()


@pytest.fixture
def lying(tmp_path, space):
    """Replica ``a`` behind a hostile wrapper of the real hub."""
    a = space.replica(tmp_path, "a", wrap=Hostile)
    yield a, a.transport
    a.close()


def converge(*rs: Local) -> None:
    for _ in range(2):
        for r in rs:
            r.sync()


def test_local_create_is_published_and_reaches_the_other_replica(pair, space):
    a, b = pair
    a.sync()
    b.sync()
    a.write(PAGE)
    rep = a.sync()
    assert rep.pushed == 1 and space.batches() and len(space.batches()) == 1
    assert space.live()[PAGE.id].version == PAGE.version
    b.sync()
    assert b.read("page/deploy").version == PAGE.version
    assert a.files() == b.files() and a.store.digest() == b.store.digest()


def test_non_overlapping_edits_on_both_sides_merge_and_converge(pair, space):
    a, b = pair
    a.write(PAGE)
    converge(a, b)
    a.write(Entry(id=PAGE.id, title="Deploy", body="ONE\ntwo\nthree\nfour\nfive\n"))
    b.write(Entry(id=PAGE.id, title="Deploy", body="one\ntwo\nthree\nfour\nFIVE\n",
                  tags=("ops",)))
    converge(a, b)
    assert a.read(PAGE.id).body == "ONE\ntwo\nthree\nfour\nFIVE\n"
    assert a.read(PAGE.id).tags == ("ops",)
    assert space.live()[PAGE.id] == a.read(PAGE.id)
    assert a.files() == b.files() and a.store.digest() == b.store.digest()
    assert not a.held() and not b.held()


def test_overlapping_body_edits_are_held_not_pushed_and_other_entries_still_publish(pair, space):
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
    live = space.live()
    assert "note/other" in live and live["page/deploy"].body.startswith("uno")
    # ours stays in the vault, marked; both versions are kept in the store
    text = b.path(PAGE.id).read_text()
    assert "eins" in text and "quire:" in text and "conflict" in text
    c = b.store.conflicts()[0]
    assert c.ours.body.startswith("eins") and c.theirs.body.startswith("uno")
    assert c.base.body.startswith("one") and c.theirs_author is not None
    # a second sync pushes nothing for the held entry
    before = len(space.batches())
    b.sync()
    assert len(space.batches()) == before


def test_removing_the_marker_publishes_the_resolution(pair, space):
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
    assert space.live()[PAGE.id].title == "A and B"
    converge(a, b)
    assert a.files() == b.files()


def test_edit_against_delete_is_held_with_the_local_edit_kept(pair, space):
    a, b = pair
    a.write(PAGE)
    converge(a, b)
    a.path(PAGE.id).unlink()
    a.sync()
    b.write(Entry(id=PAGE.id, title="Deploy", body="edited\n"))
    b.sync()
    assert b.held() == {PAGE.id}
    assert "edited" in b.path(PAGE.id).read_text()
    assert PAGE.id not in space.live()


def test_create_against_create_is_held_on_the_side_that_synced_last(pair, space):
    a, b = pair
    a.sync()
    b.sync()
    a.write(Entry(id="page/new", title="from a"))
    b.write(Entry(id="page/new", title="from b"))
    a.sync()
    b.sync()
    assert not a.held() and b.held() == {"page/new"}
    assert space.live()["page/new"].title == "from a"
    assert b.read("page/new").title == "from b"


def test_push_overtaken_by_another_publication_is_rebased_and_the_gap_pulled(tmp_path, space):
    # b publishes while a's batch is in flight (after a's pull): the hub chains a's batch
    # on the new head (?rebase=1, other entries only) and a pulls b's batch it skipped
    a = space.replica(tmp_path, "a", wrap=Hostile)
    b = space.replica(tmp_path, "b")
    try:
        a.sync()
        b.sync()
        b.write(Entry(id="note/from-b", title="b"))

        def b_publishes_first(request, forward):
            assert b.sync().pushed == 1
            return forward()

        a.transport.intercept("batches", b_publishes_first, times=1)
        a.write(PAGE)
        rep = a.sync()
        assert rep.pushed == 1 and rep.pulled >= 1
        receipts = [x.json()["receipt"] for x in a.transport.recorded("batches")]
        assert [r["seq"] for r in receipts] == [2]  # parent seq 0, landed at 2: rebased
        assert [x["replica_id"] for x in space.batches()] == [b.engine.replica_id,
                                                              a.engine.replica_id]
        assert a.read("note/from-b").title == "b" and a.store.head().seq == 2
        b.sync()
        assert a.files() == b.files() and a.store.digest() == b.store.digest()
    finally:
        a.close()
        b.close()


def test_a_viewers_local_edit_is_kept_and_reported_never_published(tmp_path, space):
    a = space.replica(tmp_path, "a")
    v = space.replica(tmp_path, "v", role="viewer")
    try:
        a.write(PAGE)
        a.sync()
        v.sync()
        v.write(Entry(id=PAGE.id, title="viewer edit", body=PAGE.body))
        rep = v.sync()
        assert [(d["id"], d["rule"]) for d in rep.policy_denied] == [(PAGE.id, "role:viewer")]
        assert v.read(PAGE.id).title == "viewer edit"  # kept in the vault
        assert space.live()[PAGE.id].title == "Deploy" and not space.batches(v)
    finally:
        a.close()
        v.close()


def test_the_hub_refuses_a_push_its_rules_deny_even_when_the_replica_did_not_know(
        tmp_path, space):
    # the replica's local check reads the rules of this sync's head; a rule added between
    # that head and the push is enforced by the guard: refused, the edit stays local and
    # dirty, nothing published
    a = space.replica(tmp_path, "a", wrap=Hostile)
    try:
        a.write(PAGE)
        a.sync()
        a.write(Entry(id=PAGE.id, title="edited", body=PAGE.body))

        def rule_added_in_flight(request, forward):
            space.admin.admin_post(f"/v1/spaces/{space.id}/rules", {
                "effect": "deny", "who": "editor", "actions": ["update"], "entries": "page/*"})
            return forward()

        a.transport.intercept("batches", rule_added_in_flight, times=1)
        rep = a.sync()  # held back, as the local check holds back what it foresees
        assert [(d["id"], d["action"]) for d in rep.policy_denied] == [(PAGE.id, "update")]
        assert space.live()[PAGE.id].title == "Deploy" and len(space.batches()) == 1
        assert a.read(PAGE.id).title == "edited" and not a.store.outbox()
        assert PAGE.id in a.store.dirty_states()
    finally:
        a.close()


def test_lost_push_response_is_recovered_by_replay_without_a_second_batch(lying, space):
    a, hostile = lying
    a.sync()
    a.write(PAGE)

    def commit_then_lose_the_answer(request, forward):
        forward()  # the hub commits ...
        raise httpx2.ReadTimeout("response lost")  # ... and the answer never arrives

    hostile.intercept("batches", commit_then_lose_the_answer, times=1)
    with pytest.raises(TransferFailed):
        a.sync()
    assert len(space.batches()) == 1 and len(a.store.outbox()) == 1
    a.sync()
    assert len(space.batches()) == 1 and not a.store.outbox()
    assert a.store.head().seq == space.head()["seq"] == 1


def test_epoch_change_replays_unpublished_edits_on_the_new_epoch(pair, space):
    a, b = pair
    a.write(PAGE)
    converge(a, b)
    a.write(Entry(id=PAGE.id, title="edited offline", body=PAGE.body))
    a.write(Entry(id="note/offline", title="new offline"))
    old_epoch = space.head()["epoch"]
    new_epoch = space.bump_epoch("test: history restarts")["epoch"]
    assert new_epoch != old_epoch
    rep = a.sync()
    assert rep.snapshot
    live = space.live()
    assert live[PAGE.id].title == "edited offline" and "note/offline" in live
    replayed = space.batches(a)  # the changes of the current (new) epoch only
    assert replayed and all(x["epoch"] == new_epoch for x in replayed)
    converge(a, b)
    assert a.files() == b.files() and a.store.digest() == b.store.digest()


@pytest.mark.parametrize("fail", [False, True], ids=["ends-early", "connection-breaks"])
def test_cut_changes_stream_applies_nothing_and_the_next_sync_completes(tmp_path, space,
                                                                        fail):
    b = space.replica(tmp_path, "b", wrap=Hostile)
    a = space.replica(tmp_path, "a")
    try:
        a.sync()
        b.sync()
        a.write(PAGE)
        a.write(Entry(id="page/second", title="Second"))
        a.sync()
        a.write(Entry(id="page/third", title="Third"))
        a.sync()
        head_before = b.store.head()
        b.transport.truncate("changes", lines=1, fail=fail, times=1)  # one batch, no end line
        with pytest.raises(TransferFailed):
            b.sync()
        assert b.read(PAGE.id) is None and b.store.head() == head_before
        b.sync()
        assert b.read(PAGE.id).version == PAGE.version
        assert a.store.digest() == b.store.digest()
    finally:
        a.close()
        b.close()


def test_head_signed_by_another_key_is_refused(lying):
    a, hostile = lying
    a.sync()
    a.write(PAGE)
    impostor = new_private_key()
    hostile.on_head(lambda doc: resign_head(doc, impostor, seq=doc["seq"] + 1))
    with pytest.raises(HubUnverified):
        a.sync()
    assert a.store.head().seq == 0 and len(a.store.outbox()) == 0  # nothing pushed


def test_rolled_back_head_replayed_from_an_earlier_answer_is_refused(lying, space):
    a, hostile = lying
    a.sync()  # the hub's genuine, signed head at seq 0 is recorded
    old_head = hostile.recorded("head")[-1]
    assert old_head.json()["seq"] == 0
    a.write(PAGE)
    a.sync()
    assert a.store.head().seq == 1
    hostile.replay(old_head)  # the hub serves its old (validly signed) head again
    with pytest.raises(StaleHead, match="nonce"):  # not signed over this sync's nonce
        a.sync()
    assert a.store.head().seq == 1 and a.read(PAGE.id).version == PAGE.version


def test_rolled_back_head_signed_by_the_hub_key_is_refused(lying, inproc_hub):
    # a compromised hub signs whatever it likes: a head behind ours is still refused
    a, hostile = lying
    a.write(PAGE)
    a.sync()
    hostile.on_head(lambda doc: resign_head(doc, inproc_hub.hub.key.private, seq=0))
    with pytest.raises(HubUnverified, match="behind"):
        a.sync()


def _forge_body(line: dict) -> dict:
    """A changes line whose first op carries other text (digest and signature as they
    were)."""
    if "batch" in line:
        line["batch"]["ops"][0]["entry"]["body"] = "forged by the hub\n"
    return line


def test_batch_content_rewritten_in_the_changes_stream_is_refused(tmp_path, space):
    a = space.replica(tmp_path, "a")
    b = space.replica(tmp_path, "b", wrap=Hostile)
    try:
        a.sync()
        b.sync()
        a.write(PAGE)
        a.sync()
        b.transport.on_lines("changes", lambda lines: [_forge_body(x) for x in lines])
        with pytest.raises(HubUnverified, match="pulled batch does not verify"):
            b.sync()
        assert b.read(PAGE.id) is None and b.store.head().seq == 0
    finally:
        a.close()
        b.close()


def test_entry_rewritten_in_the_snapshot_is_refused(tmp_path, space):
    a = space.replica(tmp_path, "a")
    try:
        a.write(PAGE)
        a.sync()
    finally:
        a.close()

    def forge(lines):
        for x in lines:
            if "entry" in x:
                x["entry"]["body"] = "forged by the hub\n"  # its version left as it was
        return lines

    c = space.replica(tmp_path, "c", wrap=Hostile)
    try:
        c.transport.on_lines("snapshot", forge)
        with pytest.raises(HubUnverified, match="does not match its version"):
            c.sync()
        assert c.read(PAGE.id) is None and c.store.head() is None
    finally:
        c.close()


def test_receipt_rewritten_by_the_hub_is_refused_and_the_push_settled_by_the_next_sync(
        lying, space):
    a, hostile = lying
    a.sync()
    a.write(PAGE)

    def other_seq(doc):
        doc["receipt"]["seq"] += 5  # signed: any change breaks the hub's signature
        return doc

    hostile.on_json("batches", other_seq, times=1)
    with pytest.raises(HubUnverified, match="receipt"):
        a.sync()
    assert len(space.batches()) == 1  # the hub did accept it; the replica did not believe it
    a.sync()  # the next sync finds its batch in the history: nothing sent twice
    assert len(space.batches()) == 1 and not a.store.outbox() and not a.store.dirty_states()


def test_snapshot_cut_mid_line_applies_nothing_and_the_next_sync_completes(tmp_path, space):
    a = space.replica(tmp_path, "a")
    c = space.replica(tmp_path, "c", wrap=Hostile)
    try:
        for i in range(5):
            a.write(Entry(id=f"page/p{i}", title=f"p{i}", body="text\n" * 20))
        a.sync()
        c.transport.truncate("snapshot", at_byte=900, times=1)
        with pytest.raises(TransferFailed):
            c.sync()
        assert c.store.head() is None and not c.files()
        assert c.sync().snapshot
        assert c.files() == a.files() and c.store.digest() == a.store.digest()
    finally:
        a.close()
        c.close()


def test_broken_file_is_reported_never_published_or_overwritten(pair, space):
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
    assert space.live()[PAGE.id].body == "remote edit\n"
    assert len(space.batches()) == 2 and not space.batches(b)


def test_line_separator_characters_in_an_entry_do_not_cut_the_stream(pair, space, tmp_path):
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
    c = space.replica(tmp_path, "c")  # a new replica: through the snapshot
    try:
        assert c.sync().snapshot
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
