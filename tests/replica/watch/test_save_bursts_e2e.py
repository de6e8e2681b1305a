"""The watcher's short debounce (docs/decisions.md, "Watcher debounce"): what it promises
when an editor or an agent saves again and again. Real hub, real ``quire watch`` processes
at the default pacing; every outcome is polled with a generous deadline.

The promise: whatever a sync published along the way (a save written in several writes
with a pause longer than the debounce may be published half written), the *last* content
of every file is published and reaches the other vaults, and no file is lost."""

from __future__ import annotations

import os
import random
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from replica.vault import markdown as md
from replica.watch.core import WatchSettings
from shared.entry import make_entry
from tests.kit.cli import CliMember, CliTeam
from tests.kit.watcher import DEADLINE, WatchProc, wait_for

pytestmark = pytest.mark.e2e

# the default debounce, not the tests' slower one (tests/kit/watcher.py WATCH_ENV)
DEFAULT = {"QUIRE_WATCH_DEBOUNCE_MS": str(WatchSettings().debounce_ms),
           "QUIRE_WATCH_DEBOUNCE_MAX_MS": str(WatchSettings().debounce_max_ms)}


def _bytes(eid: str, body: str) -> bytes:
    return md.render(make_entry({"id": eid, "title": eid, "body": body}))


def _save(m: CliMember, eid: str, data: bytes, how: str, pause: float) -> None:
    """Save as an editor does: ``atomic`` (a temp file renamed over), ``in_place`` (one
    write), ``two_writes`` (truncate, write the first half, pause, write the rest)."""
    p = m.path(eid)
    p.parent.mkdir(parents=True, exist_ok=True)
    if how == "atomic":
        tmp = p.with_name(f".{p.name}.swp")
        tmp.write_bytes(data)
        os.replace(tmp, p)
        return
    with open(p, "wb") as f:
        if how == "two_writes":
            f.write(data[: len(data) // 2])
            f.flush()
            time.sleep(pause)  # sometimes longer than the debounce: a sync may read half
            f.write(data[len(data) // 2:])
        else:
            f.write(data)


def _holds(m: CliMember, want: dict[str, bytes]) -> bool:
    for eid, data in want.items():
        try:
            if m.path(eid).read_bytes() != data:
                return False
        except OSError:
            return False
    return True


def test_a_burst_of_saves_ends_with_every_last_content_in_the_other_vault(
        shared_hub: tuple[Any, Path], tmp_path: Path) -> None:
    h, owner = shared_hub
    team = CliTeam(h, owner, tmp_path, "b-" + uuid.uuid4().hex[:8])  # type: ignore[arg-type]
    ann, bob = team.members("ann", "bob")
    watchers = [WatchProc(m, env=DEFAULT) for m in (ann, bob)]
    rng = random.Random(16)
    last: dict[str, bytes] = {}
    try:
        for w in watchers:
            w.wait_ready()
        # one page saved 24 times in the three ways, with pauses around the debounce, and
        # new pages saved in between, some back to back
        for i in range(24):
            data = _bytes("page/draft", f"draft, save {i}\n" + "words " * rng.randrange(1, 200))
            _save(ann, "page/draft", data, ("atomic", "in_place", "two_writes")[i % 3],
                  rng.choice((0.0, 0.01, 0.08, 0.15)))
            last["page/draft"] = data
            if i % 3 == 1:
                eid = f"page/note-{i}"
                last[eid] = _bytes(eid, f"note written after save {i}\n")
                _save(ann, eid, last[eid], "atomic", 0)
            time.sleep(rng.choice((0.0, 0.005, 0.03, 0.07, 0.2)))
        wait_for(lambda: _holds(bob, last), DEADLINE,
                 lambda: f"bob's vault is missing the last saves: "
                         f"{[e for e in last if not _holds(bob, {e: last[e]})]}; "
                         f"{[w.status() for w in watchers]}")
        # and the writer has nothing left to publish: the last save was published, not
        # merely carried to bob by luck (ann's vault still shows exactly what she saved)
        wait_for(lambda: (s := watchers[0].status()).get("state") == "idle"
                 and s.get("outbox") == 0 and s["unpublished"]["count"] == 0, DEADLINE,
                 lambda: str(watchers[0].status()))
        assert _holds(ann, last)
        assert set(ann.files()) == set(bob.files())  # no file lost, none extra
    finally:
        codes = [w.stop() for w in watchers]
    assert codes == [0, 0]
