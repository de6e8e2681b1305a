"""The watcher's files thread (real inotify through watchfiles) reports every entry file
written into the vault, including one written into a folder created a moment before: the
watch on a new folder starts only once its creation is seen, so without a look inside new
folders such a file raised no event (the first page/ entry of a vault waited for the next
idle poll, 30 minutes)."""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from replica.watch import daemon as watch_daemon
from replica.watch.daemon import files_thread

FOLDERS = 40
DEADLINE_S = 60.0


def test_a_file_written_into_a_new_folder_is_reported(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "page").mkdir()
    inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
    stop = threading.Event()
    t = threading.Thread(target=files_thread, args=(vault, inbox, stop), daemon=True)
    t.start()
    reported: set[str] = set()

    def drain() -> None:
        while True:
            try:
                msg = inbox.get_nowait()
            except queue.Empty:
                return
            assert msg[0] in ("local", "armed"), msg  # "armed": its own cookie came back,
            if msg[0] == "local":  # before or after the probe, as the machine's load has it
                reported.update(msg[2])

    try:
        # armed: a file in an existing folder is reported (so the watch is running)
        probe = vault / "page" / "probe.md"
        deadline = time.monotonic() + DEADLINE_S
        while str(probe) not in reported:
            probe.write_text(f"probe {time.monotonic()}\n")
            drain()
            assert time.monotonic() < deadline, "the vault watch never started"
            time.sleep(0.05)  # polling pace only
        written = []
        for i in range(FOLDERS):
            f = vault / f"kind{i}" / "deep" / "x.md"
            f.parent.mkdir(parents=True)  # a new folder (two levels), the file at once
            f.write_text("x\n")
            written.append(str(f))
        deadline = time.monotonic() + DEADLINE_S
        while not set(written) <= reported and time.monotonic() < deadline:
            drain()
            time.sleep(0.05)  # polling pace only
        assert sorted(set(written) - reported) == []
    finally:
        stop.set()
        t.join(10)


def _started(vault: Path, inbox: queue.Queue[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Wait until the watch reports a probe file; the messages seen meanwhile."""
    seen: list[tuple[Any, ...]] = []
    probe = vault / "page" / "probe.md"
    deadline = time.monotonic() + DEADLINE_S
    while not any(m[0] == "local" and str(probe) in m[2] for m in seen):
        probe.write_text(f"probe {time.monotonic()}\n")
        try:
            while True:
                seen.append(inbox.get(timeout=0.05))
        except queue.Empty:
            pass
        assert time.monotonic() < deadline, "the vault watch never started"
    return seen


def test_folder_events_are_journaled_and_a_burst_restarts_the_journal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder moved out of the vault raises one event, for the folder: it must reach the
    journal (else no scan by the journal sees its entries gone). A burst as large as one
    that may have overflowed the kernel's event queue (watchfiles does not report an
    overflow) must re-arm: the journal then restarts from a walk of the whole vault."""
    vault = tmp_path / "vault"
    (vault / "page" / "sub").mkdir(parents=True)
    (vault / "page" / "sub" / "a.md").write_text("a\n")
    inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
    stop = threading.Event()
    t = threading.Thread(target=files_thread, args=(vault, inbox, stop), daemon=True)
    t.start()
    try:
        _started(vault, inbox)
        (vault / "page" / "sub").rename(tmp_path / "away")  # one event: page/sub
        got: set[str] = set()
        deadline = time.monotonic() + DEADLINE_S
        while str(vault / "page" / "sub") not in got:
            assert time.monotonic() < deadline, f"no event for the folder: {got}"
            try:
                msg = inbox.get(timeout=0.1)
            except queue.Empty:
                continue
            if msg[0] == "local":
                got.update(msg[2])
        # (a smaller threshold: a batch lasts at most 50 ms, and files made faster than a
        # reader drains them then arrive in one, as the ones an overflow left would)
        monkeypatch.setattr(watch_daemon, "OVERFLOW_HINT", 50)
        burst = vault / "burst"
        burst.mkdir()
        for i in range(500):
            (burst / f"f{i}.md").write_text("x\n")
        deadline = time.monotonic() + DEADLINE_S
        while True:
            assert time.monotonic() < deadline, "a burst did not restart the journal"
            try:
                msg = inbox.get(timeout=0.1)
            except queue.Empty:
                continue
            if msg[0] == "armed":
                break
    finally:
        stop.set()
        t.join(10)


class _CountingStop(threading.Event):
    """A stop event that counts the waits on it (the files thread's looks for its vault)
    and sets ``looked`` at the fifth."""

    def __init__(self) -> None:
        super().__init__()
        self.waits = 0
        self.looked = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.waits += 1
        if self.waits >= 5:
            self.looked.set()
        return super().wait(timeout)


def test_a_vault_that_is_gone_is_waited_for_never_made(tmp_path: Path, monkeypatch) -> None:
    """A folder made at the vault's path would turn the person's ``mv`` of it back into a
    folder inside it, and is what an empty mount point looks like: the files thread waits
    for the vault to come back (replica/vault/presence.py has the syncs refuse meanwhile)."""
    monkeypatch.setattr(watch_daemon, "VAULT_WAIT_S", 0.01)
    away = tmp_path / "away"
    (away / "page").mkdir(parents=True)
    vault = tmp_path / "vault"
    inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
    stop = _CountingStop()
    t = threading.Thread(target=files_thread, args=(vault, inbox, stop), daemon=True)
    t.start()
    try:
        assert stop.looked.wait(DEADLINE_S), "the files thread never looked for its vault"
        assert not vault.exists()  # looked five times, made nothing
        away.rename(vault)  # back: watched from then on
        _started(vault, inbox)
    finally:
        stop.set()
        t.join(10)
