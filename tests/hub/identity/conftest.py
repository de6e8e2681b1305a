"""Fixtures for identity tests: an in-process hub (SQLite unless a test asks for the
parametrized ``db_url``), a raw client that adds nothing, and a team (owner, editor,
viewer, one space)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import kit


@dataclass
class Team:
    app: Any
    hub: Any
    client: Any  # signs proofs for members (kit.KitSigner)
    raw: Any  # sends exactly what the test gives it
    url: str  # the hub's public URL (token aud, proof htu base)
    owner: kit.Member
    editor: kit.Member
    viewer: kit.Member
    space: str

    def member(self, role: str = "editor", name: str = "m") -> kit.Member:
        return kit.redeem(self.client, self.owner.invite(self.space, role), name)

    def delegate(self, m: kit.Member, scope: str = "write", space: str | None = None,
                 agent: str = "bot") -> dict[str, Any]:
        r = m.post("/v1/delegations", {"space": space or self.space, "agent": agent,
                                       "scope": scope, "ttl_seconds": 3600})
        assert r.status_code == 201, r.text
        return r.json()

    def counts(self) -> dict[str, int]:
        from hub.store.schema import count_rows_txn

        with self.hub.store.read() as conn:
            return count_rows_txn(conn)


def make_team(data: Path, db: str | None) -> Iterator[Team]:
    from starlette.testclient import TestClient

    from hub.app import create_app
    from hub.guard import GuardHooks
    from hub.ratelimit import RateLimiter
    from hub.settings import load_settings

    code = kit.init_hub(data, db)
    settings = load_settings(data)
    app = create_app(settings, hooks=GuardHooks())
    hub = app.state.hub
    # these tests make many members from one address; the redemption limit has its own test
    hub.redeem_limiter = RateLimiter(rate_per_s=1000.0, burst=1000, clock=hub.now)
    with TestClient(app, base_url="http://testhub") as client, \
            TestClient(app, base_url="http://testhub") as raw:
        owner = kit.redeem(client, code, "owner")
        space = owner.create_space("team")
        editor = kit.redeem(client, owner.invite(space, "editor"), "editor")
        viewer = kit.redeem(client, owner.invite(space, "viewer"), "viewer")
        yield Team(app, app.state.hub, client, raw, settings.url, owner, editor, viewer, space)


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    yield from make_team(tmp_path_factory.mktemp("hub") / "data", None)


@pytest.fixture
def team_db(tmp_path: Path, db_url: str | None) -> Iterator[Team]:
    """A fresh team on SQLite and on PostgreSQL (the ``db_url`` parametrization)."""
    yield from make_team(tmp_path / "data", db_url)


@pytest.fixture
def team_pg(tmp_path: Path) -> Iterator[Team]:
    """A fresh team on PostgreSQL only (where several connections truly race)."""
    kit.require_pg()
    with kit.pg_database() as url:
        yield from make_team(tmp_path / "data", url)


def b64(obj: Any) -> str:
    raw = obj if isinstance(obj, bytes) else json.dumps(obj, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def claims_of(token: str) -> dict[str, Any]:
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
