"""Fixtures for identity tests: an in-process hub (SQLite unless a test asks for the
parametrized ``db_url``), a raw client that adds nothing, and a team (owner, editor,
viewer, one space)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.pg import pg_database, require_pg
from tests.kit.wire import WireTeam, make_wire_team


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireTeam]:
    yield from make_wire_team(tmp_path_factory.mktemp("hub") / "data", None)


@pytest.fixture
def team_db(tmp_path: Path, db_url: str | None) -> Iterator[WireTeam]:
    """A fresh team on SQLite and on PostgreSQL (the ``db_url`` parametrization)."""
    yield from make_wire_team(tmp_path / "data", db_url)


@pytest.fixture
def team_pg(tmp_path: Path) -> Iterator[WireTeam]:
    """A fresh team on PostgreSQL only (where several connections truly race)."""
    require_pg()
    with pg_database() as url:
        yield from make_wire_team(tmp_path / "data", url)


def b64(obj: Any) -> str:
    raw = obj if isinstance(obj, bytes) else json.dumps(obj, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def claims_of(token: str) -> dict[str, Any]:
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
