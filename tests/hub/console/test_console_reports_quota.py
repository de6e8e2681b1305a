"""Quotas on what a member stores without publishing: replica registrations (per device and
space) and conflict reports (per member and space), and the console's conflicts page in
pages. On the real hub app (in-process). Before, one editor registered 30 replicas and
reported 500 conflicts from each: 15,000 rows, and a 9.5 MB conflicts page."""

from __future__ import annotations

from typing import Any

import pytest

from tests.hub.console.test_console_inproc import members, sign_in

PAGE = "/console/spaces/team/conflicts"


@pytest.fixture
def team(hub_app: dict[str, Any]) -> dict[str, Any]:
    return members(hub_app)


def _items(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"id": f"pk-{i:020x}", "entry": f"page/p{i}", "kind": "edit",
             "since": 1_764_590_000_000, "claimed": False} for i in range(start, start + n)]


def _register(m: Any, space: str) -> Any:
    return m.post(f"/v1/spaces/{space}/replicas", {"name": "flood"})


def _report(m: Any, space: str, replica: str, items: list[dict[str, Any]]) -> Any:
    return m.client.put(f"/v1/spaces/{space}/replicas/{replica}/conflicts",
                        json={"conflicts": items}, headers=m.auth)


def test_replica_registrations_are_bounded_per_device(hub_app: dict[str, Any],
                                                      team: dict[str, Any]) -> None:
    limit = hub_app["settings"].replicas_per_device
    ed, space = team["ed"], team["space"]
    answers = [_register(ed, space) for _ in range(limit + 5)]
    assert [r.status_code for r in answers[:limit]] == [201] * limit
    refused = answers[limit:]
    assert {r.status_code for r in refused} == {413}, [r.text for r in refused[:1]]
    err = refused[0].json()["error"]
    assert err["code"] == "quota_exceeded" and err["details"]["limit"] == limit
    assert "quire admin replicas revoke" in err["message"]
    listed = team["owner"].get(f"/v1/spaces/{space}/replicas").json()["replicas"]
    assert sum(1 for r in listed if r["name"] == "flood") == limit  # refused: not stored
    # another device of the space registers as before
    assert _register(team["viewer"], space).status_code == 201


def test_conflict_reports_are_bounded_per_member_and_the_page_is_paged(
        hub_app: dict[str, Any], team: dict[str, Any]) -> None:
    cap = hub_app["settings"].conflict_reports_per_member
    ed, space = team["ed"], team["space"]
    replicas = [_register(ed, space).json()["replica_id"] for _ in range(4)]
    answers = [_report(ed, space, r, _items(500, 500 * i)) for i, r in enumerate(replicas)]
    accepted = [r for r in answers if r.status_code == 200]
    assert len(accepted) * 500 <= cap
    refused = [r for r in answers if r.status_code != 200]
    assert refused and refused[0].status_code == 413
    assert refused[0].json()["error"]["code"] == "quota_exceeded"
    # a replica may always replace its own report within the cap (a smaller one)
    assert _report(ed, space, replicas[0], _items(10)).status_code == 200
    # another member's reports are not held back by this one's
    own = _register(team["owner"], space).json()["replica_id"]
    assert _report(team["owner"], space, own, _items(500, 9000)).status_code == 200
    b = sign_in(hub_app, team["viewer"])
    first = b.get(PAGE)
    assert first.status_code == 200 and len(first.content) < 200_000, len(first.content)
    assert "page=2" in first.text
    second = b.get(PAGE, params={"page": 2})
    assert second.status_code == 200 and "page/p" in second.text
    assert b.get(PAGE, params={"page": "x"}).status_code in (200, 422)
