"""A change of who may publish never lands between the guard's last check and its commit.

Each test pauses one publication at a chosen point and, from another thread and another
database connection, sends an owner's change through the API (role lowered, member removed,
device revoked, user deactivated, delegation revoked, rule added, epoch bumped):

    point      where the publication is paused                   what must happen
    prepared   after preparation, before the committing txn      the change commits first;
                                                                 the publication is refused
    locked     inside commit_txn, the space row just locked      either of the two
    written    inside commit_txn, every check passed, rows       the change waits for the
               written, the commit next                          publication's commit

The paused publication goes on only once the change has either committed (its response
came back) or is blocked waiting for the publication's locks (PostgreSQL: a backend of the
test database waits on a lock; SQLite: the change opened its write transaction, which
``BEGIN IMMEDIATE`` cannot grant until the publication commits). No sleep decides the order.

The invariant, for every kind, point and backend: a publication accepted after a change
committed never happens. Either it is refused with the change's error code and wrote
nothing, or the change committed after it and the audit log says so (the change's event
follows the publication's)."""

from __future__ import annotations

import contextlib
import faulthandler
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import event, select

from hub.store.batches import batch_by_ids_txn
from hub.store.schema import audit
from shared.dpop import make_proof
from tests.kit.pg import pg_database, require_pg
from tests.kit.wire import WireMember, WireTeam, make_wire_team, put, redeem

DEADLINE_S = 60.0


@dataclass
class Scene:
    """One publication's world: its own space, so no test sees another's rules or epoch."""

    t: WireTeam
    space: str
    m: WireMember
    delegation: dict[str, Any] = field(default_factory=dict)

    def admin(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.t.owner.post(path, body or {})

    def publish(self, body: dict[str, Any]) -> Any:
        path = f"/v1/spaces/{self.space}/batches"
        if not self.delegation:
            return self.m.post(path, body)
        token = self.delegation["token"]
        return self.t.raw.post(path, json=body, headers={
            "Authorization": f"DPoP {token}",
            "DPoP": make_proof(self.m.key, "POST", self.t.url + path, access_token=token)})


@dataclass(frozen=True)
class Kind:
    change: Callable[[Scene], Any]
    refused: str  # the error code of a publication that sees the change
    action: str  # the change's audit action


KINDS: dict[str, Kind] = {
    "role_lowered": Kind(lambda s: s.admin(
        f"/v1/spaces/{s.space}/members/{s.m.user_id}/role", {"role": "viewer"}),
        "forbidden", "member.role"),
    "member_removed": Kind(lambda s: s.admin(
        f"/v1/spaces/{s.space}/members/{s.m.user_id}/remove"), "not_found", "member.remove"),
    "device_revoked": Kind(lambda s: s.admin(f"/v1/devices/{s.m.device_id}/revoke"),
                           "unauthorized", "device.revoke"),
    "user_deactivated": Kind(lambda s: s.admin(f"/v1/users/{s.m.user_id}/deactivate"),
                             "unauthorized", "user.deactivate"),
    "delegation_revoked": Kind(lambda s: s.admin(
        f"/v1/delegations/{s.delegation['delegation']['id']}/revoke"),
        "unauthorized", "delegation.revoke"),
    # a batch prepared under other rules is refused as head_changed and retried under them
    "rule_added": Kind(lambda s: s.admin(f"/v1/spaces/{s.space}/rules", {
        "who": "editor", "actions": ["create"], "entries": "page/*"}),
        "head_changed", "rule.add"),
    "epoch_bumped": Kind(lambda s: s.admin(f"/v1/spaces/{s.space}/epoch",
                                           {"reason": "race test"}),
                         "epoch_changed", "epoch.bump"),
}


class Arena:
    """A hub on one backend, and a way to see that another connection waits on a lock."""

    def __init__(self, t: WireTeam, backend: str, db_url: str | None):
        self.t, self.backend, self.db_url = t, backend, db_url
        self.paused_in: int | None = None  # the thread holding the paused transaction
        self.write_opened = threading.Event()
        # SQLite: a write transaction another thread opens while one is held cannot be
        # granted before that one commits (writers open with BEGIN IMMEDIATE)
        event.listen(t.hub.store.engine, "before_cursor_execute", self._on_execute)

    def _on_execute(self, _conn: Any, _cur: Any, sql: str, *_: Any) -> None:
        if (self.paused_in is not None and threading.get_ident() != self.paused_in
                and sql == "BEGIN IMMEDIATE"):
            self.write_opened.set()

    def change_is_waiting(self, holder: int | None) -> bool:
        """Whether the change waits for the paused publication's transaction. ``holder``:
        the paused transaction's PostgreSQL backend pid (None: it holds none, at
        ``prepared``; -1: a SQLite write transaction)."""
        if holder is None:
            return False  # nothing of the publication's is locked: nothing to wait for
        if self.backend == "sqlite":
            return self.write_opened.is_set()
        import psycopg

        assert self.db_url is not None
        # blocked by that transaction itself: a lock wait on anything else (a refusal's audit
        # count written after the previous case, say) is not this race
        with psycopg.connect(self.db_url, autocommit=True) as c:
            row = c.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                            "current_database() AND %s = ANY(pg_blocking_pids(pid))",
                            (holder,)).fetchone()
        return bool(row and row[0])

    def holder(self, conn: Any) -> int:
        """The committing transaction's identity for ``change_is_waiting``."""
        if self.backend == "sqlite":
            return -1
        return int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar())


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def arena(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Arena]:
    with contextlib.ExitStack() as stack:
        url = None
        if request.param == "postgresql":
            require_pg()
            url = stack.enter_context(pg_database())
        for t in make_wire_team(tmp_path_factory.mktemp("race") / "data", url):
            yield Arena(t, request.param, url)


