"""Read rules on every read path of the hub (hub/scope.py, decisions.md D142), as a
property: for random read rules (roles, members, agents; globs, kinds, tags) over random
small histories, no answer of a remote read (list, get, history, diff, search, batch), a
pull (changes, snapshot), the conflict reports, the activity, the console's wiki-link
resolution or the usage holds an id, a title, a snippet, a link or a history line of an
entry outside the reader's scope, and every entry inside it is there. The scope is computed here by an oracle of its own (``_oracle_reads``),
never by the function under test. The scoped pulls still verify against the signed state
root (what they leave out travels as lattices).

Cheap and in-process: the domain functions the API, the console and the remote MCP call,
on one hub per backend with two histories built once; each example draws rules, a reader
and the entries and seqs it reads. ``QUIRE_PROP_EXAMPLES`` (default 200) split between the
backends (two thirds on SQLite).

And the moments read rules change (same hub):

- a read rule committed while a pull is being answered: every answer that starts after the
  commit (changes, snapshot, search, list, get) leaves the entries out, while the pull that
  was already under way finishes under the scope it began with (the overlap is real);
- a write to an entry outside the writer's read scope is refused by the guard, and the same
  write passes without the rule;
- a read rule is added through the rules endpoint (kinds and tags) and shown by
  ``GET …/rules``; the lines a head event shares are never built for a scoped reader.
"""

from __future__ import annotations

import base64
import json
import os
import random
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.ids import new_id
from tests.kit.pg import pg_database, require_pg
from tests.kit.wire import WireMember, WireTeam, delete, make_wire_team, put, redeem

