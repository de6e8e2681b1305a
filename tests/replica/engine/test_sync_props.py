"""Properties of sync over random histories, on the real hub application in-process
(tests/kit/inproc.py), and crashes at every named point.

The oracle of ``test_random_histories_converge_and_every_write_survives_or_was_seen``: after
every replica syncs twice, all stores have one digest, and every local write (edit, create,
delete) is, by content, in the final state; or held in a conflict on its author's replica;
or kept on its author's replica because the space rules deny it (reported by the last sync);
or superseded by a later write whose author saw it. Lessons kept from earlier versions of
this oracle: re-writing what the file already shows is no write (629e1d3); a write equal to
a state someone else published is not lost (d62da76, here: the later writer saw that
content); a held state may carry the write merged with a pulled change (faacebe: compared
field by field against what the file showed before the write); a write that puts a field
back to the author's synced value only undoes the author's own unpublished change, so
another replica's value may win there (found by the two-replica half: r0 tags, r1 tags, r0
untags before syncing, final tagged by r1's write, which r0 never saw); and a write of
exactly the content another replica's write started from is superseded by it whichever
happened first (r0 creates and publishes X, edits it to Y; r1, not yet synced, creates X).

The histories: random steps, mixed with ``concurrent`` blocks in which two replicas that
have both synced edit one entry before either syncs again (mostly the same field, with other
values: the case a merge exists for, which independent random steps almost never line up).
The explicit examples of the two-replica half walk each merge rule of
``replica/engine/merge.py`` once.

``QUIRE_PROP_EXAMPLES`` sets the number of examples (default 200): half of them with three
replicas (here), half with two (tests/replica/engine/test_sync_props_two.py, a file of its own so
the suite's workers run the two halves side by side).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

import replica.engine.clone as clone_mod
import replica.engine.ledger as ledger_mod
import replica.engine.push as push_mod
import replica.engine.sync as sync_mod
from replica.engine.crash import POINTS
from replica.vault import files as vlt
from shared.entry import SEVERITIES, Entry
from tests.kit.inproc import Device, InprocHub, Local, scratch_dir

IDS = ("page/a", "page/b", "guardrail/g")
LINES = 6
EXAMPLES = int(os.environ.get("QUIRE_PROP_EXAMPLES", "200"))
# the typed default lets only admins weaken a guardrail (lower it, change its text, delete
# it); with ``rule`` the space lets editors do it too
RULE = {"effect": "allow", "who": "editor", "actions": ["update", "delete"],
        "entries": "guardrail/*"}


def base_entry(eid: str) -> Entry:
    meta = {"severity": "warn"} if eid.startswith("guardrail/") else {}
    return Entry(id=eid, title=eid, body="".join(f"line {i}\n" for i in range(LINES)),
                 meta=meta)


def edit(e: Entry | None, eid: str, action: str, n: int) -> Entry | None:
    if action == "delete":
        return None
    cur = e or base_entry(eid)
    if action == "line":
        lines = cur.body.splitlines(keepends=True)
        lines[n % LINES] = f"edit {n}\n"
        return Entry(id=eid, title=cur.title, body="".join(lines), tags=cur.tags,
                     links=cur.links, meta=cur.meta)
    if action == "tag":
        tags = set(cur.tags) ^ {f"t{n % 3}"}
        return Entry(id=eid, title=cur.title, body=cur.body, tags=tuple(sorted(tags)),
                     links=cur.links, meta=cur.meta)
    if action == "title":
        return Entry(id=eid, title=f"title {n}", body=cur.body, tags=cur.tags,
                     links=cur.links, meta=cur.meta)
    if action == "meta":  # a plain meta scalar, on any kind
        return Entry(id=eid, title=cur.title, body=cur.body, tags=cur.tags, links=cur.links,
                     meta={**cur.meta, "status": ("draft", "review", "done")[n % 3]})
    assert action == "severity"
    meta = dict(cur.meta)
    if eid.startswith("guardrail/"):
        meta["severity"] = ("info", "warn", "block")[n % 3]
    return Entry(id=eid, title=cur.title, body=cur.body, tags=cur.tags, links=cur.links,
                 meta=meta)


EDITS = ("line", "line", "tag", "title", "severity", "meta", "delete")
step = st.tuples(st.integers(0, 2), st.sampled_from([*EDITS, "sync", "sync"]),
                 st.sampled_from(IDS), st.integers(0, 11))
Step = tuple[int, str, str, int]


@st.composite
def concurrent(draw: st.DrawFn) -> list[Step]:
    """Two replicas sync, then both edit one entry before either syncs again: mostly the
    same field (the same line or a neighbour, the same tag, another title, severity or
    status), sometimes another field or a delete. ``k + 6`` names the same line, tag,
    severity and status as ``k`` with other text; ``k + 1`` the next line, another tag and
    value. The pairs stay two replicas apart with two replicas as with three (``who % n``)."""
    a, b = draw(st.sampled_from([(0, 1), (1, 0), (1, 2), (2, 1)]))
    eid = draw(st.sampled_from(IDS))
    mine = draw(st.sampled_from(EDITS))
    theirs = draw(st.one_of(st.just(mine), st.just(mine), st.just(mine),
                            st.sampled_from(EDITS)))
    k = draw(st.integers(0, 11))
    other = draw(st.one_of(st.just((k + 6) % 12), st.just((k + 1) % 12), st.integers(0, 11)))
    return [(a, "sync", eid, 0), (b, "sync", eid, 0), (a, mine, eid, k), (b, theirs, eid, other)]


# random steps, and a concurrent block in one chunk of three (7 chunks at most: about the
# syncs of the 25 random steps before, so about the same run time)
histories = st.lists(
    st.one_of(step.map(lambda x: [x]), step.map(lambda x: [x]), concurrent()),
    max_size=7).map(lambda chunks: [x for chunk in chunks for x in chunk])


@dataclass(frozen=True)
class Write:
    """One local write: what the file showed before (``base``; with no file, the synced
    state the store still has, if any), what was written
    (``entry``, None: the file was deleted), and every state its author could see then (the
    file, and a held conflict's two sides). ``undo``: a delete of the author's own create
    that never reached its store as synced (created and deleted between syncs): it deletes
    nothing anyone published, so there is nothing of it to keep."""

    n: int
    replica: int
    eid: str
    base: Entry | None
    entry: Entry | None
    saw: tuple[Entry | None, ...]
    undo: bool = False
    synced: Entry | None = None  # the author's synced state when it wrote


def carries(w: Write, state: Entry | None, severities: frozenset[str] = frozenset(),
            others: tuple[Entry | None, ...] = ()) -> bool:
    """Does ``state`` hold every change ``w`` made to what its file showed? A delete: the
    entry is absent. Otherwise a changed title or meta key has w's value (a guardrail's
    severity may instead be a stricter one written by someone: a merge never weakens a
    guardrail); the tags and links w added are there and those it dropped are not; each body
    line w changed has w's text (edits replace lines, never add or remove them); a created
    body is whole.

    A change back to the author's synced value (``w.synced``) only undoes the author's own
    unpublished change: the merge is against the synced state, where the author then
    changed nothing, so another replica's value for it may win (its tag added, its line, its
    title). Such a change is carried when ``state`` has w's value or one that another
    replica wrote (``others``: their writes of this id, None a delete), never the author's
    own undone value; a write that put back the whole synced state loses to another's
    delete as an untouched entry does."""
    if w.entry is None:
        return state is None or state.deleted
    base, mine, synced = w.base, w.entry, w.synced
    if state is None or state.deleted:  # only if w put back the synced state, deleted by
        return (synced is not None and mine.version == synced.version  # another replica
                and any(o is None for o in others))
    written = [o for o in others if o is not None]

    def undone(value: object, now: object, of: Callable[[Entry], object]) -> bool:
        """w reverted this field to its synced value and ``now`` is another's write."""
        return synced is not None and value == of(synced) and any(of(o) == now for o in written)

    if mine.title != (base.title if base else None) and state.title != mine.title \
            and not undone(mine.title, state.title, lambda e: e.title):
        return False
    b_meta = base.meta if base else {}
    for key in set(b_meta) | set(mine.meta):
        want, now = mine.meta.get(key), state.meta.get(key)
        if want == b_meta.get(key) or now == want:
            continue
        if undone(want, now, lambda e, k=key: e.meta.get(k)):
            continue
        if not (key == "severity" and mine.kind == "guardrail" and now in severities
                and want in SEVERITIES and SEVERITIES.index(now) > SEVERITIES.index(want)):
            return False
    for f in ("tags", "links"):
        b, m, now = set(getattr(base, f) if base else ()), set(getattr(mine, f)), set(
            getattr(state, f))
        for x in (m - b) - now:  # added, absent: only a re-add of a synced one someone dropped
            if not undone(True, False, lambda e, f=f, x=x: x in getattr(e, f)):
                return False
        for x in (b - m) & now:  # dropped, present: only a drop of the author's own add,
            if not undone(False, True, lambda e, f=f, x=x: x in getattr(e, f)):  # another's
                return False
    if base is None:
        return state.body == mine.body
    b_lines, m_lines, s_lines = (base.body.splitlines(), mine.body.splitlines(),
                                 state.body.splitlines())
    if not len(b_lines) == len(m_lines) == len(s_lines):
        return False
    for i, (b_line, m_line, s_line) in enumerate(zip(b_lines, m_lines, s_lines, strict=True)):
        if m_line != b_line and s_line != m_line and not undone(
                m_line, s_line, lambda e, i=i: _line(e, i)):
            return False
    return True


