"""What the watcher says (replica/watch/activity.py, docs/watch.md "What the watcher
says"): the lines of a sync by table, the core telling refusals, failures and the vault's
comings and goings once each under a fake clock, and the teller's log and notifier."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from replica.watch.activity import Line, Teller, sync_lines, who
from replica.watch.core import SyncResult, Watcher, WatchSettings
from shared.errors import Forbidden, TransferFailed, VaultMissing

ME, BOB = "01me000000000000000000000a", "01bob00000000000000000000a"


def _row(kind: str, entries: list[str], user: str | None = None, replica: str = "r-other",
         agent: str | None = None) -> dict[str, Any]:
    return {"kind": kind, "entries": json.dumps(entries), "replica_id": replica,
            "author": json.dumps({"user": user, "device": "d", "agent": agent})}


@pytest.mark.parametrize(("rows", "report", "names", "want"), [
    ([_row("batch", ["page/a", "page/b"], BOB)], {}, {BOB: "Bob"},
     [("pull", "pulled page/a, page/b from Bob")]),
    ([_row("batch", ["page/a"], BOB, agent="scout")], {}, {},
     [("pull", "pulled page/a from a teammate (agent scout)")]),
    ([_row("batch", ["page/a"], ME)], {}, {}, [("pull", "pulled page/a from you")]),
    ([_row("batch", ["page/gone"], BOB)], {}, {BOB: "Bob"},
     [("pull", "pulled page/gone (deleted) from Bob")]),
    ([_row("batch", [f"page/p{i}" for i in range(8)], BOB)], {}, {BOB: "Bob"},
     [("pull", "pulled page/p0, page/p1, page/p2, page/p3, page/p4 and 3 more from Bob")]),
    ([_row("push", ["page/mine"], replica="r-me"),
      _row("batch", ["page/also-mine"], ME, replica="r-me")], {}, {},
     [("push", "pushed page/also-mine, page/mine")]),
    ([], {"held": ["page/x"]}, {},
     [("conflict", "conflict: page/x is held (your version stays in the vault; see: quire "
                   "conflicts show page/x)")]),
    ([], {"policy_denied": [{"id": "guardrail/g", "action": "update", "rule": "r1"}]}, {},
     [("refusal", "refused by the space rules: guardrail/g (update, rule r1): kept locally, "
                  "not published")]),
    ([], {}, {}, []),
])
def test_the_lines_of_a_sync(rows: list[dict[str, Any]], report: dict[str, Any],
                             names: dict[str, str], want: list[tuple[str, str]]) -> None:
    got = sync_lines(rows, report, replica_id="r-me", me=ME, deleted=["page/gone"],
                     names=names)
    assert [(line.kind, line.text) for line in got] == want


def test_held_deletes_are_one_line_that_says_what_to_do() -> None:
    (line,) = sync_lines([], {"deletes_held": {"count": 200, "of": 200, "reason":
                                               "more than 50 pages", "entries": ["page/a"]}},
                         replica_id=None, me=None)
    assert line.kind == "deletes_held" and "quire sync --confirm-deletes" in line.text


def test_who_never_shows_an_id() -> None:
    assert who({"user": BOB}, ME) == "a teammate"
    assert who(None, ME) == "a teammate"


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000

    def __call__(self) -> int:
        return self.t


def _watcher(results: list[Any]) -> tuple[Watcher, list[Line], Clock]:
    told: list[Line] = []
    clock = Clock()

    def sync(local_only: bool, journal: Any) -> SyncResult:
        r = results.pop(0)
        if isinstance(r, BaseException):
            raise r
        return r  # type: ignore[no-any-return]

    w = Watcher(sync=sync, write_status=lambda doc: None, settings=WatchSettings(),
                clock=clock, rand=lambda: 0.0, tell=told.append, vault="/v")
    return w, told, clock


def test_a_sync_tells_its_lines_and_the_status_keeps_them() -> None:
    w, told, _ = _watcher([SyncResult({"epoch": "e", "seq": 1}, 0, 1,
                                      lines=[Line("conflict", "conflict: page/x is held")])])
    w.tick()
    assert [t.text for t in told] == ["conflict: page/x is held"]
    assert w.status()["activity"][-1]["kind"] == "conflict"


def test_a_failure_is_told_once_until_a_sync_succeeds() -> None:
    err = TransferFailed("the hub did not answer")
    w, told, clock = _watcher([err, err, SyncResult(None, 0, 0), err])
    for _ in range(4):
        w.tick()
        clock.t = (w.retry_at or clock.t) + 1
        w.want_sync = True
    assert [t.kind for t in told] == ["error", "error"]  # once, then again after a success


def test_a_refusal_is_told_once_when_the_watcher_suspends() -> None:
    w, told, clock = _watcher([Forbidden("device revoked"), Forbidden("device revoked")])
    w.tick()
    clock.t = (w.retry_at or 0) + 1
    w.tick()
    assert [t.kind for t in told] == ["refusal"] and "suspended" in told[0].text


def test_the_vault_gone_and_back_is_told_and_cuts_the_backoff_short() -> None:
    w, told, clock = _watcher([VaultMissing("gone", {})])
    w.handle(("vault", "gone"))
    w.tick()  # the sync meets the vault gone: no second line for it
    assert w.retry_at is not None and w.retry_at > clock.t
    w.handle(("vault", "back"))
    assert w.retry_at == clock.t  # the sync that waited runs now
    assert [t.text.split(" (")[0] for t in told] == ["the vault folder is gone",
                                                     "the vault folder is back"]


def test_the_teller_prints_logs_privately_and_notifies(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "notified"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "notify-send").write_text(f'#!/bin/sh\necho "$@" >> {record}\n')
    (bin_dir / "notify-send").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    said: list[str] = []
    t = Teller("team", tmp_path / "watch.log", say=said.append, notify=True)
    t.tell(Line("push", "pushed page/a"))  # no notification for one's own push
    t.tell(Line("pull", "pulled page/b from Bob"))
    assert said[0].endswith("team: pushed page/a") and len(said) == 2
    assert stat.S_IMODE((tmp_path / "watch.log").stat().st_mode) == 0o600
    assert (tmp_path / "watch.log").read_text().splitlines() == said
    import time

    deadline = time.monotonic() + 30
    while not (record.exists() and record.read_text()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert record.read_text() == "--app-name=Quire Quire: team pulled page/b from Bob\n"


def test_the_watch_log_moves_aside_past_its_size_and_one_old_file_is_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from replica.watch import activity

    monkeypatch.setattr(activity, "LOG_MAX_BYTES", 100)
    log_path = tmp_path / "watch.log"
    t = Teller("team", log_path, say=lambda _text: None)
    for i in range(6):
        t.tell(Line("pull", f"pulled page/{i} from Bob"))  # ~60 bytes a line
    old = log_path.with_name("watch.log.1").read_text().splitlines()
    new = log_path.read_text().splitlines()
    said = [int(ln.split("page/")[1][0]) for ln in old + new]
    assert said == list(range(said[0], 6))  # in order, the newest last, none lost between
    assert len(log_path.with_name("watch.log.1").read_bytes()) > 100 and new
    assert stat.S_IMODE(log_path.stat().st_mode) == 0o600


def test_without_notify_send_the_notification_is_silently_skipped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no notify-send here
    said: list[str] = []
    t = Teller("team", None, say=said.append, notify=True)
    t.tell(Line("pull", "pulled page/b"))
    assert t.notifier is None and len(said) == 1


def test_pulls_and_pushes_are_said_in_quire_logs_words() -> None:
    """With the report's ``changes`` (replica/engine/changes.py), the shared formatter of
    ``quire log`` and ``quire sync`` (replica/app/changelog.py) says who and what."""
    changes = [
        {"direction": "pulled", "author": {"user": BOB, "agent": "scout"}, "own": False,
         "ops": [{"id": "page/a", "action": "edited", "added": 1, "removed": 0},
                 {"id": "page/b", "action": "deleted"}], "provenance": None},
        {"direction": "pushed", "author": None, "own": True,
         "ops": [{"id": f"page/n{i}", "action": "created", "added": 2} for i in range(7)],
         "provenance": None},
    ]
    got = sync_lines([_row("batch", ["page/a", "page/b"], BOB)], {"changes": changes},
                     replica_id="r-me", me=ME, names={BOB: "Bob"})
    assert [(line.kind, line.text) for line in got] == [
        ("pull", "pulled from Bob for agent scout: edited page/a (+1 -0 lines), deleted page/b"),
        ("push", "pushed: created page/n0 (2 lines), created page/n1 (2 lines), created "
                 "page/n2 (2 lines), created page/n3 (2 lines), created page/n4 (2 lines) "
                 "and 2 more")]


def test_a_held_mass_delete_is_told_once_not_at_every_sync_that_holds_it() -> None:
    held = Line("deletes_held", "holding 60 deletes of the space's 60 pages (…)")
    w, told, _ = _watcher([SyncResult({"epoch": "e", "seq": 1}, 60, 0, lines=[held]),
                           SyncResult({"epoch": "e", "seq": 2}, 60, 0, lines=[held]),
                           SyncResult({"epoch": "e", "seq": 3}, 0, 0),
                           SyncResult({"epoch": "e", "seq": 4}, 60, 0, lines=[held])])
    for _ in range(4):
        w.want_sync = True
        w.tick()
    assert [t.kind for t in told] == ["deletes_held", "deletes_held"]  # again after a clear
