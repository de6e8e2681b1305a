"""The watcher's decisions under a fake clock: backoff pacing and bounds, debounce, the
reactions to hub events, errors, refusals and stream loss. Nothing sleeps."""

from __future__ import annotations

from typing import Any

import pytest

from replica.watch.core import Backoff, Debouncer, SyncResult, Watcher, WatchSettings
from shared.errors import (
    Forbidden,
    LockHeld,
    NotFound,
    PolicyDenied,
    TransferFailed,
    Unauthorized,
    Unavailable,
)


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000

    def __call__(self) -> int:
        return self.t

    def advance(self, ms: int) -> None:
        self.t += ms


@pytest.mark.parametrize("jitter_draw", [0.0, 0.5, 0.999])
def test_backoff_doubles_within_jitter_bounds_and_never_passes_the_cap(
        jitter_draw: float) -> None:
    b = Backoff(500, 8000, 0.5, rand=lambda: jitter_draw)
    delays = [b.next() for _ in range(8)]
    bases = [500, 1000, 2000, 4000, 8000, 8000, 8000, 8000]
    for d, base in zip(delays, bases, strict=True):
        assert base * 0.5 <= d <= base
    assert max(delays) <= 8000


def test_backoff_reset_starts_again_from_the_first_delay() -> None:
    b = Backoff(100, 10_000, 0.0)
    assert [b.next() for _ in range(4)] == [100, 200, 400, 800]
    b.reset()
    assert b.next() == 100


def test_backoff_with_no_jitter_is_exact_and_huge_attempts_do_not_overflow() -> None:
    b = Backoff(250, 60_000, 0.0)
    b.attempt = 10_000
    assert b.next() == 60_000


def test_debounce_waits_for_quiet_after_the_last_edit() -> None:
    c = Clock()
    d = Debouncer(500, 5000, c)
    assert not d.pending and d.deadline() is None and not d.due()
    d.touch()
    c.advance(300)
    d.touch()  # a second save restarts the quiet period
    c.advance(499)
    assert not d.due()
    c.advance(1)
    assert d.due()


def test_debounce_of_a_continuous_burst_fires_at_the_max_wait() -> None:
    c = Clock()
    d = Debouncer(500, 2000, c)
    fired_at = None
    for _ in range(100):  # an edit every 100 ms, never quiet
        d.touch()
        c.advance(100)
        if d.due():
            fired_at = c.t
            break
    assert fired_at is not None and fired_at - (1_000_000) == 2000


class FakeSync:
    def __init__(self, clock: Clock) -> None:
        self.calls: list[bool] = []
        self.journals: list[dict[str, Any] | None] = []
        self.problem_paths: list[str] = []
        self.errors: list[BaseException] = []
        self.head: dict[str, Any] = {"epoch": "e", "seq": 0}
        self.clock = clock

    def __call__(self, local_only: bool, journal: dict[str, Any] | None = None) -> SyncResult:
        self.calls.append(local_only)
        self.journals.append(journal)
        if self.errors:
            raise self.errors.pop(0)
        return SyncResult(dict(self.head), 0, 0, problem_paths=list(self.problem_paths))


def make(settings: WatchSettings | None = None) -> tuple[Watcher, FakeSync, Clock, list[dict]]:
    c = Clock()
    sync = FakeSync(c)
    statuses: list[dict[str, Any]] = []
    w = Watcher(sync=sync, write_status=statuses.append,
                settings=settings or WatchSettings(backoff_initial_ms=500, backoff_max_ms=4000,
                                                   backoff_jitter=0.5, debounce_ms=500,
                                                   poll_ms=10_000, idle_poll_ms=300_000,
                                                   suspended_retry_ms=60_000),
                clock=c, rand=lambda: 0.5)
    return w, sync, c, statuses


def test_a_head_event_for_a_newer_head_syncs_at_once_and_an_old_one_does_not() -> None:
    w, sync, c, _ = make()
    w.handle(("stream", "up"))
    w.tick()  # the start-up catch-up
    assert sync.calls == [False] and w.state == "idle"
    w.handle(("remote", {"epoch": "e", "seq": 0}))
    assert w.next_wake() > c.t
    w.tick()
    assert len(sync.calls) == 1  # already there
    sync.head = {"epoch": "e", "seq": 1}
    w.handle(("remote", {"epoch": "e", "seq": 1}))
    assert w.next_wake() == c.t
    w.tick()
    assert len(sync.calls) == 2 and w.status()["lag"] == {"seq": 0, "ms": 0}


