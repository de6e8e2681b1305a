"""``quire status`` reads the store once (issue 35): a sync that commits while status reads
(the watcher's, publishing) cannot make it say ``pending`` with ``outbox: 1`` and nothing
unpublished, as two reads in separate transactions did."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replica.app import service
from replica.engine import pending
from replica.engine.report import SyncReport
from replica.machine.home import SpaceConfig
from shared.entry import Entry
from tests.kit.inproc import Local, Space


def config(local: Local, space: Space) -> SpaceConfig:
    return SpaceConfig(space_id=space.id, name=space.name, hub_id="inproc",
                       replica_id=local.engine.replica_id, vault=local.vault, role="editor",
                       dir=local.root / local.name)


def interleaved(monkeypatch: pytest.MonkeyPatch, between: Callable[[], Any]) -> None:
    """Run ``between`` once, inside status, after its first store read and before it reads
    what is unpublished."""
    real = pending.unpublished_txn
    done: list[bool] = []

    def unpublished_txn(*args: Any, **kwargs: Any) -> pending.Unpublished:
        if not done:
            done.append(True)
            between()
        return real(*args, **kwargs)

    monkeypatch.setattr(pending, "unpublished_txn", unpublished_txn)


@pytest.mark.parametrize("scan", [True, False])
def test_a_push_between_status_reads_never_splits_outbox_from_unpublished(
        tmp_path: Path, space: Space, monkeypatch: pytest.MonkeyPatch, scan: bool) -> None:
    a = space.replica(tmp_path, "a")
    try:
        a.sync()
        a.write(Entry(id="page/x", title="x", body="x\n"))
        a.engine.scan(SyncReport())
        assert a.store.dirty_count() == 1  # folded in: the store's outbox holds it
        pushed: list[int] = []
        interleaved(monkeypatch, lambda: pushed.append(a.sync().pushed))
        doc = service.status_doc(config(a, space), scan=scan, store=a.store)
        assert pushed == [1], "the push did not run between the reads"
        # one read: the state before the push, whole (the push's commit is not half seen)
        assert doc["outbox"] == 1 and doc["unpublished"]["entries"] == ["page/x"]
        assert doc["state"] == "pending"
        monkeypatch.undo()
        after = service.status_doc(config(a, space), scan=scan, store=a.store)
        assert after["outbox"] == 0 and after["unpublished"]["entries"] == []
        assert after["state"] == "ok" and after["head"]["seq"] > doc["head"]["seq"]
    finally:
        a.close()
