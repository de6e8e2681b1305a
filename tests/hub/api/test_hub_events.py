"""Hub side of live propagation, against real ``quire hub serve`` processes: the event
stream, its resume and revocation, LISTEN/NOTIFY across processes, long-poll head, metrics."""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from hub.api.events import CHANGES_MAX_BYTES
from hub.events import ChangeCache
from hub.store.db import Store
from hub.store.principals import remove_member_txn
from hub.store.spaces_sql import find_space_txn
from tests.kit.hubproc import HubProcess, init_hub, serve_hub
from tests.kit.pg import pg_database, require_pg
from tests.kit.sse import SSE
from tests.kit.wire import WireMember, put, redeem

FAST = {"QUIRE_HUB_EVENTS_RECHECK_MS": "300", "QUIRE_HUB_EVENTS_KEEPALIVE_MS": "500"}


def _team(url: str, code: str | None, owner: WireMember | None = None
          ) -> tuple[WireMember, WireMember, str]:
    if owner is None:
        assert code is not None
        owner = redeem(httpx2.Client(base_url=url, timeout=30), code, "owner")
    space = owner.create_space("team-" + uuid.uuid4().hex[:8])
    member = redeem(httpx2.Client(base_url=url, timeout=30),
                        owner.invite(space, "editor"), "member")
    return owner, member, space


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One SQLite hub process for the module (starting one costs seconds); each test gets
    its own space and member."""
    data = tmp_path_factory.mktemp("events") / "hub"
    code = init_hub(data)
    hub = serve_hub(data, env=FAST)
    try:
        owner = redeem(httpx2.Client(base_url=hub.url, timeout=30), code, "owner")
        yield {"hub": hub, "owner": owner, "data": data}
        owner.client.close()
    finally:
        hub.stop()


@pytest.fixture
def sqlite_hub(served: dict[str, Any]) -> Iterator[dict[str, Any]]:
    owner, member, space = _team(served["hub"].url, None, served["owner"])
    yield dict(served, member=member, space=space)
    member.client.close()


def _events_url(hub: HubProcess, space: str) -> str:
    return f"{hub.url}/v1/spaces/{space}/events"


def test_publication_reaches_open_stream_as_a_head_event(sqlite_hub: dict[str, Any]) -> None:
    h, owner, member, space = (sqlite_hub[k] for k in ("hub", "owner", "member", "space"))
    sse = SSE(_events_url(h, space), member)
    try:
        assert sse.status == 200
        first = sse.next("head")
        assert first["data"]["seq"] == 0 and first["id"] == f"{first['data']['epoch']}:0"
        r = owner.publish(space, [put("page/a")])
        assert r.status_code == 201, r.text
        ev = sse.next("head")
        assert ev["data"]["seq"] == 1
        assert ev["data"]["digest"] == r.json()["receipt"]["head"]
        assert sse.next().get("comment") == "keepalive"  # idle streams stay warm
    finally:
        sse.close()


def test_resumed_stream_skips_a_head_it_already_has(sqlite_hub: dict[str, Any]) -> None:
    h, owner, member, space = (sqlite_hub[k] for k in ("hub", "owner", "member", "space"))
    assert owner.publish(space, [put("page/a")]).status_code == 201
    hd = member.head(space)
    sse = SSE(_events_url(h, space), member, last_event_id=f"{hd['epoch']}:1")
    try:
        assert sse.next().get("comment") == "keepalive"  # nothing new: no head replayed
        assert owner.publish(space, [put("page/b")]).status_code == 201
        assert sse.next("head")["data"]["seq"] == 2
    finally:
        sse.close()
    # resuming from an older head gets the current one at once
    sse = SSE(_events_url(h, space), member, last_event_id=f"{hd['epoch']}:0")
    try:
        assert sse.next("head")["data"]["seq"] == 2
    finally:
        sse.close()


def test_stream_of_a_removed_member_closes_with_revoked(sqlite_hub: dict[str, Any]) -> None:
    h, member, space = (sqlite_hub[k] for k in ("hub", "member", "space"))
    sse = SSE(_events_url(h, space), member)
    try:
        sse.next("head")
        store = Store(f"sqlite:///{(sqlite_hub['data'] / 'hub.db').resolve()}", pool_size=1)
        try:  # no revoke endpoint yet: remove the membership in the hub's database
            store.run_write(lambda c: remove_member_txn(c, space_id(store, space),
                                                        member.user_id))
        finally:
            store.dispose()
        ev = sse.next("revoked")
        assert ev["data"]["code"] == "not_found"
        assert sse.closed.wait(60)
    finally:
        sse.close()
    r = member.get(f"/v1/spaces/{space}/events")
    assert r.status_code == 404  # and a new stream is refused


def space_id(store: Store, ref: str) -> str:
    with store.read() as c:
        return find_space_txn(c, ref).id


def _metric(h: HubProcess, name: str) -> float:
    for line in httpx2.get(h.metrics_url).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def _until(cond: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        time.sleep(0.02)  # polling pace only


def test_long_poll_head_answers_when_the_head_moves(sqlite_hub: dict[str, Any]) -> None:
    h, owner, member, space = (sqlite_hub[k] for k in ("hub", "owner", "member", "space"))
    out: dict[str, Any] = {}
    waiting = _metric(h, "quire_longpolls_waiting")

    def poll() -> None:
        out["r"] = member.get(f"/v1/spaces/{space}/head", params={"wait": 60, "after": 0})

    th = threading.Thread(target=poll)
    th.start()
    # the poll is parked on the hub (its gauge says so) before the head moves: its answer
    # can only come from the publication
    _until(lambda: _metric(h, "quire_longpolls_waiting") == waiting + 1, "poll waiting")
    assert "r" not in out
    assert owner.publish(space, [put("page/a")]).status_code == 201
    th.join(60)
    assert out["r"].status_code == 200 and out["r"].json()["seq"] == 1
    # already behind: answers at once (a wait of 60 s would outlast the client's 30 s
    # timeout); nothing moves: answers when the wait ends, with the same head
    assert member.get(f"/v1/spaces/{space}/head", params={"wait": 60, "after": 0}
                      ).json()["seq"] == 1
    r = member.get(f"/v1/spaces/{space}/head", params={"wait": 0.3, "after": 1})
    assert r.status_code == 200 and r.json()["seq"] == 1
    assert _metric(h, "quire_longpolls_waiting") == waiting
    bad = member.get(f"/v1/spaces/{space}/head", params={"wait": 3600, "after": 1})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"


def test_metrics_count_publications_refusals_and_open_streams(
        sqlite_hub: dict[str, Any]) -> None:
    h, owner, member, space = (sqlite_hub[k] for k in ("hub", "owner", "member", "space"))

    def sample(name: str) -> float:
        return _metric(h, name)

    pubs, refused = sample("quire_publications_total"), sample(
        'quire_refusals_total{code="not_found",reason=""}')
    # streams earlier tests on this shared hub closed are counted down when the hub notices
    # the disconnect: start from a settled gauge, not from one still counting them
    _until(lambda: sample("quire_event_streams_open") == 0, "earlier streams closed")
    streams = sample("quire_event_streams_open")
    assert owner.publish(space, [put("page/a")]).status_code == 201
    assert member.get("/v1/spaces/nope/head").status_code == 404
    sse = SSE(_events_url(h, space), member)
    try:
        sse.next("head")
        assert sample("quire_event_streams_open") == streams + 1
    finally:
        sse.close()
    assert sample("quire_publications_total") == pubs + 1
    assert sample('quire_refusals_total{code="not_found",reason=""}') == refused + 1


@pytest.mark.pg
def test_publication_on_one_hub_process_reaches_streams_on_another(tmp_path: Path) -> None:
    require_pg()
    with pg_database() as db:
        data = tmp_path / "hub"
        code = init_hub(data, db)
        # two processes behind one public URL (what a proxy gives): tokens and DPoP proofs
        # name the hub, not the process
        env = dict(FAST, QUIRE_HUB_PUBLIC_URL="http://quire.test")
        a = serve_hub(data, db=db, env=env)
        try:
            b = serve_hub(data, db=db, env=env)
        except BaseException:
            a.stop()  # b never started: a must not outlive the test
            raise
        try:
            owner, member, space = _team(a.url, code)
            member_b = WireMember(httpx2.Client(base_url=b.url, timeout=30), member.token,
                                  member.key, member.user_id, member.device_id)
            owner_b = WireMember(httpx2.Client(base_url=b.url, timeout=30), owner.token,
                                 owner.key, owner.user_id, owner.device_id, owner.replicas)
            on_b = SSE(_events_url(b, space), member_b)
            on_a = SSE(_events_url(a, space), member)
            try:
                assert on_b.next("head")["data"]["seq"] == 0 == on_a.next("head")["data"]["seq"]
                for i in range(1, 4):  # publish on a: b's stream hears it through NOTIFY
                    assert owner.publish(space, [put(f"page/a{i}")]).status_code == 201
                    ev_b = on_b.next("head")["data"]
                    assert ev_b["seq"] == i
                    assert on_a.next("head")["data"]["seq"] == i
                    # the other process read the change from its database for the event
                    assert ev_b["changes"] == _changes_lines(member_b, space, ev_b["epoch"],
                                                             i - 1)
                assert owner_b.publish(space, [put("page/b")]).status_code == 201
                ev_a = on_a.next("head")["data"]
                assert ev_a["seq"] == 4 and [c["seq"] for c in ev_a["changes"]] == [4]
                assert ev_a["changes"][0]["batch"]["ops"][0]["entry"]["id"] == "page/b"
                assert on_b.next("head")["data"]["seq"] == 4
                assert "quire_notify_lag_seconds_count" in httpx2.get(a.metrics_url).text
            finally:
                on_a.close(), on_b.close()
                for m in (owner, member, owner_b, member_b):
                    m.client.close()
        finally:
            a.stop(), b.stop()


def _changes_lines(member: WireMember, space: str, epoch: str, after: int) -> list[dict]:
    r = member.get(f"/v1/spaces/{space}/changes", params={"epoch": epoch, "after": after})
    assert r.status_code == 200, r.text
    return [x for x in (json.loads(line) for line in r.text.split("\n") if line)
            if "batch" in x]


def test_a_head_event_carries_its_changes_exactly_as_the_changes_endpoint_sends_them(
        sqlite_hub: dict[str, Any]) -> None:
    h, owner, member, space = (sqlite_hub[k] for k in ("hub", "owner", "member", "space"))
    sse = SSE(_events_url(h, space), member)
    other = SSE(_events_url(h, space), owner)  # a second stream gets the same lines
    try:
        first = sse.next("head")
        other.next("head")
        assert "changes" not in first["data"]  # nothing sent before it: a bare head
        # characters a line reader splits at must not cut the event
        body = "line\u2028separator \x85 next\u2029para\n"
        r = owner.publish(space, [put("page/a", body)])
        assert r.status_code == 201, r.text
        ev = sse.next("head")
        expected = _changes_lines(member, space, first["data"]["epoch"], 0)
        assert ev["data"]["changes"] == expected and len(expected) == 1
        assert expected[0]["batch"]["ops"][0]["entry"]["body"] == body
        assert other.next("head")["data"]["changes"] == expected
    finally:
        sse.close()
        other.close()


def test_changes_too_large_for_an_event_come_as_a_bare_head(sqlite_hub: dict[str, Any]
                                                            ) -> None:
    h, owner, member, space = (sqlite_hub[k] for k in ("hub", "owner", "member", "space"))
    sse = SSE(_events_url(h, space), member)
    try:
        sse.next("head")
        big = "x" * (CHANGES_MAX_BYTES + 1) + "\n"
        assert owner.publish(space, [put("page/big", big)]).status_code == 201
        ev = sse.next("head")
        assert ev["data"]["seq"] == 1 and "changes" not in ev["data"]
        assert owner.publish(space, [put("page/small")]).status_code == 201
        ev = sse.next("head")
        assert [c["seq"] for c in ev["data"]["changes"]] == [2]
    finally:
        sse.close()


def test_streams_waiting_for_the_same_change_read_it_from_the_database_once() -> None:
    cache = ChangeCache(size=4)
    reads: list[tuple[int, int]] = []

    async def load(lo: int, hi: int) -> dict[int, str]:
        reads.append((lo, hi))
        await asyncio.sleep(0)  # a yield, not a wait: the other readers arrive meanwhile
        return {s: f'{{"seq":{s}}}' for s in range(lo + 1, hi + 1)}

    async def main() -> list[list[str] | None]:
        got = await asyncio.gather(*(cache.get("sp", "ep", 0, 2, load) for _ in range(20)))
        got.append(await cache.get("sp", "ep", 1, 3, load))  # only seq 3 is new
        return got

    out = asyncio.run(main())
    assert reads == [(0, 2), (2, 3)]
    assert out[:20] == [['{"seq":1}', '{"seq":2}']] * 20 and out[20] == ['{"seq":2}', '{"seq":3}']


def test_a_change_that_could_not_be_read_gives_a_bare_head_and_is_read_again_later() -> None:
    cache = ChangeCache()
    calls = 0

    async def load(lo: int, hi: int) -> dict[int, str]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OSError("database unreachable")
        return {1: '{"seq":1}'}

    async def main() -> tuple[Any, Any]:
        return await cache.get("sp", "ep", 0, 1, load), await cache.get("sp", "ep", 0, 1, load)

    assert asyncio.run(main()) == (None, ['{"seq":1}'])


def test_content_published_after_a_revocation_never_reaches_the_revoked_stream(
        tmp_path: Path) -> None:
    # head events carry entry content: a device revoked a moment before a publication (its
    # access notice not yet seen by the stream, or still on its way from another process)
    # must get `revoked`, never the batch. A long periodic re-check rules out luck. A
    # member whose stream the same publication woke (their re-checks share one read,
    # hub/api/events.py FanOut) gets the batch all the same.
    data = tmp_path / "hub"
    code = init_hub(data)
    hub = serve_hub(data, env={"QUIRE_HUB_EVENTS_RECHECK_MS": "600000"})
    try:
        owner, member, space = _team(hub.url, code)
        kept = redeem(httpx2.Client(base_url=hub.url, timeout=30),
                          owner.invite(space, "viewer"), "kept")
        sse = SSE(_events_url(hub, space), member)
        other = SSE(_events_url(hub, space), kept)
        try:
            sse.next("head")
            other.next("head")
            store = Store(f"sqlite:///{(data / 'hub.db').resolve()}", pool_size=1)
            try:  # revoked in the database: no access event is emitted
                store.run_write(lambda c: c.exec_driver_sql(
                    "UPDATE devices SET revoked_at = 1 WHERE id = ?", (member.device_id,)))
            finally:
                store.dispose()
            r = owner.publish(space, [put("page/after-revocation", "secret\n")])
            assert r.status_code == 201, r.text
            seen = []
            while True:
                # every event the stream read is queued before it is marked closed: once
                # closed, drain what is left; until then wait generously (a loaded machine)
                try:
                    ev = sse.next(timeout=0.5 if sse.closed.is_set() else 60)
                except queue.Empty:  # nothing more came
                    break
                seen.append(ev)
                if ev.get("event") == "revoked":
                    break
            assert not any("changes" in (ev.get("data") or {}) for ev in seen), seen
            assert any(ev.get("event") == "revoked" for ev in seen), seen
            ev = other.next("head")
            assert [c["seq"] for c in ev["data"]["changes"]] == [1], ev
        finally:
            sse.close()
            other.close()
            owner.client.close()
            member.client.close()
            kept.client.close()
    finally:
        hub.stop()


@pytest.mark.pg
def test_publication_through_one_worker_reaches_streams_on_the_other(tmp_path: Path) -> None:
    # `quire hub serve --workers 2`: the kernel hands each connection to either worker;
    # streams are opened until both hold one (each worker's own /metrics says so), then
    # every stream must hear every head, whichever worker accepted the publication
    require_pg()
    with pg_database() as db:
        data = tmp_path / "hub"
        code = init_hub(data, db)
        # no periodic re-check within the test: only LISTEN/NOTIFY (or the accepting
        # worker's own fan-out) can bring a head to a stream
        hub = serve_hub(data, db=db, workers=2, env={
            "QUIRE_HUB_EVENTS_RECHECK_MS": "3600000", "QUIRE_HUB_EVENTS_KEEPALIVE_MS": "500"})
        streams: list[SSE] = []
        try:
            owner, member, space = _team(hub.url, code)
            urls = [hub.metrics_url,
                    f"http://127.0.0.1:{hub.metrics_port + 1}/metrics"]  # worker 1

            def answers(url: str) -> bool:
                try:
                    return httpx2.get(url).status_code == 200
                except httpx2.ConnectError:
                    return False

            # the public port answers once one worker is up; the other's metrics listener
            # may still be starting (refused until then)
            for u in urls:
                _until(lambda u=u: answers(u), f"{u} answering")

            def open_on(url: str) -> float:
                for line in httpx2.get(url).text.splitlines():
                    if line.startswith("quire_event_streams_open "):
                        return float(line.split()[-1])
                return 0.0

            # the kernel picks the worker of each connection: even 9 in 10 to one worker
            # leaves the other none after 200 tries with odds of 1e-9. A worker holding
            # its 16 streams for this device refuses more: such a try is closed, not kept
            tries = 0
            while not all(open_on(u) >= 1 for u in urls):
                tries += 1
                assert tries <= 200, "200 streams tried, all on one worker"
                sse = SSE(_events_url(hub, space), member)
                if sse.status != 200:
                    sse.close()
                    continue
                streams.append(sse)
                assert sse.next("head")["data"]["seq"] == 0
            for i in range(1, 4):
                assert owner.publish(space, [put(f"page/w{i}")]).status_code == 201
                for s in streams:
                    assert s.next("head")["data"]["seq"] == i
            owner.client.close(), member.client.close()
        finally:
            for s in streams:
                s.close()
            hub.stop()


def test_a_partial_replicas_stream_sends_bare_heads_and_refuses_bad_globs(
        sqlite_hub: dict[str, Any]) -> None:
    """``?only=`` (a partial replica, replica/app/scope.py): its stream is scoped, so its
    head events carry no batch (whole batches hold entries outside its globs); a malformed
    glob is refused before any stream opens."""
    h, owner, member, space = (sqlite_hub[k] for k in ("hub", "owner", "member", "space"))
    sse = SSE(_events_url(h, space) + "?only=page/alpha/*", member)
    whole = SSE(_events_url(h, space), member)
    try:
        sse.next("head")
        whole.next("head")
        r = owner.publish(space, [put("page/beta/x", "outside\n")])
        assert r.status_code == 201, r.text
        assert "changes" not in sse.next("head")["data"]
        assert whole.next("head")["data"]["changes"]  # the same member, whole: lines
    finally:
        sse.close()
        whole.close()
    r = member.get(f"/v1/spaces/{space}/events", params={"only": "/etc/*"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
