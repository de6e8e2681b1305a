"""Fixtures for every tier. The ``backend`` fixture runs a test once on SQLite and once on
the machine's PostgreSQL (skipped with a reason only when no server answers)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import kit


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | None]:
    if request.param == "sqlite":
        yield None
        return
    kit.require_pg()
    with kit.pg_database() as url:
        yield url


@pytest.fixture
def hub_app(tmp_path: Path, db_url: str | None) -> Iterator[dict[str, Any]]:
    """An initialized hub served in-process; yields the app, hooks, store and owner code."""
    from starlette.testclient import TestClient

    from hub.app import create_app
    from hub.guard import GuardHooks
    from hub.settings import load_settings

    data = tmp_path / "hub"
    code = kit.init_hub(data, db_url)
    settings = load_settings(data)
    hooks = GuardHooks()
    app = create_app(settings, hooks=hooks)
    with TestClient(app, base_url="http://testhub") as client:
        yield {"app": app, "client": client, "hooks": hooks, "code": code,
               "hub": app.state.hub, "settings": settings}
