"""A watcher that speaks (docs/watch.md, "What the watcher says"): one line per pull, push
and conflict on ``quire watch``'s output and in the space's ``watch.log``, a desktop
notification with ``--notify`` (a fake ``notify-send`` on PATH records its arguments), and
a conflict arriving under the watcher shown by ``quire status`` at once. Before this
(0506cf5) the watcher printed "watching …" and "watcher stopped" and nothing in between.
Real hub, real CLI, real watcher."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from replica.machine.home import Home
from tests.kit.watcher import DEADLINE, WatchProc, wait_for
from tests.replica.watch.test_watch_e2e import HubHandle, _entry, _has, _team

pytestmark = pytest.mark.e2e

ULID = re.compile(r"\b[0-9a-hjkmnp-tv-z]{26}\b")


def _fake_notify_send(bin_dir: Path, record: Path) -> None:
    bin_dir.mkdir()
    script = bin_dir / "notify-send"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {record}\nprintf -- "--\\n" >> '
                      f"{record}\n")
    script.chmod(0o755)


def test_the_watcher_says_what_it_pulled_pushed_and_held_and_notifies(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    team = _team(*shared_hub, tmp_path)
    ann, bob = team.members("ann", "bob")
    ann.write(_entry("page/deploy", "line one\n"))
    ann.sync()
    bob.sync()
    record = tmp_path / "notified.txt"
    _fake_notify_send(tmp_path / "bin", record)
    # a long debounce: bob's own edit below waits in the watcher while ann's arrives, so
    # the watcher's sync meets both (a conflict held under the watcher, deterministically)
    w = WatchProc(bob, args=("--notify",),
                  env={"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
                       "QUIRE_WATCH_DEBOUNCE_MS": "600000",
                       "QUIRE_WATCH_DEBOUNCE_MAX_MS": "600000"})
    try:
        w.wait_ready()
        ann.write(_entry("page/deploy", "line one\nline two by ann\n"))
        ann.write(_entry("page/new", "made by ann\n"))
        ann.sync()
        wait_for(lambda: re.search(r"pulled from \S+: edited page/deploy \(\+1 -0 lines\), "
                                   r"created page/new \(1 line\)", w.log.read_text()),
                 DEADLINE, lambda: w.log.read_text()[-2000:])
        assert _has(bob, "page/new", "made by ann\n")
        wait_for(lambda: "edited page/deploy" in record.read_text()
                 if record.exists() else False, DEADLINE, "no notification")
        assert record.read_text().splitlines()[:2] == ["--app-name=Quire",
                                                       f"Quire: {team.name}"]

        # a conflict arriving under the watcher: bob's edit waits for its debounce
        bob.write(_entry("page/deploy", "bob rewrote it\n"))
        wait_for(lambda: w.status().get("unpublished", {}).get("waiting", 0) >= 1, DEADLINE,
                 lambda: str(w.status()))
        ann.write(_entry("page/deploy", "ann rewrote it\n"))
        ann.sync()
        wait_for(lambda: "conflict: page/deploy is held" in w.log.read_text(), DEADLINE,
                 lambda: w.log.read_text()[-2000:] + str(w.status()))
        status = bob.run("status").stdout
        assert "held:   page/deploy" in status
        assert "conflict: page/deploy is held" in status  # the watcher's recent lines
        assert "conflict: page/deploy" in record.read_text()
        doc = bob.status()
        assert doc["state"] == "conflicts"
        assert any(a["kind"] == "conflict" for a in doc["watcher"]["activity"])

    finally:
        assert w.stop() == 0
    text = w.log.read_text()
    space = Home(bob.home).spaces()[0]
    kept = (Path(space.dir) / "watch.log").read_text()
    assert "created page/new (1 line)" in kept
    assert "conflict: page/deploy is held" in kept
    assert oct((Path(space.dir) / "watch.log").stat().st_mode & 0o777) == "0o600"
    said = [ln for ln in text.splitlines() if team.name + ":" in ln]
    assert said and not any(ULID.search(ln) for ln in said), said

