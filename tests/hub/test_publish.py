"""Publication, pull and snapshot through the guard, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from typing import Any

from shared.digest import verify_chain
from shared.ids import new_id
from shared.signed import parse_head
from shared.state import root_of_entries
from shared.wire import verify_receipt
from tests.kit.wire import delete, ndjson, put, redeem


def setup_space(h: dict[str, Any]) -> tuple[Any, Any, str]:
    owner = redeem(h["client"], h["code"], "owner-laptop")
    space = owner.create_space("team")
    editor = redeem(h["client"], owner.invite(space, "editor"), "editor-laptop")
    return owner, editor, space


def test_publish_pull_and_snapshot_agree(hub_app: dict[str, Any]) -> None:
    owner, ed, space = setup_space(hub_app)
    r = ed.publish(space, [put("page/deploy", "v1\n"), put("skill/rollback", "steps\n")])
    assert r.status_code == 201, r.text
    receipt = r.json()["receipt"]
    assert receipt["seq"] == 1
    assert verify_receipt(hub_app["hub"].key.public, receipt)
    v1 = put("page/deploy", "v1\n").entry.version
    r = ed.publish(space, [put("page/deploy", "v2\n", base=v1), put("note/x", "n\n")])
    assert r.status_code == 201, r.text
    r = ed.publish(space, [delete("note/x", put("note/x", "n\n").entry.version)])
    assert r.status_code == 201, r.text

    lines = ndjson(ed.get(f"/v1/spaces/{space}/changes?after=0").text)
    assert lines[-1]["end"]["seq"] == 3 and lines[-1]["end"]["more"] is False
    head = ed.head(space)
    verify_chain(space, head["epoch"], [(x["seq"], x["batch"]["digest"], x["head"])
                                        for x in lines[:-1]])
    assert lines[-2]["head"] == head["digest"]
    after1 = ndjson(ed.get(f"/v1/spaces/{space}/changes?after=1").text)
    assert [x["seq"] for x in after1[:-1]] == [2, 3]
    limited = ndjson(ed.get(f"/v1/spaces/{space}/changes?after=0&limit=1").text)
    end = dict(limited[-1]["end"])
    signed_end = end.pop("head")
    assert end == {"seq": 1, "head_seq": 3, "epoch": head["epoch"], "more": True}
    # every page ends at a head the hub key signed, with the state root at that seq
    key = hub_app["hub"].key.public
    at1 = parse_head(key, signed_end, space=space)
    assert (at1.seq, at1.digest) == (1, lines[0]["head"])
    assert at1.state == root_of_entries([(x["entry"]["id"], put(x["entry"]["id"],
                                          x["entry"]["body"]).entry.version)
                                         for x in lines[0]["batch"]["ops"]])
    assert parse_head(key, lines[-1]["end"]["head"], space=space).state == head["state"]

    snap = ndjson(ed.get(f"/v1/spaces/{space}/snapshot").text)
    assert snap[0]["head"]["seq"] == 3
    assert [x["entry"]["id"] for x in snap[1:-1]] == ["page/deploy", "skill/rollback"]
    assert snap[-1]["end"]["count"] == 2
    # replaying the changes gives the snapshot
    state: dict[str, Any] = {}
    for line in lines[:-1]:
        for op in line["batch"]["ops"]:
            if op["op"] == "put":
                state[op["entry"]["id"]] = op["entry"]
            else:
                state.pop(op["id"])
    assert state == {x["entry"]["id"]: x["entry"] for x in snap[1:-1]}
    # the signed state root is the root a replica computes from the snapshot's entries
    snap_head = parse_head(key, snap[0]["head"], space=space)
    assert snap_head.state == head["state"] == root_of_entries(
        (x["entry"]["id"], x["version"]) for x in snap[1:-1])


def test_push_with_stale_parent_is_refused(hub_app: dict[str, Any]) -> None:
    _, ed, space = setup_space(hub_app)
    stale = ed.head(space)
    assert ed.publish(space, [put("page/a")]).status_code == 201
    r = ed.publish(space, [put("page/b")], head=stale)
    assert r.status_code == 409 and r.json()["error"]["code"] == "head_changed"
    assert ed.head(space)["seq"] == 1


def test_push_with_wrong_base_is_refused(hub_app: dict[str, Any]) -> None:
    _, ed, space = setup_space(hub_app)
    assert ed.publish(space, [put("page/a", "one\n")]).status_code == 201
    r = ed.publish(space, [put("page/a", "two\n", base=None)])
    assert r.json()["error"]["code"] == "base_mismatch", r.text
    r = ed.publish(space, [put("page/a", "two\n", base="0" * 64)])
    assert r.json()["error"]["code"] == "base_mismatch"
    r = ed.publish(space, [delete("page/zzz", "0" * 64)])
    assert r.json()["error"]["code"] == "base_mismatch"


def test_replayed_batch_returns_the_same_receipt(hub_app: dict[str, Any]) -> None:
    _, ed, space = setup_space(hub_app)
    body = ed.batch(space, [put("page/a")])
    r1 = ed.post(f"/v1/spaces/{space}/batches", body)
    assert r1.status_code == 201
    assert ed.publish(space, [put("page/b")]).status_code == 201
    r2 = ed.post(f"/v1/spaces/{space}/batches", body)  # stale parent, but already accepted
    assert r2.status_code == 200
    assert r2.json()["replayed"] is True
    assert r2.json()["receipt"] == r1.json()["receipt"]
    rec = ed.get(f"/v1/spaces/{space}/receipts/{body['replica_id']}/{body['batch_id']}")
    assert rec.json()["receipt"] == r1.json()["receipt"]
    assert ed.head(space)["seq"] == 2


def test_same_batch_id_with_other_content_is_batch_conflict(hub_app: dict[str, Any]) -> None:
    _, ed, space = setup_space(hub_app)
    bid = new_id()
    assert ed.publish(space, [put("page/a")], batch_id=bid).status_code == 201
    r = ed.publish(space, [put("page/other")], batch_id=bid)
    assert r.status_code == 409 and r.json()["error"]["code"] == "batch_conflict"


def test_viewer_cannot_publish(hub_app: dict[str, Any]) -> None:
    owner, _, space = setup_space(hub_app)
    viewer = redeem(hub_app["client"], owner.invite(space, "viewer"), "viewer")
    r = viewer.publish(space, [put("page/a")])
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    assert viewer.get(f"/v1/spaces/{space}/snapshot").status_code == 200


def test_used_or_expired_invite_is_refused(hub_app: dict[str, Any]) -> None:
    owner, _, space = setup_space(hub_app)
    code = owner.invite(space, "editor")
    redeem(hub_app["client"], code, "first")
    from shared.signing import new_private_key, public_b64

    body = {"code": code, "device_name": "second", "device_key": public_b64(new_private_key())}
    r = hub_app["client"].post("/v1/invites/redeem", json=body)
    assert r.status_code == 403 and r.json()["error"]["details"]["reason"] == "invite_used"
    expiring = owner.invite(space, "editor", ttl=60)
    hub = hub_app["hub"]
    real = hub.now
    hub.now = lambda: real() + 61_000
    try:
        r = hub_app["client"].post("/v1/invites/redeem", json=dict(body, code=expiring))
    finally:
        hub.now = real
    assert r.status_code == 403 and r.json()["error"]["details"]["reason"] == "invite_expired"


def test_role_lowered_during_prepare_blocks_publication(hub_app: dict[str, Any]) -> None:
    """The guard re-reads the role at commit: a role lowered after preparation wins."""
    owner, ed, space = setup_space(hub_app)
    hub = hub_app["hub"]
    from hub.store.principals import set_member_txn

    def lower_role(_batch: Any) -> None:
        # another connection, committed before the guard's transaction starts
        hub.store.run_write(lambda c: set_member_txn(c, space, ed.user_id, "viewer", 0))

    before = _counts(hub)
    hub_app["hooks"].after_prepare = lower_role
    r = ed.publish(space, [put("page/a")])
    hub_app["hooks"].after_prepare = None
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", r.text
    assert _counts(hub)["batches"] == before["batches"]
    assert _counts(hub)["entries"] == before["entries"]


def test_member_removed_during_prepare_blocks_publication(hub_app: dict[str, Any]) -> None:
    _, ed, space = setup_space(hub_app)
    hub = hub_app["hub"]
    from hub.store.principals import remove_member_txn

    ed.replica(space)
    hub_app["hooks"].after_prepare = lambda _b: hub.store.run_write(
        lambda c: remove_member_txn(c, space, ed.user_id))
    r = ed.publish(space, [put("page/a")])
    hub_app["hooks"].after_prepare = None
    # not a member any more: the space is not found for them (its existence is not leaked)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", r.text
    assert _counts(hub)["batches"] == 0


def test_device_revoked_during_prepare_blocks_publication(hub_app: dict[str, Any]) -> None:
    """The guard re-reads the device at commit: a device revoked after preparation (through
    the admin API, another connection) cannot publish, and nothing is written."""
    owner, ed, space = setup_space(hub_app)
    ed.replica(space)
    _revoked_after_prepare(hub_app, owner, ed, space, f"/v1/devices/{ed.device_id}/revoke",
                           401, "device_revoked")


def _revoked_after_prepare(hub_app: dict[str, Any], owner: Any, ed: Any, space: str,
                           revoke_path: str, status: int, reason: str) -> None:
    """``ed`` publishes while the owner revokes (POST ``revoke_path``) between the guard's
    preparation and its commit: refused with ``status``/``reason``, nothing written."""
    hub = hub_app["hub"]

    def revoke(_batch: Any) -> None:
        r = owner.post(revoke_path, {})
        assert r.status_code == 200, r.text

    before = _counts(hub)
    hub_app["hooks"].after_prepare = revoke
    r = ed.publish(space, [put("page/a")])
    hub_app["hooks"].after_prepare = None
    assert r.status_code == status, r.text
    assert r.json()["error"]["details"]["reason"] == reason
    after = _counts(hub)
    assert (after["batches"], after["entries"]) == (before["batches"], before["entries"])


def test_epoch_bump_during_prepare_blocks_publication(hub_app: dict[str, Any]) -> None:
    owner, ed, space = setup_space(hub_app)
    hub = hub_app["hub"]
    ed.replica(space)
    done = threading.Event()

    def bump(_batch: Any) -> None:
        r = owner.post(f"/v1/spaces/{space}/epoch", {"reason": "test"})
        assert r.status_code == 200, r.text
        done.set()

    hub_app["hooks"].after_prepare = bump
    r = ed.publish(space, [put("page/a")])
    hub_app["hooks"].after_prepare = None
    assert done.is_set()
    assert r.status_code == 409 and r.json()["error"]["code"] == "epoch_changed", r.text
    assert _counts(hub)["batches"] == 0
    assert ed.head(space)["seq"] == 0


def test_replica_revoked_during_prepare_blocks_publication(hub_app: dict[str, Any]) -> None:
    """The guard re-reads the replica at commit (with its other re-reads, in one
    statement): a replica revoked after preparation cannot publish, nothing is written."""
    owner, ed, space = setup_space(hub_app)
    replica = ed.replica(space)
    _revoked_after_prepare(hub_app, owner, ed, space,
                           f"/v1/spaces/{space}/replicas/{replica}/revoke", 403,
                           "replica_revoked")


def test_the_same_batch_accepted_during_prepare_is_answered_as_its_replay(
        hub_app: dict[str, Any]) -> None:
    """Two requests with one batch: the second, prepared before the first landed, finds it
    at commit and answers the first's receipt byte for byte (one batch, one receipt)."""
    _, ed, space = setup_space(hub_app)
    hub = hub_app["hub"]
    body = ed.batch(space, [put("page/once")])
    first: list[Any] = []

    def land_first(_batch: Any) -> None:
        hub_app["hooks"].after_prepare = None  # the inner request goes straight through
        first.append(ed.post(f"/v1/spaces/{space}/batches", body))

    hub_app["hooks"].after_prepare = land_first
    r = ed.post(f"/v1/spaces/{space}/batches", body)
    hub_app["hooks"].after_prepare = None
    assert first and first[0].status_code == 201, first and first[0].text
    assert r.status_code == 200 and r.json()["replayed"] is True, r.text
    assert r.json()["receipt"] == first[0].json()["receipt"]
    assert _counts(hub)["batches"] == 1


