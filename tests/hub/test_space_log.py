"""The space log on the hub (hub/spacelog.py), on SQLite and PostgreSQL: every accepted
batch and every new epoch is a leaf, each head carries the checkpoint at that head, the
proofs served verify against it, and only a hub owner sets the witnesses (signed, a leaf of
the log, audited)."""

from __future__ import annotations

import json
from typing import Any

from shared import merkle, tlog
from shared.signed import parse_head
from shared.signing import new_private_key, public_b64
from tests.kit.wire import put, redeem


def _cp(hub: Any, head: dict[str, Any]) -> tlog.Checkpoint:
    note = tlog.parse_note(head["checkpoint"])
    assert tlog.hub_signed(note, hub.key.public)
    return tlog.parse_checkpoint(note.body)


def _proof(doc: dict[str, Any]) -> list[bytes]:
    return [bytes.fromhex(h) for h in doc["proof"]]


def test_every_batch_and_epoch_is_a_leaf_the_proofs_verify_and_owners_set_witnesses(
        hub_app: dict[str, Any]) -> None:
    hub = hub_app["hub"]
    owner = redeem(hub_app["client"], hub_app["code"], "owner")
    space = owner.create_space("logged")
    ed = redeem(hub_app["client"], owner.invite(space, "editor"), "ed")
    empty = _cp(hub, ed.head(space))
    assert (empty.size, empty.root) == (0, merkle.EMPTY_ROOT)
    assert empty.origin == tlog.origin_of(hub.key.public, space)
    cps = []
    for i in range(5):
        assert ed.publish(space, [put(f"page/p{i}", f"v{i}\n")]).status_code == 201
        cps.append(_cp(hub, ed.head(space)))
    assert [c.size for c in cps] == [1, 2, 3, 4, 5]
    for first in (0, 1, 3, 5):
        doc = ed.get(f"/v1/spaces/{space}/log/consistency?first={first}&second=5").json()
        merkle.verify_consistency(first, 5, cps[first - 1].root if first else merkle.EMPTY_ROOT,
                                  cps[4].root, _proof(doc))
        head = parse_head(hub.key.public, ed.head(space), space=space)
        assert tlog.leaf_at_head(doc["last"]["data"], epoch=head.epoch, seq=head.seq,
                                 head=head.digest)
    # a log as migration 0028 leaves it (leaves only, nothing built): heads and proofs
    # compute from the leaves, a proof builds it, and appends build as they go again
    def unbuilt(conn: Any) -> None:
        conn.exec_driver_sql(f"DELETE FROM log_nodes WHERE space_id = '{space}' AND level > 0")
        conn.exec_driver_sql(f"DELETE FROM space_logs WHERE space_id = '{space}'")

    hub.store.run_write(unbuilt)
    assert ed.publish(space, [put("page/late", "v\n")]).status_code == 201
    late = _cp(hub, ed.head(space))
    doc = ed.get(f"/v1/spaces/{space}/log/consistency?first=5&second=6").json()
    merkle.verify_consistency(5, 6, cps[4].root, late.root, _proof(doc))
    assert ed.publish(space, [put("page/later", "v\n")]).status_code == 201
    doc = ed.get(f"/v1/spaces/{space}/log/consistency?first=3&second=7").json()
    merkle.verify_consistency(3, 7, cps[2].root, _cp(hub, ed.head(space)).root, _proof(doc))
    cps += [late, _cp(hub, ed.head(space))]
    # a batch's inclusion in the log, at any later size
    h = ed.head(space)
    doc = ed.get(f"/v1/spaces/{space}/log/inclusion?epoch={h['epoch']}&seq=2&size=4").json()
    merkle.verify_inclusion(tlog.leaf_hash_of(doc["data"]), doc["index"], 4, _proof(doc),
                            cps[3].root)
    assert doc["data"]["seq"] == 2
    # a new epoch is one more leaf; the log runs on, consistent across it
    r = owner.post(f"/v1/spaces/{space}/epoch", {"reason": "test"})
    assert r.status_code == 200, r.text
    after = _cp(hub, owner.head(space))
    assert after.size == 8
    doc = owner.get(f"/v1/spaces/{space}/log/consistency?first=7&second=8").json()
    merkle.verify_consistency(7, 8, cps[6].root, after.root, _proof(doc))
    assert "statement" in doc["last"]["data"] and doc["last"]["data"]["seq"] == 0
    # sizes past the log, or backwards, are refused
    r = ed.get(f"/v1/spaces/{space}/log/consistency?first=3&second=99")
    assert r.status_code == 422 and r.json()["error"]["details"]["reason"] == "log_size"
    r = ed.get(f"/v1/spaces/{space}/log/consistency?first=4&second=2")
    assert r.status_code == 422
    _only_an_owner_sets_witnesses_signed_logged_and_audited(hub_app, owner)


def _only_an_owner_sets_witnesses_signed_logged_and_audited(hub_app: dict[str, Any],
                                                            owner: Any) -> None:
    hub = hub_app["hub"]
    space = owner.create_space("witnessed")
    admin = redeem(hub_app["client"], owner.invite(space, "admin"), "admin")
    w = {"name": "w1", "key": public_b64(new_private_key()), "url": "http://w1"}
    body = {"quorum": 1, "witnesses": [w], "reason": "one witness"}
    r = admin.post(f"/v1/spaces/{space}/witnesses", body)
    assert r.status_code == 403, r.text  # a space admin is not a hub owner
    r = owner.post(f"/v1/spaces/{space}/witnesses", dict(body, quorum=2))
    assert r.status_code == 422  # more than the witnesses listed
    r = owner.post(f"/v1/spaces/{space}/witnesses", body)
    assert r.status_code == 200, r.text
    policy = tlog.parse_policy(hub.key.public, r.json()["policy"], space=space)
    assert policy.quorum == 1 and policy.witnesses[0].key == w["key"]
    cp = _cp(hub, admin.head(space))
    assert cp.policy == policy.digest and cp.size == 1  # the policy's leaf
    listed = admin.get(f"/v1/spaces/{space}/witnesses").json()["policies"]
    assert [tlog.parse_policy(hub.key.public, p, space=space).n for p in listed] == [1]
    text = owner.get(f"/v1/audit?space={space}").text
    events = [e for e in (json.loads(x) for x in text.splitlines() if x.strip())
              if e.get("action") == "witnesses.set"]
    assert len(events) == 1 and events[0]["details"]["digest"] == policy.digest