def test_local_edits_publish_once_after_the_debounce() -> None:
    w, sync, c, _ = make()
    w.handle(("stream", "up"))
    w.tick()
    for _ in range(5):
        w.handle(("local", 1))
        c.advance(100)
        w.tick()
    assert sync.calls == [False]
    c.advance(400)
    assert w.next_wake() == c.t
    w.tick()
    assert sync.calls == [False, True]  # one local-only sync for the burst


def test_errors_back_off_within_the_configured_bounds_and_success_resets() -> None:
    s = WatchSettings(backoff_initial_ms=200, backoff_max_ms=1600, backoff_jitter=0.5,
                      poll_ms=1000)
    w, sync, c, statuses = make(s)
    sync.errors = [TransferFailed("down")] * 6 + [Unavailable("starting")]
    for _ in range(7):
        w.tick()
        assert w.state == "backoff" and w.retry_at is not None
        c.t = w.next_wake()
    w.tick()
    assert w.state == "idle" and w.backoff.attempt == 0 and w.last_error is None
    delays = statuses[-1]["backoff"]["delays"]
    assert [a for a, _ in delays] == list(range(7))
    b = Backoff(200, 1600, 0.5)
    for attempt, ms in delays:
        lo, hi = b.bounds(attempt)
        assert lo <= ms <= hi <= 1600
    assert [ms for _, ms in delays] == [150, 300, 600, 1200, 1200, 1200, 1200]


def test_the_stream_coming_back_cuts_the_backoff_short() -> None:
    w, sync, c, _ = make()
    sync.errors = [TransferFailed("down")] * 3
    for _ in range(3):
        w.tick()
        c.t = w.next_wake()
    assert w.state == "backoff"
    sync.errors = []
    w.handle(("stream", "up"))
    assert w.next_wake() <= c.t
    w.tick()
    assert w.state == "idle"


def test_losing_the_stream_polls_at_once_then_every_poll_interval() -> None:
    w, sync, c, _ = make()
    w.handle(("stream", "up"))
    w.tick()
    c.advance(1000)
    w.handle(("stream", "down"))
    w.tick()
    assert len(sync.calls) == 2
    c.advance(9_999)
    w.tick()
    assert len(sync.calls) == 2
    c.advance(1)
    w.tick()
    assert len(sync.calls) == 3


@pytest.mark.parametrize("err", [Unauthorized("revoked"), NotFound("not a member"),
                                 Forbidden("replica revoked")])
def test_refused_access_suspends_keeps_state_and_resumes_when_access_returns(
        err: Exception) -> None:
    w, sync, c, _ = make()
    resumed: list[bool] = []
    w.on_resume = lambda: resumed.append(True)
    sync.errors = [err, err]
    w.tick()
    assert w.state == "suspended" and w.last_error["code"] == err.code  # type: ignore[attr-defined]
    assert w.backoff.attempt == 0  # refusals are not retried at error pace
    c.advance(59_999)
    w.handle(("remote", {"epoch": "e", "seq": 9}))
    w.handle(("local", 1))
    w.tick()
    assert len(sync.calls) == 1  # nothing is sent while suspended
    c.advance(1)
    w.tick()
    assert len(sync.calls) == 2 and w.state == "suspended"
    c.t = w.next_wake()
    w.tick()
    assert w.state == "idle" and resumed == [True]


def test_a_revoked_event_suspends_without_a_request() -> None:
    w, sync, _, _ = make()
    w.handle(("refused", "not_found", "gone"))
    w.tick()
    assert sync.calls == [] and w.state == "suspended"


def test_policy_denial_is_an_error_not_a_suspension() -> None:
    w, sync, _, _ = make()
    sync.errors = [PolicyDenied("no guardrails for you")]
    w.tick()
    assert w.state == "backoff" and w.last_error["retryable"] is False  # type: ignore[index]