def _counts(hub: Any) -> dict[str, int]:
    from hub.store.schema import count_rows_txn

    with hub.store.read() as conn:
        return count_rows_txn(conn)


# ---------------------------------------------------------------- rebase on publish


def _rebase(ed: Any, space: str, body: dict[str, Any]) -> Any:
    return ed.post(f"/v1/spaces/{space}/batches?rebase=1", body)


def test_rebase_accepts_a_batch_made_on_an_earlier_head_without_touching_its_entries(
        hub_app: dict[str, Any]) -> None:
    """Unrelated writers no longer serialize on the head: the batch is chained on the
    current head, keeps the parent it was made on, and the chain still verifies."""
    _, ed, space = setup_space(hub_app)
    genesis = ed.head(space)
    assert ed.publish(space, [put("page/a", "one\n")]).status_code == 201
    at1 = ed.head(space)
    assert ed.publish(space, [put("page/b")]).status_code == 201
    body = ed.batch(space, [put("page/a", "two\n", base=put("page/a", "one\n").entry.version)],
                    head=at1)
    r = _rebase(ed, space, body)
    assert r.status_code == 201, r.text
    receipt = r.json()["receipt"]
    assert receipt["seq"] == 3 and verify_receipt(hub_app["hub"].key.public, receipt)
    # from genesis too
    r = _rebase(ed, space, ed.batch(space, [put("page/c")], head=genesis))
    assert r.status_code == 201, r.text
    lines = ndjson(ed.get(f"/v1/spaces/{space}/changes?after=0").text)[:-1]
    verify_chain(space, genesis["epoch"], [(x["seq"], x["batch"]["digest"], x["head"])
                                           for x in lines])
    assert lines[2]["batch"]["parent"] == {"seq": 1, "digest": at1["digest"]}
    assert lines[2]["head"] == receipt["head"] and ed.head(space)["seq"] == 4
    # a replay of the rebased batch is the same receipt, not a second acceptance
    again = _rebase(ed, space, body)
    assert again.status_code == 200 and again.json()["receipt"] == receipt
    # without the parameter the very same kind of batch is strict compare-and-swap
    r = ed.publish(space, [put("page/d")], head=at1)
    assert r.status_code == 409 and r.json()["error"]["code"] == "head_changed"
    assert r.json()["error"]["details"]["seq"] == 4