EXAMPLES = int(os.environ.get("QUIRE_PROP_EXAMPLES", "200"))
# the examples of each backend: SQLite's are about half as dear, so it takes two thirds
SHARE = {"sqlite": max(130, EXAMPLES * 2 // 3), "postgresql": max(70, EXAMPLES // 3)}

# entry ids (none a substring of another) and the tokens only their own texts hold
IDS = ["page/hr/pay", "page/hr/hiring", "page/eng/deploy", "note/standup", "skill/triage",
       "page/top"]
TOKENS = {eid: (f"ttl{i}kx", f"wrd{i}bq") for i, eid in enumerate(IDS)}
TAGS = ["hr", "secret", "ops"]
HISTORIES = 2


def _oracle_reads(rules: list[dict[str, Any]], who: dict[str, Any], eid: str,
                  tags: list[str]) -> bool:
    """The scope, computed independently: may ``who`` read ``eid`` with ``tags``?"""
    kind = eid.split("/", 1)[0]
    best: tuple[Any, ...] | None = None
    allow = True
    for r in rules:
        w = r["who"]
        if w == "agents":
            reaches = who["agent"] is not None
        elif w.startswith("agent:"):
            reaches = who["agent"] == w[6:]
        elif who["agent"] is not None and r["effect"] == "allow":
            reaches = False  # an allow to a person or a role is not their agents'
        else:
            reaches = w in (who["role"], who["user"])
        if not reaches or not fnmatchcase(eid, r["entries"]):
            continue
        if r.get("kinds") and kind not in r["kinds"]:
            continue
        if r.get("tags") and not set(tags) & set(r["tags"]):
            continue
        glob = r["entries"]
        exact = not any(c in glob for c in "*?[")
        rank = (exact, len(glob.replace("*", "").replace("?", "")),
                bool(r.get("kinds")) + bool(r.get("tags")), r["effect"] == "deny")
        if best is None or rank > best:
            best, allow = rank, r["effect"] == "allow"
    return allow


class History:
    """One space's random history, published by the editor, with the oracle's view of it:
    each entry's live content (None: deleted) and its last live tags."""

    def __init__(self, space: str, seed: int):
        self.space, self.rng = space, random.Random(seed)
        self.live: dict[str, dict[str, Any] | None] = {}
        self.tags: dict[str, list[str]] = {}
        self.version: dict[str, str] = {}  # the current version (a tombstone's too)
        self.seqs = 0

    def step(self, editor: WireMember) -> None:
        ops = []
        for eid in self.rng.sample(IDS, self.rng.randint(1, 2)):
            base = self.version.get(eid)
            if self.live.get(eid) is not None and self.rng.random() < 0.3:
                ops.append(delete(eid, base or ""))
                self.live[eid] = None
            else:
                title, word = TOKENS[eid]
                tags = sorted(self.rng.sample(TAGS, self.rng.randint(0, 2)))
                links = sorted(self.rng.sample([i for i in IDS if i != eid],
                                               self.rng.randint(0, 2)))
                op = put(eid, f"zebra {word} {self.rng.randint(0, 99)}\n", base,
                         title=f"Title {title}", tags=tags, links=links)
                ops.append(op)
                self.live[eid] = op.entry.to_dict()
                self.tags[eid] = tags
            self.version[eid] = ops[-1].entry.version
        r = editor.publish(self.space, ops)
        assert r.status_code == 201, r.text
        self.seqs += 1


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[dict[str, Any]]:
    from hub.access import Principal

    def run(db: str | None) -> Iterator[dict[str, Any]]:
        for team in make_wire_team(Path(tmp_path_factory.mktemp("scopehub")), db):
            worlds = []
            for k in range(HISTORIES):
                space = team.space if k == 0 else team.owner.create_space(f"s{k}")
                editor = team.editor if k == 0 else redeem(
                    team.client, team.owner.invite(space, "editor"), f"ed{k}")
                viewer = team.viewer if k == 0 else redeem(
                    team.client, team.owner.invite(space, "viewer"), f"vi{k}")
                h = History(space, seed=1000 + k)
                for _ in range(6):
                    h.step(editor)
                # the editor's replica reports conflicts on three entries
                rid = editor.replica(space)
                r = team.client.put(f"/v1/spaces/{space}/replicas/{rid}/conflicts", json={
                    "conflicts": [{"id": f"pk-{i:020x}", "entry": eid, "kind": "edit",
                                   "since": 1, "claimed": False}
                                  for i, eid in enumerate(IDS[:3])]}, headers=editor.auth)
                assert r.status_code in (200, 201), r.text
                who = {}
                for name, m, role, owner in (("viewer", viewer, "viewer", False),
                                             ("editor", editor, "editor", False),
                                             ("owner", team.owner, "admin", True)):
                    who[name] = {"user": m.user_id, "role": role, "agent": None,
                                 "p": Principal(m.user_id, m.device_id, name, owner)}
                d = team.delegate(editor, "write", space=space, agent="bot")
                who["agent"] = {"user": editor.user_id, "role": "editor", "agent": "bot",
                                "p": Principal(editor.user_id, editor.device_id, "editor",
                                               False, agent="bot",
                                               delegation_id=d["delegation"]["id"],
                                               scope="write", space_id=space)}
                worlds.append((h, who))
            yield {"team": team, "hub": team.hub, "worlds": worlds,
                   "backend": request.param}

    if request.param == "sqlite":
        yield from run(None)
        return
    require_pg()
    with pg_database() as url:
        yield from run(url)


def _set_rules(hub: Any, space: str, rules: list[dict[str, Any]]) -> None:
    from sqlalchemy import delete as sql_delete

    from hub.store.rules import insert_rule_txn
    from hub.store.schema import rules as rules_table

    def txn(conn: Any) -> None:
        conn.execute(sql_delete(rules_table).where(rules_table.c.space_id == space))
        for i, r in enumerate(rules):
            insert_rule_txn(conn, id=r["id"], space_id=space, effect=r["effect"],
                            who=r["who"], actions="read", entries=r["entries"],
                            created_at=i, kinds=",".join(r.get("kinds", [])) or None,
                            tags=",".join(r.get("tags", [])) or None)

    hub.store.run_write(txn)


def _strings(x: Any, skip: frozenset[str] = frozenset()) -> Iterator[str]:
    """Every string in a JSON value (keys too), leaving out the values under ``skip``."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield k
            if k not in skip:
                yield from _strings(v, skip)
    elif isinstance(x, list):
        for v in x:
            yield from _strings(v, skip)
    elif isinstance(x, str):
        yield x


def _assert_hides(answer: Any, hidden: list[str], what: str,
                  skip: frozenset[str] = frozenset()) -> None:
    text = "\n".join(_strings(answer, skip))
    for eid in hidden:
        for needle in (eid, *TOKENS[eid]):
            assert needle not in text, f"{what} shows {needle} ({eid} is out of scope)"


def _ndjson(chunks: Iterator[bytes]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in b"".join(chunks).decode().splitlines() if line]


def _root(readable: dict[str, str], withheld: dict[int, bytes]) -> str:
    from shared import state

    lat = state.sum_lattices([state.lattices_of(readable.items()), withheld])
    return state.root_of(state.digests_with(state.EMPTY_DIGESTS, lat))


def _lattices(d: dict[str, str]) -> dict[int, bytes]:
    return {int(b): base64.b64decode(v) for b, v in d.items()}


glob = st.sampled_from(["*", "page/*", "page/hr/*", "note/*", "page/eng/deploy", "*/top",
                        "s*", "page/hr/pay"])
a_rule = st.fixed_dictionaries({
    "effect": st.sampled_from(["deny", "deny", "allow"]),
    "who": st.sampled_from(["viewer", "editor", "admin", "@viewer", "@editor", "agents",
                            "agent:bot", "agent:other"]),
    "entries": glob,
}, optional={"kinds": st.sampled_from([["page"], ["note", "skill"]]),
             "tags": st.sampled_from([["hr"], ["secret", "ops"]])})


def test_no_read_path_answers_outside_the_readers_scope(world: dict[str, Any]) -> None:
    run = settings(max_examples=SHARE[world["backend"]], deadline=None, database=None,
                   suppress_health_check=[HealthCheck.too_slow])(given(
        data=st.data(), raw=st.lists(a_rule, max_size=4),
        reader=st.sampled_from(["viewer", "editor", "owner", "agent"]),
        k=st.integers(0, HISTORIES - 1))(_one_example))
    run(world=world)


def _one_example(world: dict[str, Any], data: st.DataObject, raw: list[dict[str, Any]],
                 reader: str, k: int) -> None:
    from hub import activity, conflict_reports, feed, quotas, reads, signed_state, wikilinks
    from hub.quotas import HubQuotas
    from shared.errors import NotFound

    hub = world["hub"]
    h, who_of = world["worlds"][k]
    rules = []
    for r in raw:
        w = r["who"]
        w = who_of[w[1:]]["user"] if w.startswith("@") else w
        rules.append(dict(r, who=w, id=new_id()))
    _set_rules(hub, h.space, rules)
    who = who_of[reader]
    p = who["p"]

    seen = {eid for eid in h.tags if _oracle_reads(rules, who, eid, h.tags[eid])}
    hidden = [eid for eid in h.tags if eid not in seen]
    live = {eid for eid, c in h.live.items() if c is not None}
    store = hub.store

    # list (three at a time: the pages skip what the reader may not read), search
    listed: list[str] = []
    after = ""
    while True:
        page = reads.list_entries(store, p, h.space, prefix="", after=after, limit=3)
        _assert_hides(page, hidden, "list")
        listed += [e["id"] for e in page["entries"]]
        if page["next"] is None:
            break
        after = page["next"]
    assert sorted(listed) == sorted(live & seen)
    found = reads.search(store, p, h.space, "zebra", 100)
    _assert_hides(found, hidden, "search")
    assert sorted(r["id"] for r in found["results"]) == sorted(live & seen)
    assert found["total"] == len(live & seen)

    # get (head and a seq), history, diff of an entry the example picks; a batch
    for eid in [data.draw(st.sampled_from(IDS))]:
        seq = data.draw(st.integers(1, h.seqs))
        calls: list[tuple[Any, dict[str, Any]]] = [
            (reads.get_entry, {}), (reads.get_entry, {"seq": seq}),
            (reads.history, {"limit": 50}),
            (reads.diff, {"from_seq": 0, "to_seq": None, "epoch": None})]
        for fn, kw in calls:
            try:
                answer = fn(store, p, h.space, eid, **kw)
            except NotFound as e:
                # answered as an entry that is not there: the message names the id asked
                answer = {"message": e.message.replace(eid, "<asked>"), "details": e.details}
            else:
                # (an entry that never was has an empty diff, as before any rule)
                assert eid in seen or eid not in h.tags, f"{eid} answered outside the scope"
            _assert_hides(answer, hidden, f"a read of {eid}")
        if eid in seen and eid in live:
            assert reads.get_entry(store, p, h.space, eid)["entry"]["id"] == eid
    for seq in [data.draw(st.integers(1, h.seqs))]:
        try:
            answer = reads.batch(store, p, h.space, seq=seq, epoch=None)
        except NotFound as e:
            answer = {"message": e.message}
        _assert_hides(answer, hidden, f"batch {seq}")

    # pulls: nothing outside the scope but the links a readable entry's content holds, and
    # what is sent plus what is withheld verifies against the signed root
    with store.read() as conn:  # the root a signed head of this head carries
        root = signed_state.current_root_txn(conn, h.space, True)
    lines = _ndjson(feed.changes(store, p, h.space, None, 0, 1000))
    _assert_hides(lines, hidden, "changes", frozenset({"links", "receipt"}))
    readable: dict[str, str] = {}
    withheld: dict[int, bytes] = {}
    from shared import state
    from shared.entry import make_entry
    for line in lines[:-1]:
        for op in line["batch"]["ops"]:
            if op["op"] == "put":
                readable[op["entry"]["id"]] = make_entry(op["entry"]).version
            else:
                readable.pop(op["id"], None)
        if "withheld" in line:
            withheld = state.sum_lattices([withheld, _lattices(line["withheld"]["lattices"])])
    end = lines[-1]["end"]
    assert end["seq"] == h.seqs and root == _root(readable, withheld)
    assert sorted(readable) == sorted(live & seen)
    snap = _ndjson(feed.snapshot(store, p, h.space))
    _assert_hides(snap, hidden, "snapshot", frozenset({"links"}))
    sent = {ln["entry"]["id"]: ln["version"] for ln in snap[1:-1]}
    assert sorted(sent) == sorted(live & seen) and snap[0]["count"] == len(sent)
    kept = _lattices(snap[-1]["end"].get("withheld", {}).get("lattices", {}))
    assert root == _root(sent, kept)

    # conflict reports, usage, the console's activity (in a third of the examples: every
    # path is still met often)
    if data.draw(st.integers(0, 2)) == 0:
        feed_page = activity.activity(store, p, h.space)
        _assert_hides(feed_page, hidden, "activity")
        # [[links]] the console resolves: by id, and by the last part of an id
        names = set(IDS) | {i.rsplit("/", 1)[1] for i in IDS}
        _assert_hides(wikilinks.resolve(store, p, h.space, "page/top", names), hidden,
                      "wiki links")
        _assert_hides(conflict_reports.list_reports(store, p, h.space), hidden, "conflicts")
        use = quotas.usage(store, HubQuotas.from_settings(hub.settings), p, h.space)
        if hidden and any(eid in live for eid in hidden):
            assert use["entries"] is None, "usage counts entries outside the scope"


# ---------------------------------------------------------------- when rules change

HIDDEN = ["page/hr/pay", "page/hr/hiring"]


def _principal(m: Any, owner: bool = False) -> Any:
    from hub.access import Principal

    return Principal(m.user_id, m.device_id, "m", owner)


def _text(chunks: Iterator[bytes]) -> str:
    return b"".join(chunks).decode()


def test_a_read_rule_committed_during_a_pull_binds_every_answer_started_after_it(
        world: dict[str, Any]) -> None:
    team = world["team"]
    from hub import admin, feed, reads
    from hub import scope as scopes

    hub, store = team.hub, team.hub.store
    space = team.owner.create_space("race")
    editor = _join(team, space, "editor")
    viewer = _join(team, space, "viewer")
    r = editor.publish(space, [put(i, f"zebra pay {i}\n", tags=["hr"]) for i in HIDDEN]
                       + [put("page/eng/deploy", "zebra deploy\n")])
    assert r.status_code == 201, r.text
    v = _principal(viewer)
    after: dict[str, str] = {}

    def commit_rule_then_read(space_id: str) -> None:
        scopes.HOOKS.read = None  # once: the reads below must not re-enter
        admin.add_rule(store, _principal(team.owner, owner=True), space_id, {
            "effect": "deny", "who": "viewer", "actions": ["read"], "entries": "*",
            "tags": ["hr"]}, hub.now())
        # every answer below starts after the rule committed, while the first pull's
        # transaction is still open
        after["changes"] = _text(feed.changes(store, v, space, None, 0, 100))
        after["snapshot"] = _text(feed.snapshot(store, v, space))
        after["search"] = json.dumps(reads.search(store, v, space, "zebra", 20))
        after["list"] = json.dumps(reads.list_entries(store, v, space, prefix="", after="",
                                                      limit=50))
        after["history"] = json.dumps(_safe(lambda: reads.history(store, v, space,
                                                                  HIDDEN[0], 10)))

    scopes.HOOKS.read = commit_rule_then_read
    try:
        first = _text(feed.changes(store, v, space, None, 0, 100))
    finally:
        scopes.HOOKS.read = None
    assert set(after) == {"changes", "snapshot", "search", "list", "history"}
    for path, text in after.items():
        for eid in HIDDEN:
            assert eid not in text, f"{path} started after the rule and shows {eid}"
        assert path == "history" or "page/eng/deploy" in text
    # the pull that began before the rule finished under the scope it began with
    assert all(eid in first for eid in HIDDEN)


def _safe(call: Any) -> Any:
    from shared.errors import NotFound

    try:
        return call()
    except NotFound as e:
        return {"not_found": e.message.replace(HIDDEN[0], "<asked>")}


def _join(team: WireTeam, space: str, role: str) -> Any:


    return redeem(team.client, team.owner.invite(space, role), role)


def test_a_write_outside_the_writers_read_scope_is_refused(world: dict[str, Any]) -> None:
    team = world["team"]
    space = team.owner.create_space("guarded")
    editor = _join(team, space, "editor")
    base = "/v1/spaces/" + space + "/rules"
    rule = {"effect": "deny", "who": editor.user_id, "actions": ["read"],
            "entries": "page/hr/*"}
    r = team.owner.post(base, rule)
    assert r.status_code in (200, 201), r.text
    # the attack: write where it may not read (a create, and an entry tagged out of scope)
    r = editor.publish(space, [put("page/hr/pay", "a raise for me\n")])
    assert r.status_code == 403 and r.json()["error"]["details"]["reason"] == "read_scope"
    r = team.owner.post(base, {"effect": "deny", "who": editor.user_id, "actions": ["read"],
                               "entries": "*", "tags": ["secret"]})
    assert r.status_code in (200, 201), r.text
    r = editor.publish(space, [put("page/open", "hidden by its tag\n", tags=["secret"])])
    assert r.status_code == 403 and r.json()["error"]["details"]["reason"] == "read_scope"
    # the same writes by someone the rules do not narrow pass
    other = _join(team, space, "editor")
    r = other.publish(space, [put("page/hr/pay", "pay bands\n"),
                              put("page/open", "x\n", tags=["secret"])])
    assert r.status_code == 201, r.text
    # an update of an entry the editor cannot read is refused too, and tells no version
    r = editor.publish(space, [put("page/open", "mine now\n")])
    body = r.json()["error"]
    assert r.status_code == 403 and body["details"]["reason"] == "read_scope"
    assert "current" not in json.dumps(body)


def test_read_rules_are_added_listed_and_never_share_event_lines(world: dict[str, Any]
                                                                 ) -> None:
    team = world["team"]
    from hub import feed
    from shared.errors import Forbidden

    space = team.owner.create_space("listed")
    viewer = _join(team, space, "viewer")
    base = "/v1/spaces/" + space + "/rules"
    bad = team.owner.post(base, {"effect": "deny", "who": "viewer",
                                 "actions": ["read", "update"], "entries": "*"})
    assert bad.status_code == 422
    bad = team.owner.post(base, {"effect": "deny", "who": "viewer", "actions": ["update"],
                                 "entries": "*", "tags": ["hr"]})
    assert bad.status_code == 422
    r = team.owner.post(base, {"effect": "deny", "who": "viewer", "actions": ["read"],
                               "entries": "page/*", "kinds": ["page"], "tags": ["hr"]})
    assert r.status_code in (200, 201), r.text
    shown = [x for x in team.owner.get(base).json()["effective"] if "read" in x["actions"]]
    assert shown and shown[0]["kinds"] == ["page"] and shown[0]["tags"] == ["hr"]
    with pytest.raises(Forbidden):
        b"".join(feed.changes(team.hub.store, _principal(viewer), space, None, 0, 10,
                              whole=True))


class _ScopedReplica:
    """What a scoped replica keeps (docs/security.md, "Read rules"): the entries it may read
    and, per bucket, the lattice sum of those it may not; how it applies a scoped page."""

    def __init__(self) -> None:
        self.readable: dict[str, str] = {}
        self.withheld: dict[int, bytes] = {}

    def _move(self, eid: str, old: str | None, new: str | None) -> None:
        from shared import state

        self.withheld.update(state.apply_changes(self.withheld, [(eid, old, new)]))

    def apply(self, lines: list[dict[str, Any]]) -> None:
        from shared.entry import make_entry, tombstone
        from shared.readscope import withheld_mark

        for line in lines[:-1]:
            w = line.get("withheld")
            if w:
                marks = set(w["was"])
                for eid, v in list(self.readable.items()):
                    if withheld_mark(eid, v) in marks:  # it left the scope: removed
                        del self.readable[eid]
                        self._move(eid, None, v)
                from shared import state
                self.withheld = state.sum_lattices([self.withheld,
                                                    _lattices(w["lattices"])])
            for op in line["batch"]["ops"]:
                eid = op["entry"]["id"] if op["op"] == "put" else op["id"]
                base = op.get("base")
                if (base is not None and eid not in self.readable
                        and base != tombstone(eid).version):
                    self._move(eid, base, None)  # it entered the scope: out of the sum
                if op["op"] == "put":
                    self.readable[eid] = make_entry(op["entry"]).version
                else:
                    self.readable.pop(eid, None)


def test_an_entry_that_leaves_and_reenters_the_scope_by_a_tag_keeps_the_root_verifying(
        world: dict[str, Any]) -> None:
    from hub import feed, signed_state

    team = world["team"]
    hub, store = team.hub, team.hub.store
    space = team.owner.create_space("tagged")
    editor, viewer = _join(team, space, "editor"), _join(team, space, "viewer")
    r = team.owner.post(f"/v1/spaces/{space}/rules", {
        "effect": "deny", "who": "viewer", "actions": ["read"], "entries": "*",
        "tags": ["hr"]})
    assert r.status_code in (200, 201), r.text
    v, rep, seq = _principal(viewer), _ScopedReplica(), 0
    a1 = put("page/a", "open\n")
    versions = [a1]
    for tags in (["hr"], []):  # hidden by a tag, then shown again
        b = put("page/a", f"tags {tags}\n", versions[-1].entry.version, tags=tags)
        versions.append(b)
    ops = [[a1, put("page/b", "always open\n")], [versions[1]], [versions[2]]]
    for step, batch in enumerate(ops):
        assert editor.publish(space, batch).status_code == 201
        lines = [json.loads(x) for x in _text(feed.changes(store, v, space, None, seq, 100))
                 .splitlines() if x]
        rep.apply(lines)
        seq = lines[-1]["end"]["seq"]
        with store.read() as conn:
            root = signed_state.current_root_txn(conn, space, True)
        assert root == _root(rep.readable, rep.withheld), f"step {step}"
        assert ("page/a" in rep.readable) is (step != 1)  # removed, then back
        if step == 1:
            assert "page/a" not in json.dumps(lines) and '"hr"' not in json.dumps(lines)
    del hub


def test_a_scoped_readers_event_stream_is_told_to_send_bare_heads(world: dict[str, Any]
                                                                  ) -> None:
    from hub.api import events

    team = world["team"]
    space = team.owner.create_space("streams")
    editor, viewer = _join(team, space, "editor"), _join(team, space, "viewer")
    assert editor.publish(space, [put("page/hr/pay", "pay\n")]).status_code == 201
    r = team.owner.post(f"/v1/spaces/{space}/rules", {
        "effect": "deny", "who": "viewer", "actions": ["read"], "entries": "page/hr/*"})
    assert r.status_code in (200, 201), r.text
    # the check each stream runs (in the head's own read) says whether it may carry lines
    assert events._check(team.hub, _principal(viewer), space)["scoped"] is True
    assert events._check(team.hub, _principal(editor), space)["scoped"] is False


def test_a_pull_built_under_other_read_rules_is_sent_to_a_snapshot(world: dict[str, Any]
                                                                   ) -> None:
    from tests.kit.wire import ndjson

    team = world["team"]
    space = team.owner.create_space("shrink")
    editor, viewer = _join(team, space, "editor"), _join(team, space, "viewer")
    assert editor.publish(space, [put("page/hr/pay", "pay\n"),
                                  put("page/eng/deploy", "deploy\n")]).status_code == 201
    base = f"/v1/spaces/{space}/changes?after=1&scope="
    assert viewer.get(base).status_code == 200  # built under no read rule, none now
    r = team.owner.post(f"/v1/spaces/{space}/rules", {
        "effect": "deny", "who": "viewer", "actions": ["read"], "entries": "page/hr/*"})
    assert r.status_code in (200, 201), r.text
    # the scope shrank: the hub stops serving the entry at once, and a copy built under
    # the old rules is sent to a snapshot rather than pulled forward
    r = viewer.get(base)
    assert r.status_code == 410 and r.json()["error"]["details"]["reason"] == "scope"
    snap = ndjson(viewer.get(f"/v1/spaces/{space}/snapshot").text)
    fp = snap[0]["scope"]
    assert fp == r.json()["error"]["details"]["scope"]
    assert [x["entry"]["id"] for x in snap[1:-1]] == ["page/eng/deploy"]
    assert viewer.get(f"/v1/spaces/{space}/changes?after=1&scope={fp}").status_code == 200


def test_proposals_follow_read_rules(world: dict[str, Any]) -> None:
    from hub import proposals
    from hub.access import Principal
    from shared.errors import NotFound, PolicyDenied

    team = world["team"]
    hub = team.hub
    space = team.owner.create_space("proposed")
    editor, viewer = _join(team, space, "editor"), _join(team, space, "viewer")
    assert editor.publish(space, [put("page/hr/pay", "pay\n"), put("page/open", "open\n")]
                          ).status_code == 201
    d = team.delegate(editor, "write", space=space, agent="bot")
    bot = Principal(editor.user_id, editor.device_id, "editor", False, agent="bot",
                    delegation_id=d["delegation"]["id"], scope="write", space_id=space)
    base = editor.get(f"/v1/spaces/{space}/entry?id=page/hr/pay").json()["version"]
    op = {"op": "put", "entry": put("page/hr/pay", "pay, proposed\n").entry.to_dict(),
          "base": base}
    filed = proposals.file(hub.store, bot, space, {"op": op, "reason": "fix pay"}, hub.now())
    pid = filed["proposal"]["id"]
    r = team.owner.post(f"/v1/spaces/{space}/rules", {
        "effect": "deny", "who": "viewer", "actions": ["read"], "entries": "page/hr/*"})
    assert r.status_code in (200, 201), r.text
    v = _principal(viewer)
    assert proposals.list_proposals(hub.store, v, space)["proposals"] == []
    with pytest.raises(NotFound):
        proposals.show(hub.store, v, space, pid)
    assert len(proposals.list_proposals(hub.store, _principal(editor), space)["proposals"]) == 1
    # the attack: an agent proposes a change to what it may not read
    r = team.owner.post(f"/v1/spaces/{space}/rules", {
        "effect": "deny", "who": "agent:bot", "actions": ["read"], "entries": "page/hr/*"})
    assert r.status_code in (200, 201), r.text
    with pytest.raises(PolicyDenied):
        proposals.file(hub.store, bot, space, {"op": op, "reason": "again"}, hub.now())


def _folders(team: WireTeam, space: str) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """The space's live (id, version) and the folder tree the hub keeps for it."""
    from hub.store import folders_sql, state_sql

    with team.hub.store.read() as conn:
        live = list(state_sql.iter_live_versions_txn(conn, space))
        rows = conn.exec_driver_sql("SELECT folder, lattice, size, digest FROM folder_nodes "
                                    f"WHERE space_id = '{space}'").fetchall()
    return live, folders_sql.nodes_of(rows)


def test_the_folder_tree_follows_publications_and_proofs_go_to_whole_readers(
        world: dict[str, Any]) -> None:
    """The folder tree (decisions.md D143) stays the one computed from the entries through
    creates, updates and a folder emptied; the head signs it; the proof served verifies
    and names nothing outside its folders; a tree lost (a space from before migration 0030)
    is rebuilt; a proof is refused to a reader a rule keeps from part of the folders."""
    from hub import signed_state
    from shared import folderproof as fp
    from shared import foldertree as ft
    from shared.errors import HubUnverified
    from shared.signed import parse_head

    team = world["team"]
    key = team.hub.key.public
    space = team.owner.create_space("folders")
    ed, viewer = _join(team, space, "editor"), _join(team, space, "viewer")
    only = ["projects/alpha/*", "guardrail/*"]
    assert parse_head(key, ed.head(space), space=space).tree == ft.EMPTY_ROOT
    assert ed.publish(space, [put("projects/alpha/plan"), put("projects/alpha/deep/notes"),
                              put("projects/beta/secret"), put("guardrail/no-force-push"),
                              put("README")]).status_code == 201
    was = dict(_folders(team, space)[0])
    assert ed.publish(space, [put("hr/salaries"), put("projects/alpha/plan", "changed\n",
                                                      base=was["projects/alpha/plan"]),
                              delete("projects/beta/secret", was["projects/beta/secret"])]
                      ).status_code == 201
    live, kept = _folders(team, space)
    assert kept == ft.tree_of(live) and "projects/beta" not in kept  # emptied: gone
    r = ed.get(f"/v1/spaces/{space}/proof", params={"scope": only, "nonce": "n1"})
    assert r.status_code == 200, r.text
    signed = parse_head(key, r.json()["head"], space=space, nonce="n1")
    assert signed.tree == ft.root_of_entries(live)
    scope = fp.parse_scope(only)
    assert scope is not None
    held = [(i, v) for i, v in live if scope.holds(i)]
    fp.verify(signed.tree or "", scope, held, r.json()["proof"])
    with pytest.raises(HubUnverified):
        fp.verify(signed.tree or "", scope, held[1:], r.json()["proof"])
    assert not {"hr", "salaries", "README", "beta"} & set(
        "\n".join(_strings(r.json())).replace("/", "\n").split())
    # no folder rows (migration 0030): heads compute the root, a publication rebuilds
    team.hub.store.run_write(lambda conn: conn.exec_driver_sql(
        f"DELETE FROM folder_nodes WHERE space_id = '{space}'"))
    assert parse_head(key, ed.head(space), space=space).tree == signed.tree
    assert ed.publish(space, [put("projects/alpha/new")]).status_code == 201
    live, kept = _folders(team, space)
    assert kept == ft.tree_of(live)
    team.hub.store.run_write(lambda conn: conn.exec_driver_sql(
        f"DELETE FROM folder_nodes WHERE space_id = '{space}'"))
    assert signed_state.build_missing_trees(team.hub.store) >= 1  # what a hub does at start
    assert _folders(team, space)[1] == kept
    # a proof only for folders the reader reads whole; only folder globs are provable
    assert ed.publish(space, [put("projects/alpha/pay", tags=["hr"])]).status_code == 201
    _set_rules(team.hub, space, [{"id": new_id(), "effect": "deny", "who": "viewer",
                                  "entries": "*", "tags": ["hr"]}])
    r = viewer.get(f"/v1/spaces/{space}/proof", params={"scope": ["projects/alpha/*"]})
    assert r.status_code == 403 and r.json()["error"]["details"]["reason"] == "read_scope"
    assert "pay" not in r.text
    assert viewer.get(f"/v1/spaces/{space}/proof",
                      params={"scope": ["guardrail/*"]}).status_code == 200
    for bad in (["projects/alpha/plan"], ["projects/*.md"], []):
        r = viewer.get(f"/v1/spaces/{space}/proof", params={"scope": bad})
        assert r.status_code == 422 and r.json()["error"]["details"]["reason"] == \
            "unprovable_scope", r.text


def test_a_partial_snapshot_sends_its_folder_in_id_order_and_sums_the_rest(
        world: dict[str, Any]) -> None:
    """A partial snapshot reads only the rows of its scope, in pages (hub/feed.py
    ``_rows_of_txn``): more than one page of the folder comes in id order, an entry a tag
    rule hides is left out, and what is sent plus the withheld sums is the whole space's
    root, as an unrestricted reader's snapshot gives it."""
    from hub import feed
    from hub.access import Principal
    from shared import state

    team = world["team"]
    space = team.owner.create_space("partial-rows")
    ed, viewer = _join(team, space, "editor"), _join(team, space, "viewer")
    folder = [f"projects/alpha/e{i:04d}" for i in range(620)]  # more than a page of 500
    for lo in (0, 310):
        assert ed.publish(space, [put(eid) for eid in folder[lo:lo + 310]]).status_code == 201
    assert ed.publish(space, [put(f"projects/beta/e{i}") for i in range(30)]
                      + [put("projects/alpha/pay", tags=["hr"])]).status_code == 201
    _set_rules(team.hub, space, [{"id": new_id(), "effect": "deny", "who": "viewer",
                                  "entries": "*", "tags": ["hr"]}])
    store = team.hub.store
    whole = _ndjson(feed.snapshot(store, Principal(ed.user_id, ed.device_id, "e", False),
                                  space))
    root = _root({ln["entry"]["id"]: ln["version"] for ln in whole[1:-1]}, {})
    snap = _ndjson(feed.snapshot(store, Principal(viewer.user_id, viewer.device_id, "v",
                                                  False), space, only=("projects/alpha/*",)))
    sent = [ln["entry"]["id"] for ln in snap[1:-1]]
    assert sent == folder and snap[0]["count"] == len(folder) == snap[-1]["end"]["count"]
    withheld = snap[-1]["end"]["withheld"]
    assert withheld["entries"] == 31
    assert root == _root({ln["entry"]["id"]: ln["version"] for ln in snap[1:-1]},
                         _lattices(withheld["lattices"])) != state.EMPTY_ROOT