def test_a_manual_sync_holding_the_lock_is_waited_for_not_counted_as_an_error() -> None:
    w, sync, c, _ = make()
    sync.errors = [LockHeld("busy")]
    w.tick()
    assert w.backoff.attempt == 0 and w.last_error is None
    c.advance(250)
    w.tick()
    assert len(sync.calls) == 2 and w.state == "idle"


class FakeApply:
    def __init__(self, sync: FakeSync) -> None:
        self.calls: list[list[dict[str, Any]]] = []
        self.answer: str = "apply"  # apply | decline | fail
        self.sync = sync

    def __call__(self, lines: list[dict[str, Any]]) -> SyncResult | None:
        self.calls.append(lines)
        if self.answer == "fail":
            raise ValueError("chain broken")
        if self.answer == "decline":
            return None
        self.sync.head = {"epoch": "e", "seq": lines[-1]["seq"]}
        return SyncResult(dict(self.sync.head), 0, 0)


def make_fast() -> tuple[Watcher, FakeSync, FakeApply, Clock]:
    w, sync, c, _ = make()
    fast = FakeApply(sync)
    w.apply = fast
    w.handle(("stream", "up"))
    w.tick()  # the start-up catch-up: a full sync
    return w, sync, fast, c


def _event(seq: int, *, changes: bool = True) -> tuple[str, dict[str, Any]]:
    h: dict[str, Any] = {"epoch": "e", "seq": seq}
    if changes:
        h["changes"] = [{"seq": seq, "batch": {}}]
    return ("remote", h)


def test_a_head_event_carrying_its_change_is_applied_without_a_sync() -> None:
    w, sync, fast, _ = make_fast()
    w.handle(_event(1))
    w.handle(_event(2))  # a burst: both lines go in one apply, in order
    w.tick()
    assert sync.calls == [False] and [[x["seq"] for x in ls] for ls in fast.calls] == [[1, 2]]
    assert w.status()["head"]["seq"] == 2 and w.status()["applied"] == 1
    assert w.state == "idle" and w.status()["lag"] == {"seq": 0, "ms": 0}


@pytest.mark.parametrize("answer", ["decline", "fail"])
def test_delivered_changes_that_cannot_be_applied_fall_back_to_a_full_sync(answer: str
                                                                         ) -> None:
    w, sync, fast, _ = make_fast()
    fast.answer = answer
    sync.head = {"epoch": "e", "seq": 1}
    w.handle(_event(1))
    w.tick()
    assert len(fast.calls) == 1 and sync.calls == [False, False]
    assert w.status()["head"]["seq"] == 1 and w.last_error is None


def test_a_bare_head_event_or_pending_local_edits_take_the_full_sync() -> None:
    w, sync, fast, c = make_fast()
    sync.head = {"epoch": "e", "seq": 1}
    w.handle(_event(1, changes=False))
    w.tick()
    assert fast.calls == [] and sync.calls == [False, False]
    w.handle(("local", 1))  # an edit waiting for its debounce: the sync scans it first
    sync.head = {"epoch": "e", "seq": 2}
    w.handle(_event(2))
    w.tick()
    assert fast.calls == [] and sync.calls == [False, False, False]


def test_vault_events_of_our_own_writes_cost_no_scan_and_others_are_debounced() -> None:
    w, sync, fast, c = make_fast()
    seen: list[list[str]] = []
    own = {"v/page/a.md"}
    w.own = lambda paths: seen.append(paths) or set(paths) <= own
    w.handle(("local", 1, ["v/page/a.md"]))
    assert not w.debounce.pending
    w.handle(("local", 2, ["v/page/a.md", "v/page/b.md"]))
    assert w.debounce.pending
    c.advance(600)
    w.tick()
    assert sync.calls == [False, True] and w.status()["scans"] == 1
    assert seen == [["v/page/a.md"], ["v/page/a.md", "v/page/b.md"]]