def test_rebase_still_refuses_a_stale_base(hub_app: dict[str, Any]) -> None:
    _, ed, space = setup_space(hub_app)
    assert ed.publish(space, [put("page/a", "one\n")]).status_code == 201
    at1 = ed.head(space)
    v1 = put("page/a", "one\n").entry.version
    assert ed.publish(space, [put("page/a", "two\n", base=v1)]).status_code == 201
    before = _counts(hub_app["hub"])
    r = _rebase(ed, space, ed.batch(space, [put("page/a", "three\n", base=v1)], head=at1))
    assert r.status_code == 409 and r.json()["error"]["code"] == "base_mismatch", r.text
    assert _counts(hub_app["hub"]) == before and ed.head(space)["seq"] == 2


def test_rebase_refuses_a_parent_the_hub_never_had(hub_app: dict[str, Any]) -> None:
    _, ed, space = setup_space(hub_app)
    assert ed.publish(space, [put("page/a")]).status_code == 201
    assert ed.publish(space, [put("page/b")]).status_code == 201
    h = ed.head(space)
    before = _counts(hub_app["hub"])
    for parent in ({"seq": 1, "digest": "a" * 64},      # a seq it had, another digest
                   {"seq": 0, "digest": "b" * 64},      # not this epoch's genesis
                   {"seq": 3, "digest": h["digest"]},   # a head it has not reached
                   {"seq": 2, "digest": "c" * 64}):     # the current seq, another digest
        fake = dict(h, seq=parent["seq"], digest=parent["digest"])
        r = _rebase(ed, space, ed.batch(space, [put("page/c")], head=fake))
        assert r.status_code == 409, (parent, r.text)
        err = r.json()["error"]
        assert err["code"] == "head_changed" and err["details"]["seq"] == 2, parent
    assert _counts(hub_app["hub"]) == before


def test_publish_refuses_unknown_or_malformed_query_parameters(hub_app: dict[str, Any]
                                                               ) -> None:
    _, ed, space = setup_space(hub_app)
    body = ed.batch(space, [put("page/a")])
    before = _counts(hub_app["hub"])
    for qs in ("rebase=yes", "rebase=", "rebase=1&rebase=1", "force=1"):
        r = ed.post(f"/v1/spaces/{space}/batches?{qs}", body)
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", qs
    assert _counts(hub_app["hub"]) == before
    assert ed.post(f"/v1/spaces/{space}/batches?rebase=0", body).status_code == 201
