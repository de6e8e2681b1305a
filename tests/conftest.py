"""Fixtures for every tier. The ``backend`` fixture runs a test once on SQLite and once on
the machine's PostgreSQL (skipped with a reason only when no server answers)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.hubproc import init_hub
from tests.kit.pg import pg_database, require_pg


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | None]:
    if request.param == "sqlite":
        yield None
        return
    require_pg()
    with pg_database() as url:
        yield url


@pytest.fixture
def hub_app(tmp_path: Path, db_url: str | None) -> Iterator[dict[str, Any]]:
    """An initialized hub served in-process; yields the app, hooks, store and owner code."""
    from starlette.testclient import TestClient

    from hub.app import create_app
    from hub.guard import GuardHooks
    from hub.settings import load_settings

    data = tmp_path / "hub"
    code = init_hub(data, db_url)
    settings = load_settings(data)
    hooks = GuardHooks()
    app = create_app(settings, hooks=hooks)
    with TestClient(app, base_url="http://testhub") as client:
        yield {"app": app, "client": client, "hooks": hooks, "code": code,
               "hub": app.state.hub, "settings": settings}


# Files whose tests take longest (seconds of one quiet full run, rounded): they start first.
# pytest-xdist's loadfile scheduler otherwise sorts files by their number of tests, so a
# file of one long test (the property tests, the PostgreSQL race) was handed out last and
# ran alone while the other workers sat idle: minutes of tail. The Makefile turns that
# sorting off (--no-loadscope-reorder); pytest-randomly's shuffle still decides the order
# among the rest, and among files of equal weight, and within every file.
LONG_FILES = {
    "tests/replica/engine/test_sync_props_two.py": 100, "tests/hub/test_concurrency_e2e.py": 50,
    "tests/replica/engine/test_sync_props.py": 70, "tests/replica/engine/test_purge_e2e.py": 60,
    "tests/replica/engine/test_save_race_fuzz.py": 60,
    "tests/e2e/test_save_race_fuzz_e2e.py": 50,
    "tests/replica/trust/test_key_rotation_e2e.py": 50, "tests/replica/trust/test_hostile_cli.py": 40,
    "tests/replica/watch/test_hostile_watch.py": 40, "tests/replica/test_e2e.py": 40,
    "tests/replica/conflicts/test_e2e.py": 40, "tests/replica/cli/test_revert_e2e.py": 35,
    "tests/replica/mcp/test_mcp_cli_same_state.py": 30, "tests/e2e/test_typed_rules_e2e.py": 30,
    "tests/replica/cli/test_space_delete_e2e.py": 30, "tests/bench/test_scaleout.py": 25,
    "tests/hub/test_backup_e2e.py": 25, "tests/hub/test_publish.py": 25,
    "tests/replica/watch/test_watch_e2e.py": 25, "tests/e2e/test_revocation_e2e.py": 20,
    "tests/bench/test_corpus.py": 20, "tests/docs/test_operations_doc.py": 20,
    "tests/e2e/test_rejoin_e2e.py": 20, "tests/replica/watch/test_status_unpublished_e2e.py": 20,
    "tests/hub/identity/test_guard_races.py": 20, "tests/hub/api/test_openapi_fuzz.py": 20,
}


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long files first (a stable sort: the shuffled order stays within each weight)."""
    items.sort(key=lambda item: -LONG_FILES.get(item.nodeid.split("::", 1)[0], 0))