def test_a_user_deletion_after_our_own_deletion_is_not_mistaken_for_ours(tmp_path) -> None:
    # the watcher remembers "we removed this file"; once the user re-creates it, that memory
    # is stale: the user's later deletion must be published, not ignored as our own write
    from types import SimpleNamespace

    from replica.watch.syncer import SpaceSyncer

    s = SpaceSyncer(None, SimpleNamespace(vault=tmp_path))
    path = tmp_path / "page" / "a.md"
    path.parent.mkdir()
    s._wrote[str(path)] = None  # what _remember_writes records for a removal it made
    assert s._known_write(str(path))  # its own removal: no scan needed
    path.write_text("re-created by the user\n")
    assert not s._known_write(str(path))
    path.unlink()
    assert not s._known_write(str(path))


def test_the_journal_is_trusted_only_after_a_scan_that_started_with_events_armed() -> None:
    w, sync, c, statuses = make()
    w.vault = "/v"
    w.tick()  # the catch-up sync at start: before the file events were armed
    assert sync.calls == [False] and not w.journal()["valid"]
    w.handle(("local", 1, ["/v/page/a.md"]))
    assert not w.journal()["valid"] and w.journal()["paths"] == []  # nothing to trust yet
    c.advance(10)
    w.handle(("armed",))
    assert w.due() == (True, True)  # a local scan at once, no hub request, no debounce wait
    w.tick()
    assert sync.calls == [False, True]
    assert w.journal()["valid"] and w.journal()["paths"] == []  # the scan took page/a
    w.handle(("local", 1, ["/v/page/b.md"]))
    w.handle(("cookie", ".quire-cookie-1"))  # handled after the edit before it
    j = statuses[-1]["journal"]
    assert j["paths"] == ["/v/page/b.md"] and j["cookies"] == [".quire-cookie-1"]
    assert statuses[-1]["unpublished"]["entries"] == ["page/b"]
    w.handle(("files_down",))  # a gap: events may be lost from here on
    assert not w.journal()["valid"] and w.journal()["paths"] == []


def test_syncs_scan_by_the_journal_only_while_it_is_valid_and_walk_every_idle_poll() -> None:
    """The watcher's own syncs get the journal (changed paths, and where the last scan found
    problems) once it is valid; before, and once the last walk is ``idle_poll_ms`` old (a
    safety net for an event lost unnoticed), they walk the whole vault (None)."""
    w, sync, c, _ = make()
    w.vault = "/v"
    w.handle(("stream", "up"))
    w.tick()
    c.advance(10)
    w.handle(("armed",))
    sync.problem_paths = ["page/x.txt"]
    w.tick()  # the scan that starts the journal: a walk
    assert sync.journals == [None, None]
    w.handle(("local", 1, ["/v/page/sub"]))  # a folder moved out: one event
    c.advance(600)
    w.tick()
    assert sync.calls[-1] is True
    assert sync.journals[-1] is not None and sync.journals[-1]["paths"] == ["/v/page/sub"]
    assert sync.journals[-1]["problem_paths"] == ["page/x.txt"]
    assert w.journal()["paths"] == []  # taken by that scan
    c.advance(300_000)  # idle_poll_ms since the last walk
    w.handle(("local", 1, ["/v/page/a.md"]))
    c.advance(600)
    w.tick()
    assert sync.journals[-1] is None  # walked: the safety net
    w.handle(("local", 1, ["/v/page/b.md"]))
    c.advance(600)
    w.tick()
    assert sync.journals[-1] is not None  # and the journal is used again


def test_changes_applied_from_a_head_event_do_not_start_the_journal() -> None:
    """The fast path applies a publication without scanning the vault: after a gap in the
    file events (re-armed), it must not count as the scan the journal starts from, or the
    edits made during the gap are never looked at."""
    applied: list[Any] = []
    w, sync, c, _ = make()
    w.apply = lambda lines: applied.append(lines) or SyncResult({"epoch": "e", "seq": 1}, 0, 0)
    w.handle(("stream", "up"))
    w.tick()
    c.advance(10)
    w.handle(("files_down",))
    w.handle(("armed",))  # events flow again; what happened in the gap is unknown
    w.handle(("remote", {"epoch": "e", "seq": 1, "changes": [{"seq": 1}]}))
    w.tick()
    assert applied and not w.journal()["valid"]  # applied, and still no journal to trust
    w.tick()  # the rescan: a walk
    assert sync.calls[-1] is True and sync.journals[-1] is None and w.journal()["valid"]