def _line(e: Entry, i: int) -> str | None:
    lines = e.body.splitlines()
    return lines[i] if i < len(lines) else None


# ---------------------------------------------------------------- one hub for all examples


@dataclass
class World:
    hub: InprocHub
    devices: list[Device]


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    hub = InprocHub()
    first = hub.space("first")
    devices = [first.device(f"r{i}", "admin" if i == 0 else "editor") for i in range(3)]
    first.close()
    yield World(hub, devices)
    hub.close()


def run_history(world: World, n: int, steps: list[Step], rule: bool) -> None:
    # no fsync: this test is about merge, outbox and guard logic, not power cuts
    vlt.FSYNC = False
    space = world.hub.space()
    if rule:
        space.admin.admin_post(f"/v1/spaces/{space.id}/rules", RULE)
    root = scratch_dir()
    rs: list[Local] = []
    try:
        rs = [space.replica(root, f"r{i}", "admin" if i == 0 else "editor", durable=False,
                            device=world.devices[i]) for i in range(n)]
        writes: list[Write] = []
        reports: dict[int, sync_mod.SyncReport] = {}
        for i, r in enumerate(rs):
            reports[i] = r.sync()
        for who, action, eid, k in steps:
            i = who % n
            r = rs[i]
            if action == "sync":
                reports[i] = r.sync()
                continue
            cur = r.read(eid)
            new = edit(cur, eid, action, k)
            if new is None and not r.path(eid).exists():
                continue  # nothing to delete
            if new is not None and cur is not None and new.version == cur.version:
                continue  # the file already shows it (the same edit again): no write
            saw: list[Entry | None] = [cur]
            if eid in r.held():
                c = next(c for c in r.store.conflicts() if c.entry_id == eid)
                saw += [c.ours, c.theirs]
            state = r.store.states().get(eid)
            synced = state.synced if state is not None else None
            if synced is not None and synced.deleted:
                synced = None
            undo = new is None and synced is None
            # a file written where there is none, over an entry the store still has as
            # synced (a local delete not yet published), edits that synced state: the sync
            # merges it against it, so its changes are counted from it
            base = cur if cur is not None else synced
            if new is None:
                r.path(eid).unlink()
            else:
                r.write(new)
            writes.append(Write(len(writes), i, eid, base, new, tuple(saw), undo, synced))
        for _ in range(2):
            for i, r in enumerate(rs):
                reports[i] = r.sync()
        check(space, rs, writes, reports)
    finally:
        vlt.FSYNC = True
        for r in rs:
            r.close()
        space.close()
        shutil.rmtree(root, ignore_errors=True)


