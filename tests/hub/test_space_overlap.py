"""Publications to different spaces do not wait on one another (hub/store/db.py
``GroupCommit`` lanes): on PostgreSQL, with the real hub app, a publication to space A is
held inside its committing transaction (its space row locked, every row written) until a
publication to space B has reached the same point in its own transaction. With one group
commit for every space, B would queue behind A's transaction and A would never go on."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.kit.wire import put, redeem

DEADLINE_S = 30.0


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_two_spaces_commit_at_once(hub_app: dict[str, Any]) -> None:
    client, hooks = hub_app["client"], hub_app["hooks"]
    owner = redeem(client, hub_app["code"], "owner")
    a, b = owner.create_space("alpha"), owner.create_space("beta")
    a_id, b_id = owner.head(a)["space"], owner.head(b)["space"]
    inside = {a_id: threading.Event(), b_id: threading.Event()}
    overlapped: list[bool] = []

    def in_commit(_conn: Any, batch: Any, point: str) -> None:
        if point != "written":
            return
        inside[batch.space].set()
        if batch.space == a_id:  # A holds its transaction open until B is inside its own
            overlapped.append(inside[b_id].wait(DEADLINE_S))

    hooks.in_commit = in_commit
    answers: dict[str, Any] = {}
    try:
        ta = threading.Thread(target=lambda: answers.update(
            a=owner.publish(a, [put("page/a")])))
        ta.start()
        assert inside[a_id].wait(DEADLINE_S), "A never reached its commit"
        answers["b"] = owner.publish(b, [put("page/b")])
        ta.join(DEADLINE_S * 2)
    finally:
        hooks.in_commit = None
    assert overlapped == [True], "B's publication waited for A's transaction"
    assert answers["a"].status_code == 201, answers["a"].text
    assert answers["b"].status_code == 201, answers["b"].text
    assert owner.head(a)["seq"] == owner.head(b)["seq"] == 1
