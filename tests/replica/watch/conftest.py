"""Shared fixtures for the watcher tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.replica.watch.test_watch_e2e import HubHandle, _serve


@pytest.fixture(scope="module")
def shared_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HubHandle, Path]]:
    """One real SQLite hub per test module (each test makes its own space)."""
    h, owner = _serve(tmp_path_factory.mktemp("watch"))
    yield h, owner
    for p in h.procs:
        p.stop()
