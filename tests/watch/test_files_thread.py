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

from replica.watch_daemon import files_thread

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
