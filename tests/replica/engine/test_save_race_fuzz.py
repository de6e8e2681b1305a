"""Randomized saves racing syncs (issue 35): several replicas of one space on the real hub
application in-process (tests/kit/inproc.py), people saving in every editor style at random
moments (between syncs, and inside a sync at one of its own steps), syncs killed midway,
the hub failing requests (before it sees them, or after it committed and before the answer
arrives), and at the end an oracle over every write.

    seed ──► random.Random ──► steps: save (atomic, in place, two writes, a two-step save
                               left half written across syncs), delete, rename, create,
                               resolve (remove a marker), sync (quire sync, the watcher's
                               vault-event sync, its head-event sync, the fast path), a
                               person's action run inside a sync at a crash point
                               (replica/engine/crash.py), a sync killed at one, a request
                               failed, time passing (file mtimes aged past the quiet period)
    heal: every save finished, time passes, every replica syncs until nothing is left
    oracle: every token a person wrote is in the hub's final state, or in a conflict held on
            a replica, or was removed by a person whose file showed it (an edit of its line,
            a delete, a resolution whose marker named the version holding it)

Every body line is a token (``tk<replica>x<n>``, seeds ``sd<entry>x<line>``): an edit
replaces one line's token, so what each write did and what its author saw are sets of tokens.
The person reads the file right before saving (an editor that noticed the file changed on
disk): what the file showed is what they saw. A token that ends nowhere and that nobody saw
is a write lost or overwritten unseen; the test fails with the seed to replay it. The person
and the ledger are tests/kit/editor.py's (shared with tests/e2e/test_save_race_fuzz_e2e.py).

Settings: ``QUIRE_FUZZ_SECONDS`` (default 60: seeds run until it is spent),
``QUIRE_FUZZ_SEEDS`` (stop after this many seeds), ``QUIRE_FUZZ_SEED`` (replay one seed),
``QUIRE_FUZZ_STEPS`` (steps a seed, default 60). The counts of seeds, writes and faults are
printed (``-s`` shows them).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from random import Random
from typing import Any

import httpx2
import pytest

from replica.engine import crash
from replica.machine.home import SpaceConfig
from replica.vault import files as vlt
from replica.watch.syncer import SpaceSyncer
from shared.digest import genesis_digest
from shared.errors import QuireError
from tests.kit.editor import Ledger, Person, seeds, tokens
from tests.kit.inproc import InprocHub, Local, Space, scratch_dir

SECONDS = float(os.environ.get("QUIRE_FUZZ_SECONDS", "60"))
SEEDS = int(os.environ.get("QUIRE_FUZZ_SEEDS", "0")) or None
SEED = os.environ.get("QUIRE_FUZZ_SEED")
STEPS = int(os.environ.get("QUIRE_FUZZ_STEPS", "60"))
REPLICAS = 3
PAGES = ("page/p0", "page/p1", "page/p2")
QUIET_MS = 5000  # long: a sync never outlasts it, so whether a write waits is the seed's
STYLES = ("atomic", "in_place", "two_writes")
POINTS = ("after_scan", "after_pull", "before_vault_write", "mid_vault_write",
          "vault_written")
PATHS = ("cli", "watcher", "remote", "fast")


class Killed(BaseException):
    """A sync killed at a crash point: unwinds without cleanup, like SIGKILL in-process."""


# ---------------------------------------------------------------- the hub, failing


class Faulty(httpx2.BaseTransport):
    """The hub's transport, failing one request when armed: ``before`` (the hub never sees
    it: down) or ``after`` (the hub did the work, the answer is lost: killed mid-answer)."""

    def __init__(self, inner: httpx2.BaseTransport):
        self.inner = inner
        self.armed: tuple[int, str] | None = None  # (requests to let through first, how)
        self.faults = 0

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.armed is not None:
            n, how = self.armed
            if n > 0:
                self.armed = (n - 1, how)
            else:
                self.armed = None
                self.faults += 1
                if how == "before":
                    raise httpx2.ConnectError("hub down (fuzz)", request=request)
                self.inner.handle_request(request)
                raise httpx2.ReadError("answer lost (fuzz)", request=request)
        return self.inner.handle_request(request)

    def close(self) -> None:
        pass


# ---------------------------------------------------------------- a replica and its paths


class Node:
    """One replica: its person, its failing transport, its watcher syncer."""

    def __init__(self, i: int, local: Local, book: Ledger, rng: Random):
        self.i, self.local = i, local
        self.person = Person(i, local, book, rng)
        self.faulty: Faulty = local.transport
        self.syncer = self._syncer()

    def _syncer(self) -> SpaceSyncer:
        local = self.local
        cfg = SpaceConfig(space_id=local.space.id, name=local.space.name, hub_id="inproc",
                          replica_id=local.engine.replica_id, vault=local.vault,
                          role="editor", dir=local.root / local.name)
        syncer = SpaceSyncer(None, cfg)
        syncer._parts = (local.engine, local.client, local.store)
        return syncer

    def restart(self) -> None:
        """A killed process: everything in memory gone; the store and vault as they are."""
        self.local.close()
        self.local = self.local.reopen()
        self.faulty = self.local.transport
        self.person.local = self.local
        self.syncer = self._syncer()

    def sync(self, path: str, space: Space) -> None:
        if path == "cli":
            self.local.sync()
        elif path == "watcher":
            self.syncer(True, None)
        elif path == "remote":
            self.syncer(False, None)
        elif self.syncer.apply(delivered(space)) is None:  # the fast path, else a full sync
            self.syncer(False, None)

    def age(self) -> None:
        """Time passes: every file's mtime moves past the quiet period (an open writer
        still holds its file: the kernel says so)."""
        old = time.time_ns() - 2 * QUIET_MS * 1_000_000
        for p in self.local.vault.rglob("*.md"):
            if not p.is_symlink():
                os.utime(p, ns=(old, old))


def delivered(space: Space) -> list[dict[str, Any]]:
    """Every batch as head events carry them (tests/replica/watch/test_fast_path.py)."""
    h = space.head()
    page = space.admin.changes(space.id, epoch=h["epoch"], after=0,
                               after_digest=genesis_digest(space.id, h["epoch"]), limit=5000)
    lines = [{"batch": c.batch.to_wire(), "seq": c.seq, "head": c.head,
              "accepted_at": c.accepted_at, "author": c.author, "receipt": c.receipt}
             for c in page.changes]
    if lines and page.signed is not None:
        lines[-1]["end_head"] = page.signed.wire
    return lines


# ---------------------------------------------------------------- the step hook


class Steps:
    """``crash_point`` in every replica module replaced: runs the action armed for a point
    (a person's, or a kill) once, then does what the real one does."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.armed: dict[str, Callable[[], None]] = {}
        real = crash.crash_point

        def crash_point(name: str) -> None:
            action = self.armed.pop(name, None)
            if action is not None:
                action()
            real(name)

        for mod in list(sys.modules.values()):
            if (getattr(mod, "__name__", "").startswith("replica.")
                    and getattr(mod, "crash_point", None) is real):
                monkeypatch.setattr(mod, "crash_point", crash_point)


# ---------------------------------------------------------------- one seed


def run_seed(hub: InprocHub, seed: int, steps: Steps, book: Ledger) -> None:
    """One random history, healed and checked; raises with the seed to replay it."""
    rng = Random(seed)
    vlt_fsync, vlt.FSYNC = vlt.FSYNC, False  # no power cuts here: fsyncs only cost time
    space = hub.space()
    root = scratch_dir()
    log: list[str] = []
    nodes: list[Node] = []
    try:
        for i in range(REPLICAS):
            local = space.replica(root, f"r{i}", durable=False, wrap=Faulty)
            local.vault_quiet_ms = local.engine.ledger.quiet_ms = QUIET_MS  # and reopened
            nodes.append(Node(i, local, book, rng))
        first = nodes[0].local
        for k, eid in enumerate(PAGES):
            first.write(book.seed_page(k, eid))
        for node in nodes:
            node.local.sync()
        for n in range(STEPS):
            node = rng.choice(nodes)
            roll = rng.random()
            if roll < 0.45:
                what = rng.choice(["atomic", "in_place", "two_writes", "atomic", "in_place",
                                   "delete", "rename", "create", "resolve", "resolve",
                                   "half", "finish"])
                log.append(f"{n}: r{node.i} {what}")
                node.person.act(what)
            elif roll < 0.55:
                log.append(f"{n}: r{node.i} time passes")
                node.age()
            else:
                run_sync(node, space, rng, steps, book, log, n)
        for node in nodes:  # heal: every save finished, then quiet, then sync to the end
            node.person.finish()
        heal(nodes, space)
        lost, over = check(nodes, space, book)
        assert not lost and not over, f"lost: {lost}\noverwritten unseen: {over}"
    except BaseException:
        print(f"\nfuzz seed {seed} failed; replay: QUIRE_FUZZ_SEED={seed}\n" + "\n".join(
            log[-60:]), file=sys.stderr)
        raise
    finally:
        for node in nodes:
            node.person.finish()
            book.faults += node.faulty.faults
            node.local.close()
        vlt.FSYNC = vlt_fsync
        space.close()
        shutil.rmtree(root, ignore_errors=True)


def run_sync(node: Node, space: Space, rng: Random, steps: Steps, book: Ledger,
             log: list[str], n: int) -> None:
    path = rng.choice(PATHS)
    note = f"{n}: r{node.i} sync {path}"
    steps.armed.clear()
    if rng.random() < 0.5:  # the person acts inside the sync, at one of its steps
        point = rng.choice(POINTS)
        what = rng.choice(["atomic", "in_place", "two_writes", "delete", "rename",
                           "half", "finish", "resolve"])
        roll = rng.random()

        def person() -> None:
            # most often the very file the sync is about to write
            now = [e for e, _c, _p in node.local.store.pending_vault_writes()]
            node.person.act(what, rng.choice(now) if now and roll < 0.8 else None)
            book.count("race")
        steps.armed[point] = person
        note += f", {what} at {point}"
    if rng.random() < 0.15:
        at = rng.choice(POINTS)
        first = steps.armed.get(at)  # the person's action there, if any, runs first

        def kill() -> None:
            if first is not None:
                first()
            raise Killed(at)
        steps.armed[at] = kill
        note += f", killed at {at}"
    if rng.random() < 0.15:
        how = rng.choice(["before", "after"])
        node.faulty.armed = (rng.randint(0, 4), how)
        note += f", hub fails a request ({how})"
    log.append(note)
    try:
        node.sync(path, space)
    except Killed:
        book.count("kill")
        node.restart()
    except QuireError as e:  # the hub failed it: the next sync finishes the work
        log.append(f"   {e.code}: {e.message[:80]}")
    finally:
        steps.armed.clear()
        node.faulty.armed = None


def heal(nodes: list[Node], space: Space) -> None:
    """Every replica syncs until nothing is left to write or publish and all hold the
    hub's head."""
    for _ in range(12):
        for node in nodes:
            node.age()
            node.local.sync()
        head = space.head()
        if all(not node.local.store.pending_vault_writes()
               and not node.local.store.dirty_count() and not node.local.store.outbox()
               and (h := node.local.store.head()) is not None and h.seq == head["seq"]
               for node in nodes):
            return
    raise AssertionError("the replicas did not settle: " + "; ".join(
        f"r{n.i}: pending {n.local.store.pending_vault_writes()[:3]}, dirty "
        f"{n.local.store.dirty_count()}" for n in nodes))


def check(nodes: list[Node], space: Space, book: Ledger) -> tuple[list[str], list[str]]:
    """(lost, overwritten unseen): tokens in no final state, no held conflict, and never
    removed by a person who saw them. Also: every file not held shows the hub's state."""
    live = space.live()
    final: set[str] = set()
    for e in live.values():
        final |= tokens(e.body.encode())
    held: set[str] = set()
    for node in nodes:
        states = node.local.store.states()
        for c in node.local.store.conflicts():
            # ours is the held entry's local state (edited while held: the file, marker kept)
            for side in (c.ours, c.theirs, states[c.entry_id].local):
                if side is not None and not side.deleted:
                    held |= tokens(side.body.encode())
        held_ids = node.local.held()
        for eid, entry in live.items():
            if eid not in held_ids:
                mine = node.local.read(eid)
                assert mine is not None and mine.version == entry.version, (
                    f"r{node.i}'s {eid} is not the hub's")
    book.written_total += len(book.written)
    return book.missing(final, held, set(live))


# ---------------------------------------------------------------- the test


@pytest.mark.slow
def test_saves_racing_syncs_lose_no_write_and_overwrite_none_unseen(
        inproc_hub: InprocHub, monkeypatch: pytest.MonkeyPatch) -> None:
    steps = Steps(monkeypatch)
    totals = Ledger()
    started = time.monotonic()
    done: list[int] = []
    for seed in seeds(SEED):
        print(f"fuzz seed {seed}", file=sys.stderr)
        book = Ledger()
        run_seed(inproc_hub, seed, steps, book)
        done.append(seed)
        totals.written_total += book.written_total
        totals.faults += book.faults
        for k, v in book.counts.items():
            totals.counts[k] = totals.counts.get(k, 0) + v
        if SEED is not None or (SEEDS is not None and len(done) >= SEEDS) or (
                SEEDS is None and time.monotonic() - started >= SECONDS):
            break
    print(f"fuzz: {len(done)} seeds ({done[0]}..{done[-1]}), {totals.written_total} writes, "
          f"{totals.faults} hub faults, {totals.counts}, 0 lost, 0 overwritten unseen",
          file=sys.stderr)