def check(space, rs: list[Local], writes: list[Write],
          reports: dict[int, sync_mod.SyncReport]) -> None:
    # 1. one history: every store has the same digest (head and synced entries)
    assert len({r.store.digest() for r in rs}) == 1
    final = space.live()
    pending: list[set[str]] = []
    states_of = [r.store.states() for r in rs]
    for i, r in enumerate(rs):
        held = r.held()
        denied = {d["id"] for d in reports[i].policy_denied}
        states = states_of[i]
        # 2. nothing left unpublished but what is held or denied by the rules
        dirty = {eid for eid, s in states.items() if s.dirty} - held
        assert dirty <= denied, (r.name, dirty, denied)
        pending.append(held | denied)
        # 3. every other file shows the hub's state
        for eid in IDS:
            if eid in held or eid in denied:
                continue
            mine, theirs = r.read(eid), final.get(eid)
            assert (mine.version if mine else None) == (theirs.version if theirs else None), (
                r.name, eid)
    severities = frozenset(w.entry.meta.get("severity") for w in writes
                           if w.entry is not None and "severity" in w.entry.meta)
    # 4. every write survives by content, or a later writer saw it
    for w in writes:
        if w.undo:
            continue
        r = rs[w.replica]
        local = states_of[w.replica].get(w.eid)
        others = tuple(o.entry for o in writes if o.eid == w.eid and o.replica != w.replica)
        if carries(w, final.get(w.eid), severities, others):
            continue
        if w.eid in pending[w.replica] and carries(w, local.local if local else None,
                                                   severities, others):
            continue
        if any(later.eid == w.eid and any(carries(w, s, severities, others) for s in later.saw)
               for later in writes[w.n + 1:]):
            continue
        # the very content w wrote was the base of another replica's write, in whatever
        # order the two happened (w re-created a state already published, which someone
        # had seen and edited): its content is in the history that write superseded
        if w.entry is not None and any(
                o.eid == w.eid and o.replica != w.replica and any(
                    x is not None and x.version == w.entry.version for x in o.saw)
                for o in writes):
            continue
        raise AssertionError(f"write lost: {w}\nfinal: {final.get(w.eid)}\n"
                             f"{r.name} local: {local}")


