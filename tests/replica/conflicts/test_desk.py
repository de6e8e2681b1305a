"""The desk on a real store and vault, without a hub: claims under an injected clock,
resolutions applied into the held state, staleness from local edits, the publication plan."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replica.conflicts.desk import Desk, packet_digest, plan_batch
from replica.conflicts.packets import keep_both_id
from replica.engine.markers import conflict_marker
from replica.engine.merge import merge_entry
from replica.machine.home import SpaceConfig
from replica.store import store as st
from replica.store.store import Conflict, EntryState, Store
from replica.vault import markdown as md
from shared.entry import make_entry
from shared.errors import ClaimHeld, InvalidRequest, NotFound, PacketStale
from shared.ids import new_id
from shared.wire import Op

EID = "page/deploy"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def e(body: str, eid: str = EID):
    return make_entry({"id": eid, "title": "Deploy", "body": body})


@pytest.fixture
def space(tmp_path: Path) -> SpaceConfig:
    sp = SpaceConfig(new_id(), "t", new_id(), new_id(), tmp_path / "vault", "editor",
                     tmp_path / "space")
    sp.dir.mkdir(parents=True)
    base, ours, theirs = e("one\n"), e("one (ours)\n"), e("one (theirs)\n")
    r = merge_entry(base, ours, theirs)
    c = Conflict(EID, list(r.conflicts), base, ours, theirs,
                 {"user": "u2", "device": "d2", "agent": None}, 3, r.body_with_markers, 1)
    store = Store(sp.store_path)
    data = md.render(ours, conflict_marker(c))
    path = md.entry_path(sp.vault, EID)
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    with store.tx() as conn:
        st.put_state_txn(conn, EntryState(EID, theirs, ours, md.file_hash(data), None, None,
                                          True))
        st.put_conflict_txn(conn, c)
        st.set_meta_txn(conn, "access", {"role": "editor", "rules": []})
    store.close()
    return sp


def test_claim_is_exclusive_until_the_lease_expires_then_anyone_may_take_it(space):
    clock = Clock()
    with Desk(space, clock=clock) as d:
        pid = d.list_packets()[0]["packet_id"]
        a = d.claim(pid, "ann", ttl=10)
        assert a["expires_at"] == clock.now + 10_000
        with pytest.raises(ClaimHeld) as held:
            d.claim(pid, "ben")
        assert held.value.details == {"holder": "ann", "expires_at": a["expires_at"],
                                      "packet_id": pid}
        clock.now += 9_000
        d.renew(pid, a["token"], 10)
        clock.now += 9_000
        with pytest.raises(ClaimHeld):
            d.claim(pid, "ben")
        clock.now += 2_000
        b = d.claim(pid, "ben", ttl=5)
        with pytest.raises(ClaimHeld):
            d.renew(pid, a["token"])  # ann's lease was taken over
        with pytest.raises(InvalidRequest):
            d.claim(pid, "ben", ttl=0)
        with pytest.raises(InvalidRequest):
            d.claim(pid, "not a name!")
        d.release(pid, b["token"])
        assert d.list_packets()[0]["claim"] is None


def test_resolution_needs_the_live_claims_token_and_names_its_agent(space):
    clock = Clock()
    with Desk(space, clock=clock) as d:
        pkt = d.show(EID)
        claim = d.claim(EID, "ann")
        with pytest.raises(ClaimHeld):
            d.resolve(EID, digest=pkt["digest"], how="theirs")
        with pytest.raises(ClaimHeld):
            d.resolve(EID, digest=pkt["digest"], how="theirs", token="forged")
        r = d.resolve(EID, digest=pkt["digest"], how="merged", token=claim["token"],
                      merged=e("one (ours and theirs)\n"))
        assert r["agent"] == "ann" and r["publish"] == "on the next sync"
        with pytest.raises(NotFound):
            d.show(pkt["packet_id"])  # closed
        store = d.store
        s = store.states()[EID]
        assert not s.held and s.local.body == "one (ours and theirs)\n"
        assert store.conflicts() == []
        assert md.entry_path(space.vault, EID).read_text().endswith("one (ours and theirs)\n")
        # the next batch carries the resolution alone, naming its packet; the agent it
        # names is the publishing principal's own, never the resolver's label (the hub
        # refuses a batch naming another agent than its caller: hub/guard.py)
        ops, prov = plan_batch(store, [Op(s.local, s.synced.version),
                                       Op(e("x\n", "page/other"), None)], {"agent": "cli"})
        assert [op.entry_id for op in ops] == [EID]
        assert prov["agent"] == "cli" and pkt["packet_id"] in prov["note"]
        assert prov["tool"] == "quire conflict resolve"
        ops, prov = plan_batch(store, [Op(s.local, s.synced.version)], None)
        assert "agent" not in prov  # a device's batch names no agent
        # an edit made after the resolution is not attributed to the resolving agent
        later = [Op(e("edited later\n"), s.synced.version)]
        assert plan_batch(store, later, {"agent": "cli"}) == (later, {"agent": "cli"})


def test_local_edit_of_the_held_file_makes_the_packet_stale(space):
    with Desk(space, clock=Clock()) as d:
        pkt = d.show(EID)
        path = md.entry_path(space.vault, EID)
        path.write_text(path.read_text().replace("one (ours)", "one (ours, edited)"))
        with pytest.raises(PacketStale) as stale:
            d.resolve(pkt["packet_id"], digest=pkt["digest"], how="ours")
        fresh = d.show(stale.value.details["packet_id"])
        assert fresh["ours"]["body"]["text"] == "one (ours, edited)\n"
        assert fresh["digest"] == packet_digest(d.open_conflicts()[0])
        d.resolve(fresh["packet_id"], digest=fresh["digest"], how="ours")
        assert d.store.states()[EID].local.body == "one (ours, edited)\n"


def test_keep_both_refuses_to_overwrite_an_existing_entry(space):
    with Desk(space, clock=Clock()) as d:
        pkt = d.show(EID)
        taken = keep_both_id(EID, e("one (ours)\n"))
        with d.store.tx() as conn:
            st.put_state_txn(conn, EntryState(taken, None, e("someone's\n", taken)))
        with pytest.raises(InvalidRequest):
            d.resolve(EID, digest=pkt["digest"], how="keep_both")
        assert d.list_packets()[0]["digest"] == pkt["digest"]  # nothing applied


_RACER = """
import json, sys, time
from pathlib import Path
from replica.conflicts.desk import Desk
from replica.machine.home import SpaceConfig
from shared.errors import QuireError
args = json.loads(sys.argv[1])
space = SpaceConfig(args["id"], "t", args["hub"], args["replica"], Path(args["vault"]), "editor",
                    Path(args["dir"]))
desk = Desk(space)
time.sleep(max(0.0, args["start"] - time.time()))  # everyone claims at the same instant
try:
    print(json.dumps({"ok": desk.claim("page/deploy", args["agent"], ttl=60)}))
except QuireError as e:
    print(json.dumps({"error": e.code, "details": e.details}))
"""


def test_many_processes_claiming_at_the_same_instant_yield_exactly_one_holder(space):
    start = time.time() + 4
    procs = [subprocess.Popen(
        [sys.executable, "-c", _RACER, json.dumps({
            "id": space.space_id, "hub": space.hub_id, "replica": space.replica_id,
            "vault": str(space.vault), "dir": str(space.dir), "start": start,
            "agent": f"racer-{i}"})],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[3]) for i in range(5)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    winners = [r["ok"] for r in results if "ok" in r]
    losers = [r for r in results if "error" in r]
    assert len(winners) == 1 and len(losers) == 4
    assert all(r["error"] == "claim_held" and r["details"]["holder"] == winners[0]["agent"]
               and r["details"]["expires_at"] == winners[0]["expires_at"] for r in losers)
