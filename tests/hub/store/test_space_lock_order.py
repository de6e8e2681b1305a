"""Joins of one space at once on PostgreSQL never deadlock (found by
tests/e2e/test_save_race_fuzz_e2e.py: four machines joining one space through two hub
processes; after eight deadlocks in a row the invite was answered 503).

Inserting a row that names the space (an invite, a member) takes a KEY SHARE lock on the
space row (its foreign key); locking the space row FOR UPDATE afterwards must wait for every
other such holder. Two transactions that each inserted, then locked, waited for each other:
a deadlock, retried by ``Store.run_write``. The space row is locked first now.

Each test runs two transactions at once and holds both at their first ``FOR UPDATE`` of the
space (a barrier in ``get_space_txn``), the point where, on 0d320b8, each already held its
KEY SHARE: PostgreSQL then found a deadlock and one transaction ran twice. No sleep decides
the order."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hub import spaces
from hub.access import Principal
from hub.app import Hub, create_app
from hub.settings import Settings, load_settings
from shared.signing import new_private_key, public_b64
from tests.kit.hubproc import init_hub
from tests.kit.pg import pg_database, require_pg

pytestmark = pytest.mark.pg


def now() -> int:
    return int(time.time() * 1000)


@pytest.fixture
def pg_hub(tmp_path: Path) -> Iterator[tuple[Hub, Settings, Principal, str]]:
    """A hub on a fresh PostgreSQL database, its owner and a space."""
    from starlette.testclient import TestClient

    require_pg()
    with pg_database() as url:
        data = tmp_path / "hub"
        code = init_hub(data, url)
        settings = load_settings(data)
        app = create_app(settings)
        with TestClient(app, base_url="http://testhub"):
            hub: Hub = app.state.hub
            out = spaces.redeem(hub.store, hub.key, settings, {
                "code": code, "device_key": public_b64(new_private_key()),
                "device_name": "owner"}, None, now())
            owner = Principal(out["user_id"], out["device_id"], "owner", True)
            space = spaces.create_space(hub.store, owner, "joins", now())["space"]["id"]
            yield hub, settings, owner, space


def held_at_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of two threads waits for the other at its first FOR UPDATE of a space."""
    barrier = threading.Barrier(2, timeout=30)
    first = threading.local()
    real = spaces.get_space_txn

    def get_space_txn(conn: Any, space_id: str, *, lock: bool = False) -> Any:
        if lock and not getattr(first, "done", False):
            first.done = True
            barrier.wait()
        return real(conn, space_id, lock=lock)

    monkeypatch.setattr(spaces, "get_space_txn", get_space_txn)


def counted(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """How many times the transactions ran ``spaces.<name>`` (once per attempt)."""
    runs: list[int] = []
    real = getattr(spaces, name)

    def f(*a: Any, **kw: Any) -> Any:
        runs.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(spaces, name, f)
    return runs


def at_once(*fns: Callable[[], Any]) -> list[Any]:
    results: list[Any] = [None] * len(fns)

    def run(i: int) -> None:
        try:
            results[i] = fns[i]()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_two_invites_of_one_space_created_at_once_never_deadlock(
        pg_hub: tuple[Hub, Settings, Principal, str], monkeypatch: pytest.MonkeyPatch) -> None:
    hub, _settings, owner, space = pg_hub
    runs = counted(monkeypatch, "insert_invite_txn")
    held_at_the_lock(monkeypatch)
    out = at_once(*[lambda: spaces.invite(
        hub.store, owner, space, {"role": "editor"}, now(), 3600, 86400) for _ in range(2)])
    assert all(isinstance(o, dict) and o["code"] for o in out), out
    assert len(runs) == 2, "a transaction ran again: PostgreSQL found a deadlock"


def test_two_invites_of_one_space_redeemed_at_once_never_deadlock(
        pg_hub: tuple[Hub, Settings, Principal, str], monkeypatch: pytest.MonkeyPatch) -> None:
    hub, settings, owner, space = pg_hub
    codes = [spaces.invite(hub.store, owner, space, {"role": "editor"}, now(), 3600,
                           86400)["code"] for _ in range(2)]
    runs = counted(monkeypatch, "invite_by_hash_txn")
    held_at_the_lock(monkeypatch)
    out = at_once(*[lambda c=c: spaces.redeem(hub.store, hub.key, settings, {
        "code": c, "device_key": public_b64(new_private_key()), "device_name": "m"},
        None, now()) for c in codes])
    assert all(isinstance(o, dict) and o["space"]["id"] == space for o in out), out
    assert len(runs) == 2, "a transaction ran again: PostgreSQL found a deadlock"
