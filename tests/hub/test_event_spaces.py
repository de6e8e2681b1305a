"""A change in one space never touches the event subscriptions of another (hub/events.py):
on the real hub app, a publication to space A pushes to A's subscriptions only, and the
broker looks at the same number of subscriptions whether space B has 5 watchers or 500."""

from __future__ import annotations

import time
from typing import Any

from hub.events import Subscription
from tests.kit.wire import put, redeem


def _wait(cond: Any, what: str, deadline_s: float = 30.0) -> None:
    end = time.monotonic() + deadline_s
    while not cond():
        assert time.monotonic() < end, what
        time.sleep(0.01)


def _heads(sub: Subscription) -> list[dict[str, Any]]:
    return [ev.data for ev in sub._pending if ev.kind == "head"]


def test_a_publication_looks_only_at_its_own_spaces_subscriptions(
        hub_app: dict[str, Any]) -> None:
    client, hub = hub_app["client"], hub_app["hub"]
    broker, portal = hub.broker, client.portal
    if broker.pg_dsn:  # the listener's first poke (to every subscription) is sent as it
        # starts listening, long before the requests below are answered
        _wait(broker.listening.is_set, "the hub never listened")
    owner = redeem(client, hub_app["code"], "owner")
    a, b = owner.create_space("alpha"), owner.create_space("beta")
    a_id = owner.head(a)["space"]

    def subscribe(space: str, n: int) -> list[Subscription]:
        return [portal.call(broker.subscribe, space) for _ in range(n)]

    watching_a = subscribe(a_id, 2)
    watching_b = subscribe(owner.head(b)["space"], 5)
    visits: list[int] = []
    for n, more in enumerate((0, 495)):  # space B: 5 watchers, then 500
        watching_b += subscribe(watching_b[0].space or "", more)
        before = broker.visits
        assert owner.publish(a, [put(f"page/n{n}")]).status_code == 201
        _wait(lambda n=n: all(len(_heads(s)) == n + 1 for s in watching_a),
              "A's watchers never heard of the head")
        visits.append(broker.visits - before)
    assert visits == [2, 2]  # A's two subscriptions, whatever B has
    assert all(not _heads(s) for s in watching_b)
    assert broker.open_streams == 2 + 500
    for s in watching_a + watching_b:
        portal.call(s.close)
    assert broker.open_streams == 0


def test_a_subscription_that_names_its_space_later_hears_that_space_only(
        hub_app: dict[str, Any]) -> None:
    """A stream subscribes before it knows its space (nothing slips in while it reads the
    head), then names it: from then on only that space's events reach it."""
    client, hub = hub_app["client"], hub_app["hub"]
    broker, portal = hub.broker, client.portal
    owner = redeem(client, hub_app["code"], "owner")
    a, b = owner.create_space("alpha"), owner.create_space("beta")
    sub = portal.call(broker.subscribe, None)
    assert owner.publish(b, [put("page/early")]).status_code == 201
    _wait(lambda: len(_heads(sub)) == 1, "an unnamed subscription hears every space")

    def name(space: str) -> None:
        sub.space = space

    portal.call(name, owner.head(a)["space"])
    assert owner.publish(b, [put("page/late")]).status_code == 201
    assert owner.publish(a, [put("page/mine")]).status_code == 201
    _wait(lambda: len(_heads(sub)) == 2, "its own space's head never came")
    assert [h["space"] for h in _heads(sub)] == [owner.head(b)["space"], sub.space]
    portal.call(sub.close)
    assert broker.open_streams == 0