# each half of QUIRE_PROP_EXAMPLES (at least 100 each: 200 in all)
HALF = settings(max_examples=max(100, (EXAMPLES + 1) // 2), deadline=None,
                phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


@pytest.mark.slow
@HALF
@given(n=st.just(3), steps=histories, rule=st.booleans())
# r2 edits page/a (lines 4-5, tag t2) on r1's create; its sync pulls r1's title/tag edit
# (merged cleanly into the write) and then r0's held-create resolution that put line 3
# back (touches r2's lines: held, ours = the merged state, not the write itself)
@example(n=3, rule=False, steps=[
    (0, "sync", "guardrail/g", 11), (1, "sync", "guardrail/g", 9), (1, "line", "page/a", 9),
    (1, "sync", "page/a", 5), (2, "line", "guardrail/g", 0), (0, "severity", "guardrail/g", 0),
    (2, "sync", "guardrail/g", 1), (0, "severity", "page/a", 5), (1, "tag", "page/a", 7),
    (2, "line", "page/a", 10), (2, "line", "page/a", 11), (1, "title", "page/a", 5),
    (0, "sync", "page/a", 10), (0, "severity", "page/b", 2), (0, "severity", "guardrail/g", 2),
    (0, "tag", "page/a", 10), (1, "tag", "page/b", 4), (1, "severity", "page/b", 0),
    (0, "title", "guardrail/g", 3), (1, "sync", "guardrail/g", 7),
    (1, "title", "guardrail/g", 10), (2, "tag", "page/a", 5)])
def test_random_histories_converge_and_every_write_survives_or_was_seen(world, n, steps, rule):
    run_history(world, n, steps, rule)


class Crash(BaseException):
    """Stands in for SIGKILL in-process: unwinds without any cleanup code running."""


# mid_clone fires only in a snapshot big enough for the vault writer processes (4,000+
# entries): tests/replica/engine/test_clone_e2e.py kills a real `quire join` there
SYNC_POINTS = tuple(p for p in POINTS if p != "mid_clone")


@pytest.mark.parametrize("point", SYNC_POINTS)
def test_crash_at_every_point_is_completed_by_the_next_sync(tmp_path, space, monkeypatch,
                                                            point):
    a, b = space.replica(tmp_path, "a"), space.replica(tmp_path, "b")
    a.sync()
    b.sync()
    a.write(Entry(id="page/remote", title="from a", body="a\n"))
    a.sync()
    b.write(Entry(id="page/local", title="from b", body="b\n"))

    def crash(name: str) -> None:
        if name == point:
            raise Crash(name)

    monkeypatch.setattr(sync_mod, "crash_point", crash)
    monkeypatch.setattr(ledger_mod, "crash_point", crash)  # the vault writes' points
    monkeypatch.setattr(push_mod, "crash_point", crash)  # the push part's
    monkeypatch.setattr(clone_mod, "crash_point", crash)  # and the snapshot part's
    with pytest.raises(Crash):
        b.sync()
    monkeypatch.undo()
    b.close()
    b2 = b.reopen()  # a fresh process: new store handle and client, same files and ids
    b2.sync()
    b2.sync()
    assert len(space.batches(b2)) == 1
    assert b2.read("page/remote").title == "from a"
    assert b2.read("page/local").title == "from b"
    assert space.live()["page/local"].title == "from b"
    a.sync()
    assert a.files() == b2.files() and a.store.digest() == b2.store.digest()
    a.close()
    b2.close()
