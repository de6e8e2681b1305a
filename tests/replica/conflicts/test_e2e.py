"""End-to-end: real ``quire hub serve`` processes, the real CLI, and an agent driving
``quire mcp`` over stdio with the official MCP client. Each test builds its own scene (a new
space where two members made overlapping edits to the entries it needs), so every test runs
alone and in any order."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from replica.app.service import open_desk, run_sync
from replica.conflicts.packets import packet_page
from replica.machine.home import Home
from replica.mcp.server import TOOLS
from replica.vault import markdown as md
from shared.errors import ClaimHeld, PacketStale, PolicyDenied
from tests.kit.cli import QUIRE, CliMember, CliTeam, qjson, quire
from tests.kit.host import REPO
from tests.kit.mcp_answer import answer
from tests.replica.conflicts.conftest import entry

pytestmark = pytest.mark.e2e

BIG_BASE = "".join(f"line {i}: the deploy checklist says – café ✓\n" for i in range(5000))
# entry -> (base, alice's edit, bob's edit); None = the file is deleted
SCENE = {
    "page/deploy": ("step one\nstep two\n", "step one (alice)\nstep two\n",
                    "step one (bob)\nstep two\n"),
    "page/big": (BIG_BASE, "OURS\n" + BIG_BASE + "ours\n", "THEIRS\n" + BIG_BASE + "theirs\n"),
    "page/both": ("v1\n", "alice's v2\n", "bob's v2\n"),
    "note/keep-edit": ("n1\n", "alice edited\n", None),
    "note/keep-delete": ("n1\n", None, "bob edited\n"),
    "page/stale": ("s1\n", "alice s2\n", "bob s2\n"),
    "page/crash": ("c1\n", "alice c2\n", "bob c2\n"),
    "page/crash-late": ("c1\n", "alice c2\n", "bob c2\n"),
    "page/claim": ("k1\n", "alice k2\n", "bob k2\n"),
    "guardrail/no-force-push": ("g1\n", "alice g2\n", "bob g2\n"),
    # three candidates of ~16 KB each: inline they would not fit one MCP answer
    "page/huge": tuple(f"{who} first line\n" + "".join(
        f"{who} line {i}: é ✓ and some more words to fill\n" for i in range(318))
        for who in ("base", "alice", "bob")),
}
GUARD = "guardrail/no-force-push"
# alice lowers the severity while bob edits the same line: resolving with ours would weaken it
SEVERITY = {GUARD: ("block", "warn", "block")}


def sync(m: CliMember) -> dict[str, Any]:
    home = Home(m.home)
    report, status = run_sync(home, home.spaces()[0])
    return dict(status, sync=report.to_json())


def desk(m: CliMember):
    home = Home(m.home)
    return open_desk(home, home.spaces()[0])


def put(m: CliMember, eid: str, body: str | None, side: int = 0) -> None:
    if body is None:
        m.path(eid).unlink()
    elif eid in SEVERITY:
        m.write(entry(eid, body, meta={"severity": SEVERITY[eid][side]}))
    else:
        m.write(entry(eid, body))


@dataclass
class Scene:
    team: CliTeam
    alice: CliMember
    bob: CliMember


_spaces = itertools.count(1)


def make_scene(hub, owner, root, eids: tuple[str, ...]) -> Scene:
    """A fresh space where alice and bob made overlapping edits to each of ``eids``: bob
    published first, so alice holds a packet for every one of them."""
    team = CliTeam(hub, owner, root, f"conf{os.getpid() % 10000}-{next(_spaces)}")
    alice, bob = team.members("alice", "bob")
    if GUARD in eids:
        # this space lets editors change guardrails (the typed default lets only admins
        # weaken one); the guardrail test adds a deny rule, which wins the tie on the glob
        qjson(team.owner, "admin", "rules", "add", team.name, "--allow", "update,delete",
              "--who", "editor", "--entries", "guardrail/*")
    for eid in eids:
        put(alice, eid, SCENE[eid][0])
    sync(alice)
    sync(bob)
    for eid in eids:
        put(bob, eid, SCENE[eid][2], 2)
    sync(bob)
    for eid in eids:
        put(alice, eid, SCENE[eid][1], 1)
    held = sync(alice)["sync"]["held"]
    assert sorted(held) == sorted(eids)  # the later syncer holds every overlapping edit
    with desk(bob) as d:
        assert d.list_packets() == []  # the earlier one published and holds nothing
    return Scene(team, alice, bob)


@pytest.fixture
def scene_of(hub, owner, tmp_path) -> Callable[..., Scene]:
    return lambda *eids: make_scene(hub, owner, tmp_path, eids)


def packet_for(m: CliMember, eid: str) -> dict[str, Any] | None:
    """The open packet of ``eid`` (in-process: the CLI's list is covered once below)."""
    with desk(m) as d:
        rows = [p for p in d.list_packets() if p["entry"] == eid]
    assert len(rows) <= 1, rows
    return rows[0] if rows else None


# ---------------------------------------------------------------- the agent over MCP


def _mcp(m: CliMember, agent: str) -> StdioServerParameters:
    env = {"QUIRE_HOME": str(m.home), "PATH": os.environ.get("PATH", "")}
    return StdioServerParameters(command=QUIRE[0],
                                 args=[*QUIRE[1:], "mcp", "--agent", agent, "--write"],
                                 env=env, cwd=str(REPO))


async def _call(client: Client, name: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    r = await client.call_tool(name, args)
    return r.is_error, answer(r)


async def _agent_session(alice: CliMember) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with Client(_mcp(alice, "merge-bot")) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == set(TOOLS)
        assert all(len(t.description or "") > 60 for t in tools.values())
        assert all(t.input_schema.get("additionalProperties") is False for t in tools.values())
        assert tools["conflict_resolve"].input_schema["required"] == [
            "packet", "digest", "resolution"]

        err, st = await _call(client, "status", {})
        assert not err and any("conflict packet" in s for s in st["signals"])
        err, lst = await _call(client, "conflicts_list", {})
        assert not err
        pid = next(p["packet_id"] for p in lst["packets"] if p["entry"] == "page/deploy")
        err, pkt = await _call(client, "conflict_show", {"packet": pid})
        assert not err and "not instructions" in pkt["notice"]
        assert "<<<<<<< ours" in pkt["merged_body"]["text"]
        assert pkt["theirs"]["author"]["by"] and pkt["theirs"]["seq"]

        # writing an entry that is in conflict is refused
        err, w = await _call(client, "write", {"entry_id": "page/deploy", "title": "x",
                                               "body": "y"})
        assert err and pid in json.dumps(w)

        err, claimed = await _call(client, "conflict_claim", {"packet": pid})
        assert not err and claimed["packet"]["digest"] == pkt["digest"]  # the packet with it
        claim = claimed["claim"]
        assert claim["agent"] == "merge-bot" and claim["token"]
        err, again = await _call(client, "conflict_claim", {"packet": pid})
        assert not err and again["claim"]["token"] == claim["token"]  # same session: same claim
        # a session claims only as its own agent: no argument names another one
        err, other = await _call(client, "conflict_claim", {"packet": pid, "agent": "rival"})
        assert err and other["error"]["code"] == "invalid_request"
        assert other["error"]["details"]["fields"][0]["field"] == "agent"
        err, renew = await _call(client, "conflict_claim", {"packet": pid,
                                                            "renew_token": claim["token"]})
        assert not err and renew["claim"]["expires_at"] >= claim["expires_at"]

        # resolving without the token, with a wrong digest, or with markers left is refused
        merged = {"title": "Deploy", "body": "step one (alice and bob)\nstep two\n",
                  "tags": [], "links": [], "meta": {}}
        err, r = await _call(client, "conflict_resolve", {
            "packet": pid, "digest": pkt["digest"], "resolution": "merged", "merged": merged})
        assert err and r["error"]["code"] == "claim_held"
        err, r = await _call(client, "conflict_resolve", {
            "packet": pid, "digest": "0" * 64, "resolution": "merged", "merged": merged,
            "claim_token": claim["token"]})
        assert err and r["error"]["code"] == "packet_stale"
        assert r["error"]["details"]["packet_id"] == pid
        err, r = await _call(client, "conflict_resolve", {
            "packet": pid, "digest": pkt["digest"], "resolution": "merged",
            "claim_token": claim["token"],
            "merged": dict(merged, body=pkt["merged_body"]["text"])})
        assert err and r["error"]["code"] == "invalid_request"

        err, r = await _call(client, "conflict_resolve", {
            "packet": pid, "digest": pkt["digest"], "resolution": "merged", "merged": merged,
            "claim_token": claim["token"]})
        assert not err, r
        err, s = await _call(client, "sync", {})
        assert not err and s["pushed_changes"] == 1

        # recall and record
        err, w = await _call(client, "write", {"entry_id": "skill/merge-notes", "title":
                                               "How we merged the deploy page",
                                               "body": "Keep both authors' step one.\n",
                                               "tags": ["merging"]})
        assert not err and w["created"] and any("not yet published" in x for x in w["signals"])
        err, found = await _call(client, "search", {"query": "merged deploy"})
        assert not err and found["results"][0]["id"] == "skill/merge-notes"
        err, rd = await _call(client, "read", {"entry_id": "page/deploy"})
        assert not err and rd["body"] == merged["body"] and not rd["in_conflict"]
        err, rd2 = await _call(client, "read", {"entry_id": "page/big", "max_chars": 100})
        assert not err and rd2["in_conflict"] and rd2["more"] and len(rd2["body"]) == 100
        err, _ = await _call(client, "sync", {})
        assert not err

        # invalid input: each tool refuses it with an error result, nothing changes
        invalid = {
            "status": {"verbose": "please"},
            "sync": {"force": True},
            "search": {"query": ""},
            "read": {"entry_id": "../../etc/passwd"},
            "write": {"entry_id": "page/../x", "title": "t", "body": "b"},
            "conflicts_list": {"limit": "all"},
            "conflict_show": {"packet": "pk-doesnotexist0000000"},
            "conflict_claim": {"packet": pid, "ttl_seconds": 0},
            "conflict_resolve": {"packet": pid, "digest": "d", "resolution": "maybe"},
            "conflict_release": {"packet": "page/claim", "claim_token": "not-mine"},
            "bootstrap_world_model": {"space": "", "max_bytes": 1},
            "delete": {"entry_id": "page/none"},
            "revert_local": {"entry_ids": ["page/deploy"], "all": True},
            "restore": {"entry_id": "page/deploy", "seq": -1},
            "history": {"entry_id": "page/../x"},
            "activity": {"limit": 0},
            "list_entries": {"kind": "page", "folder": "skill/x"},
            "read_many": {"entry_ids": []},
            "read_lines": {"entry_id": "page/deploy", "start": 0},
            "edit": {"entry_id": "page/deploy", "replace_text": {"old": "zzz-absent",
                                                                 "new": "x"}},
            "links": {"entry_id": "page/deploy", "direction": "sideways"},
            "propose": {"entry_id": "page/deploy", "reason": ""},
            "proposals": {"state": "maybe"},
            "withdraw": {"proposal": ""},
        }
        assert set(invalid) == set(TOOLS)
        for name, args in invalid.items():
            err, doc = await _call(client, name, args)
            seen[name] = (err, doc)
        # a valid release: claim another packet, then let it go
        err, c2 = await _call(client, "conflict_claim", {"packet": "page/both"})
        assert not err
        err, rel = await _call(client, "conflict_release", {"packet": "page/both",
                                                            "claim_token": c2["claim"]["token"]})
        assert not err and rel["released"]
    return seen


def test_agent_over_mcp_claims_resolves_and_syncs_and_hub_history_names_it(scene_of):
    scene = scene_of("page/deploy", "page/big", "page/both", "page/claim")
    alice, bob = scene.alice, scene.bob
    seen = asyncio.run(_agent_session(alice))
    accepted = {n for n, (err, _) in seen.items() if not err}
    assert not accepted, accepted  # unknown arguments included: never silently dropped
    # argument errors included: one documented form, {"error": {code, message, details}}
    for name, (_, doc) in seen.items():
        assert set(doc["error"]) == {"code", "message", "details"}, (name, doc)
        assert "signals" in doc, name

    sync(bob)
    assert bob.read("page/deploy").body == "step one (alice and bob)\nstep two\n"
    assert alice.read("page/deploy").body == bob.read("page/deploy").body
    assert bob.read("skill/merge-notes") is not None
    resolved = [b for b in scene.team.batches(bob)
                if [op.get("entry", {}).get("id") for op in b["ops"]] == ["page/deploy"]
                and b["replica_id"] == alice.replica_id()]
    assert resolved and resolved[-1]["provenance"]["agent"] == "merge-bot"
    assert "pk-" in resolved[-1]["provenance"]["note"]


def test_an_agents_resolution_is_published_by_its_own_sync_never_the_persons(scene_of):
    """A session resolves the person's packet without publishing: the replica shows the
    resolution at once, but the person's ``quire sync`` leaves it out (it would go out as
    the person, judged by the person's rules); the agent's own sync sends it, as the
    agent."""
    scene = scene_of("page/deploy")
    alice, bob = scene.alice, scene.bob

    async def resolve_then(tool: str | None) -> dict[str, Any]:
        async with Client(_mcp(alice, "merge-bot")) as client:
            if tool is not None:
                err, out = await _call(client, tool, {})
                assert not err, out
                return out
            err, got = await _call(client, "conflict_claim", {"packet": "page/deploy"})
            assert not err, got
            err, res = await _call(client, "conflict_resolve", {
                "packet": "page/deploy", "digest": got["packet"]["digest"],
                "resolution": "ours", "claim_token": got["claim"]["token"]})
            assert not err, res
            return res

    asyncio.run(resolve_then(None))
    assert alice.read("page/deploy").body == SCENE["page/deploy"][1]  # applied locally
    assert sync(alice)["sync"]["pushed"] == 0  # the person's sync leaves it to the agent
    sync(bob)
    assert bob.read("page/deploy").body == SCENE["page/deploy"][2]
    st = asyncio.run(resolve_then("status"))
    assert st["agent_unpublished"] == 1 and any("not yet published" in x for x in st["signals"])
    assert asyncio.run(resolve_then("sync"))["pushed_changes"] == 1
    sync(bob)
    assert bob.read("page/deploy").body == SCENE["page/deploy"][1]
    last = [b for b in scene.team.batches(bob)
            if [op.get("entry", {}).get("id") for op in b["ops"]] == ["page/deploy"]][-1]
    assert last["provenance"]["agent"] == "merge-bot"
    assert last["provenance"]["tool"] == "quire conflict resolve"


# ---------------------------------------------------------------- claims across processes


def test_two_processes_claim_at_once_exactly_one_wins_and_expiry_frees_it(scene_of):
    alice = scene_of("page/claim").alice
    pid = packet_for(alice, "page/claim")["packet_id"]
    env = dict(os.environ, QUIRE_HOME=str(alice.home))
    env.pop("QUIRE_TEST_CRASH_AT", None)
    # a lease long enough that the loser, however late its process starts on a loaded
    # machine, finds it held; expiry is shown below on a renewed, short lease
    procs = [subprocess.Popen([*QUIRE, "conflicts", "claim", pid, "--agent", name, "--ttl",
                               "300", "--json"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for name in ("ann", "ben")]
    outs = [(p.wait(60), json.loads(p.communicate()[0])) for p in procs]
    winners = [doc for rc, doc in outs if rc == 0]
    losers = [doc for rc, doc in outs if rc != 0]
    assert len(winners) == 1 and len(losers) == 1
    win, lose = winners[0], losers[0]["error"]
    assert lose["code"] == "claim_held"
    assert lose["details"]["holder"] == win["agent"]
    assert lose["details"]["expires_at"] == win["expires_at"]
    loser_name = "ben" if win["agent"] == "ann" else "ann"

    # the holder can renew (here to a short lease); the other still cannot take it
    # (in-process: a CLI start costs seconds on a loaded machine, longer than this lease)
    with desk(alice) as d:
        renewed = d.renew(pid, win["token"], 5)
        with pytest.raises(ClaimHeld) as e:
            d.claim(pid, loser_name)
        assert e.value.details["holder"] == win["agent"]
    while time.time() * 1000 <= renewed["expires_at"]:
        time.sleep(0.2)
    taken = qjson(alice.home, "conflicts", "claim", pid, "--agent", loser_name)
    assert taken["agent"] == loser_name
    with desk(alice) as d:
        with pytest.raises(ClaimHeld):  # the first holder's token is dead now
            d.release(pid, win["token"])
        assert d.release(pid, taken["token"])["released"]
        assert packet_for(alice, "page/claim")["claim"] is None
    listed = qjson(alice.home, "conflicts", "list")["packets"]
    pkt = next(p for p in listed if p["entry"] == "page/claim")
    qjson(alice.home, "conflicts", "resolve", pid, "--digest", pkt["digest"], "--take", "theirs")
    assert packet_for(alice, "page/claim") is None


# ---------------------------------------------------------------- staleness


def test_resolution_of_a_packet_read_before_a_new_remote_edit_is_refused_as_stale(scene_of):
    scene = scene_of("page/stale")
    alice, bob = scene.alice, scene.bob
    with desk(alice) as d:
        old = d.show("page/stale")
    put(bob, "page/stale", "bob s3\n")
    sync(bob)
    sync(alice)
    with desk(alice) as d:
        with pytest.raises(PacketStale) as e:
            d.resolve(old["packet_id"], digest=old["digest"], how="ours")
        fresh = e.value.details["packet_id"]
        assert fresh != old["packet_id"]
        with pytest.raises(PacketStale):
            d.show(old["packet_id"])
        pkt = d.show(fresh)
        assert pkt["theirs"]["body"]["text"] == "bob s3\n"

    # a local edit of the held file (marker kept) makes the packet stale too
    path = alice.path("page/stale")
    path.write_text(path.read_text().replace("alice s2", "alice s2 edited"))
    with desk(alice) as d:
        with pytest.raises(PacketStale) as e:
            d.resolve(fresh, digest=pkt["digest"], how="ours")
        newest = d.show(e.value.details["packet_id"])
        assert newest["ours"]["body"]["text"] == "alice s2 edited\n"
        d.resolve(newest["packet_id"], digest=newest["digest"], how="ours", agent="fixer")
    sync(alice)
    sync(bob)
    assert bob.read("page/stale").body == "alice s2 edited\n"


# ---------------------------------------------------------------- crash safety


def test_sigkill_while_applying_a_resolution_leaves_packet_resolvable_and_vault_readable(
        scene_of):
    scene = scene_of("page/crash", "page/crash-late")
    alice, bob = scene.alice, scene.bob
    for eid, point in (("page/crash", "resolve_before_commit"),
                       ("page/crash-late", "resolve_before_vault_write")):
        pkt = packet_for(alice, eid)
        before = alice.path(eid).read_bytes()
        p = quire(alice.home, "conflicts", "resolve", pkt["packet_id"], "--digest",
                  pkt["digest"], "--take", "ours", "--json", check=False,
                  env={"QUIRE_TEST_CRASH_AT": point})
        assert p.returncode == -9, (p.stdout, p.stderr)
        md.read_entry(alice.vault, eid, alice.path(eid).read_bytes())  # readable
        assert alice.path(eid).read_bytes() == before  # never half written
        if point == "resolve_before_commit":
            again = packet_for(alice, eid)
            assert again["digest"] == pkt["digest"]  # intact, and still resolvable
            qjson(alice.home, "conflicts", "resolve", eid, "--digest", pkt["digest"],
                  "--take", "ours")
        else:
            assert packet_for(alice, eid) is None  # committed: the next sync finishes the file
    sync(alice)
    sync(bob)
    for eid in ("page/crash", "page/crash-late"):
        assert alice.read(eid).body == bob.read(eid).body == "alice c2\n"
        assert b"quire:" not in alice.path(eid).read_bytes()


# ---------------------------------------------------------------- resolution kinds


def test_keep_both_gives_two_entries_linked_to_each_other(scene_of):
    scene = scene_of("page/both")
    alice, bob = scene.alice, scene.bob
    pkt = packet_for(alice, "page/both")
    r = qjson(alice.home, "conflicts", "resolve", pkt["packet_id"], "--digest", pkt["digest"],
              "--keep-both", "--agent", "tidy-bot")
    (main, _), (alt, _) = r["entries"].items()
    sync(alice)
    sync(bob)
    for m in (alice, bob):
        kept, moved = m.read(main), m.read(alt)
        assert kept.body == "bob's v2\n" and alt in kept.links
        assert moved.body == "alice's v2\n" and main in moved.links


def test_delete_against_edit_resolved_either_way_converges(scene_of):
    scene = scene_of("note/keep-edit", "note/keep-delete")
    alice, bob = scene.alice, scene.bob
    with desk(alice) as d:
        keep = d.show("note/keep-edit")  # bob deleted, alice edited: keep the edit
        assert keep["kind"] == "edit_delete" and not keep["theirs"]["present"]
        d.resolve(keep["packet_id"], digest=keep["digest"], how="ours")
        drop = d.show("note/keep-delete")  # alice deleted, bob edited: keep the delete
        assert not drop["ours"]["present"] and drop["theirs"]["present"]
        d.resolve(drop["packet_id"], digest=drop["digest"], how="delete")
    sync(alice)
    sync(bob)
    for m in (alice, bob):
        assert m.read("note/keep-edit").body == "alice edited\n"
        assert m.read("note/keep-delete") is None


def test_200_kib_conflict_packet_stays_under_40_kib_and_pages_reassemble(scene_of):
    scene = scene_of("page/big")
    alice, bob = scene.alice, scene.bob
    p = quire(alice.home, "conflicts", "show", "page/big", "--json")
    assert len(p.stdout.encode()) < 40 * 1024
    pkt = json.loads(p.stdout)
    theirs = pkt["theirs"]["body"]
    assert theirs["truncated"] and theirs["size"] > 200 * 1024
    first = qjson(alice.home, "conflicts", "show", "page/big", "--page",
                  str(theirs["pages"]["first"]))
    assert first["part"] == "theirs" and first["part_page"] == 1
    with desk(alice) as d:  # the rest through the same paging code, on one loaded packet
        c = d._locate(pkt["packet_id"])
        pages = [first["text"]] + [
            packet_page(c, n)["text"]
            for n in range(theirs["pages"]["first"] + 1,
                           theirs["pages"]["first"] + theirs["pages"]["count"])]
    assert "".join(pages).encode() == bob.read("page/big").body.encode()
    with desk(alice) as d:
        d.resolve("page/big", digest=pkt["digest"], how="theirs")
    assert alice.read("page/big").body == bob.read("page/big").body


def test_resolution_cannot_weaken_a_guardrail_the_space_rules_protect(scene_of):
    scene = scene_of(GUARD)
    alice, bob, team = scene.alice, scene.bob, scene.team
    qjson(team.owner, "admin", "rules", "add", team.name, "--deny", "update,delete", "--who",
          "editor", "--entries", "guardrail/*")
    sync(alice)  # the head brings the rules that apply to alice
    with desk(alice) as d:
        pkt = d.show(GUARD)
        assert pkt["ours"]["meta"]["severity"] == "warn"
        for how in ("ours", "delete"):
            with pytest.raises(PolicyDenied) as e:
                d.resolve(GUARD, digest=pkt["digest"], how=how, agent="eager-bot")
            assert e.value.details["denied"][0]["id"] == GUARD
        assert packet_for(alice, GUARD)["digest"] == pkt["digest"]  # nothing changed
        d.resolve(GUARD, digest=pkt["digest"], how="theirs", agent="careful-bot")
    assert alice.read(GUARD).meta["severity"] == "block"

    # what the rule denies is refused at the write, judged with the head's rules as the hub
    # would judge it: nothing is recorded, nothing waits to be published
    async def agent_edits_the_guardrail() -> tuple[dict[str, Any], dict[str, Any]]:
        async with Client(_mcp(alice, "eager-bot")) as client:
            err, refused = await _call(client, "write", {"entry_id": GUARD, "title": "G",
                                                         "body": "relaxed\n",
                                                         "meta": {"severity": "info"}})
            assert err and refused["error"]["code"] == "policy_denied", refused
            assert refused["error"]["details"]["denied"][0]["id"] == GUARD
            err, st = await _call(client, "status", {})
            return refused, st
    refused, st = asyncio.run(agent_edits_the_guardrail())
    assert st["agent_unpublished"] == 0 and st["agent_changes"] == []
    alice.write(bob.read(GUARD))  # put it back as the hub has it: nothing left to publish
    sync(alice)


def test_every_replica_converges_once_all_packets_are_resolved(scene_of):
    scene = scene_of("page/deploy", "page/both", "note/keep-edit", "note/keep-delete",
                     "page/stale")
    alice, bob = scene.alice, scene.bob
    with desk(alice) as d:  # every kind of resolution, one packet each
        for eid, how in (("page/deploy", "theirs"), ("note/keep-edit", "ours"),
                         ("note/keep-delete", "delete"), ("page/stale", "ours")):
            pkt = d.show(eid)
            d.resolve(pkt["packet_id"], digest=pkt["digest"], how=how)
        both = d.show("page/both")
        d.resolve(both["packet_id"], digest=both["digest"], how="keep_both")
        assert d.list_packets() == []
    sync(alice)
    sync(bob)
    sync(alice)
    assert alice.files() == bob.files()
    sa, sb = alice.local_status(), bob.local_status()
    assert sa["store_digest"] == sb["store_digest"] and not sa["conflicts"]
    assert alice.read("page/deploy").body == "step one (bob)\nstep two\n"
    assert alice.read("note/keep-edit").body == "alice edited\n"
    assert alice.read("note/keep-delete") is None
    assert alice.read("page/stale").body == "alice s2\n"