class Race:
    """Sends the change from another thread while the publication is paused, and lets the
    publication go on once the change committed or waits for it."""

    def __init__(self, arena: Arena, change: Callable[[], Any]):
        self.arena, self.change = arena, change
        self.response: Any = None
        self.error: BaseException | None = None
        self.committed_first: bool | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.response = self.change()
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            self.error = e

    def land(self, holder: int | None) -> None:
        if self.thread.ident is not None:
            return  # one change per publication
        self.arena.write_opened.clear()
        self.arena.paused_in = threading.get_ident()
        try:
            self.thread.start()
            deadline = time.monotonic() + DEADLINE_S
            while True:
                if not self.thread.is_alive():
                    self.committed_first = True
                    return
                if self.arena.change_is_waiting(holder):
                    self.committed_first = False
                    return
                if time.monotonic() > deadline:
                    faulthandler.dump_traceback(sys.stderr, all_threads=True)  # who blocks
                    raise AssertionError("the change neither committed nor waited")
                time.sleep(0.005)  # polling pace only
        finally:
            self.arena.paused_in = None

    def finish(self) -> Any:
        self.thread.join(DEADLINE_S)
        assert not self.thread.is_alive(), "the change never finished"
        if self.error is not None:
            raise self.error
        assert self.response.status_code in (200, 201), self.response.text
        return self.response


def _scene(a: Arena, kind: str, point: str) -> Scene:
    t = a.t
    space = t.owner.create_space(f"race-{kind}-{point}")
    m = redeem(t.client, t.owner.invite(space, "editor"), f"{kind}-{point}")
    s = Scene(t, space, m)
    if kind == "delegation_revoked":
        s.delegation = t.delegate(m, "write", space, agent="racer")
    return s


def _audit(a: Arena) -> list[Any]:
    with a.t.hub.store.read() as conn:
        return list(conn.execute(select(audit.c.id, audit.c.chain, audit.c.n, audit.c.action,
                                        audit.c.details).order_by(audit.c.id)))


@pytest.mark.parametrize("point", ["prepared", "locked", "written"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_no_batch_is_accepted_after_a_change_that_forbids_it_committed(
        arena: Arena, kind: str, point: str) -> None:
    a, k = arena, KINDS[kind]
    s = _scene(a, kind, point)
    body = s.m.batch(s.space, [put("page/raced")])
    race = Race(a, lambda: k.change(s))
    hooks = a.t.hub.hooks
    if point == "prepared":
        hooks.after_prepare = lambda _b: race.land(None)
    else:
        hooks.in_commit = (lambda c, _b, at: race.land(a.holder(c)) if at == point
                           else None)
    try:
        r = s.publish(body)
    finally:
        hooks.after_prepare = hooks.in_commit = None
    race.finish()
    assert race.committed_first is not None, "the publication never reached " + point
    if point == "prepared":
        assert race.committed_first, "nothing was locked, yet the change waited"
    with a.t.hub.store.read() as conn:
        stored = batch_by_ids_txn(conn, body["replica_id"], body["batch_id"])
    events = _audit(a)
    change = [e for e in events if e.action == k.action][-1]
    published = [e for e in events if e.action == "publish"
                 and json.loads(e.details)["batch_id"] == body["batch_id"]]
    if race.committed_first:
        assert r.status_code not in (200, 201), (
            f"{kind} committed while the publication was paused at {point!r}, and the "
            f"batch was accepted after it: {r.text[:200]}")
        assert r.json()["error"]["code"] == k.refused, r.text
        assert stored is None and not published
    else:
        # the change waited for the publication's commit: the batch is in, and the audit
        # log orders the publication before the change
        assert r.status_code in (200, 201), r.text
        assert stored is not None and len(published) == 1
        assert published[0].id < change.id
        if change.chain == published[0].chain:
            assert published[0].n < change.n
    if kind == "rule_added":
        # whatever the order, the next publication is judged by the new rule
        again = s.publish(s.m.batch(s.space, [put("page/after")]))
        assert again.json()["error"]["code"] == "policy_denied", again.text