def test_a_failed_scan_does_not_start_the_journal() -> None:
    w, sync, c, _ = make()
    w.tick()
    c.advance(10)
    w.handle(("armed",))
    sync.errors.append(TransferFailed("down"))
    w.tick()
    assert not w.journal()["valid"]


@pytest.mark.parametrize("claim", [{"epoch": "e", "seq": 9}, {"epoch": "forged", "seq": 0}])
def test_a_head_claim_the_full_sync_does_not_reach_costs_one_sync_not_a_loop(
        claim: dict[str, Any]) -> None:
    """An event claims a head the hub's signed head (over our nonce) is not: a later seq, or
    another epoch (epoch events are not signed). One full sync settles it; before, the
    watcher synced again at every tick, forever (tests/replica/watch/test_hostile_watch.py)."""
    w, sync, c, _ = make()
    w.handle(("stream", "up"))
    w.tick()
    sync.head = {"epoch": "e", "seq": 1}  # the hub's real head
    w.handle(("remote", claim))
    w.tick()
    for _ in range(5):
        c.advance(1000)
        w.tick()
    assert sync.calls == [False, False]
    assert w.status()["hub_head"] == {"epoch": "e", "seq": 1}
    assert w.status()["lag"] == {"seq": 0, "ms": 0} and w.state == "idle"
    w.handle(("remote", {"epoch": "e", "seq": 2}))  # a head after it still syncs
    w.tick()
    assert sync.calls == [False, False, False]


def test_a_stream_refused_for_a_lie_says_why_until_it_is_up_again() -> None:
    w, _sync, _c, _ = make()
    w.handle(("stream", "up"))
    err = {"code": "hub_unverified", "message": "head signature does not verify",
           "details": {"reason": "bad_signature"}}
    w.handle(("stream", "down", err))
    assert w.status()["stream"] == "down" and w.status()["stream_error"] == err
    w.handle(("stream", "up"))
    assert w.status()["stream_error"] is None


def test_changes_from_an_event_that_do_not_verify_are_named_until_one_verifies() -> None:
    from shared.errors import HubUnverified

    w, sync, fast, _ = make_fast()
    real = fast.__call__

    def lie(lines: list[dict[str, Any]]) -> SyncResult | None:
        raise HubUnverified("the changes do not end at the head the hub signed",
                            {"reason": "head_mismatch"})
    w.apply = lie
    sync.head = {"epoch": "e", "seq": 1}
    w.handle(_event(1))
    w.tick()  # refused, then the full sync (honest here) brings the head
    assert w.status()["head"]["seq"] == 1 and w.last_error is None
    assert w.status()["stream_error"]["details"] == {"reason": "head_mismatch"}
    w.apply = real
    w.handle(_event(2))
    w.tick()
    assert w.status()["applied"] == 1 and w.status()["stream_error"] is None


def test_a_verified_deletion_stops_the_watcher_and_an_unsigned_one_backs_off() -> None:
    """replica/engine/deleted.py: only ``VerifiedDeletion`` (the hub-signed statement checked) ends
    the watcher; a plain ``space_deleted`` off the wire is a failure like any other; a
    refusal still in the inbox after the deletion does not turn it into 'suspended'."""
    import queue
    import threading

    from replica.engine.deleted import VerifiedDeletion
    from shared.errors import SpaceDeleted

    w, sync, c, statuses = make()
    sync.errors = [SpaceDeleted("forged", {})]
    w.tick()
    assert w.state == "backoff" and not w.deleted
    c.t = w.next_wake()
    sync.errors = [VerifiedDeletion("deleted on the hub", {"verified": True})]
    inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
    inbox.put(("refused", "space_deleted", "from the event stream"))
    w.run(inbox, threading.Event())  # returns: the deletion ends the loop
    assert w.deleted and w.state == "deleted" and statuses[-1]["state"] == "deleted"
    assert statuses[-1]["last_error"]["code"] == "space_deleted"
    w.handle(("refused", "space_deleted", "late"))
    assert w.state == "deleted"
