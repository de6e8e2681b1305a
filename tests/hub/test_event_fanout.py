"""What the event streams of one hub process share for a head (``hub/api/events.py``
``FanOut``), on the real hub app and database: the access re-checks of streams woken
together run in one read, each stream still gets its own caller's answer (a revoked
device is refused while the others get the head), and a head event is signed and encoded
once however many streams send it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from hub.access import Principal
from hub.api.events import FanOut, _change_lines
from hub.store.principals import remove_member_txn, revoke_device_txn
from hub.store.spaces_sql import find_space_txn
from shared.errors import Unauthorized
from shared.signed import parse_head
from tests.kit.wire import WireMember, put, redeem


def _principal(m: WireMember) -> Principal:
    return Principal(m.user_id, m.device_id, "u", False)


@pytest.fixture
def team(hub_app: dict[str, Any]) -> dict[str, Any]:
    client = hub_app["client"]
    owner = redeem(client, hub_app["code"], "owner")
    space = owner.create_space("fan")
    a = redeem(client, owner.invite(space, "viewer"), "a")
    b = redeem(client, owner.invite(space, "viewer"), "b")
    return dict(hub_app, owner=owner, space=space, a=a, b=b)


def test_streams_woken_together_share_one_read_and_keep_their_own_answers(
        team: dict[str, Any]) -> None:
    hub, space = team["hub"], team["space"]
    hub.store.run_write(lambda c: revoke_device_txn(c, team["b"].device_id, hub.now()))
    fan = FanOut(hub)

    async def main() -> list[Any]:
        return await asyncio.gather(
            fan.check(_principal(team["a"]), space), fan.check(_principal(team["b"]), space),
            fan.check(_principal(team["a"]), "no-such-space"),
            fan.check(_principal(team["a"]), space), return_exceptions=True)

    a1, b, missing, a2 = asyncio.run(main())
    assert fan.reads == 1  # four checks, one read transaction
    assert isinstance(b, Unauthorized)  # the revoked device: refused, the others are not
    assert type(missing).__name__ == "NotFound"
    assert a1 == a2 and a1["space"] == space and a1["seq"] == 0 and a1["state"]

    async def later() -> Any:  # asked in another turn of the loop: a read of its own
        return await fan.check(_principal(team["b"]), space)

    with pytest.raises(Unauthorized):
        asyncio.run(later())
    assert fan.reads == 2


def test_a_head_event_is_signed_once_and_verifies(team: dict[str, Any]) -> None:
    hub, space = team["hub"], team["space"]
    fan = FanOut(hub)

    async def head() -> dict[str, Any]:
        return await fan.check(_principal(team["a"]), space)

    h = dict(asyncio.run(head()), at=hub.now())
    eid = f"{h['epoch']}:{h['seq']}"
    first = fan.head_chunk(h, eid)
    assert fan.head_chunk(dict(h), eid) is first  # the same text, not signed again
    data = json.loads(first.split("data: ", 1)[1])
    signed = parse_head(hub.key.public, data, space=space)
    assert (signed.seq, signed.digest, signed.state, signed.at) == (
        h["seq"], h["digest"], h["state"], h["at"])
    other = fan.head_chunk(dict(h, at=h["at"] + 1), eid)  # another commit time: signed anew
    assert other is not first and json.loads(other.split("data: ", 1)[1])["at"] == h["at"] + 1
    bare = fan.head_chunk(dict(h, at=None), eid)  # heard of from the database: signed now
    assert json.loads(bare.split("data: ", 1)[1])["at"] >= h["at"]


def test_a_refused_prefetch_does_not_leave_another_stream_without_its_changes(
        team: dict[str, Any]) -> None:
    """A stream starts reading the change lines before its own access check (they are
    attached only after it passes). When the first stream to read them is one whose
    caller was just removed from the space, its read fails; a stream whose check passed reads them again
    as its own caller instead of sending a bare head."""
    hub, space, owner = team["hub"], team["space"], team["owner"]
    assert owner.publish(space, [put("page/a")]).status_code == 201
    epoch = owner.head(space)["epoch"]
    hub.store.run_write(lambda c: remove_member_txn(
        c, find_space_txn(c, space).id, team["b"].user_id))

    async def main() -> tuple[Any, Any]:
        return await asyncio.gather(
            _change_lines(hub, _principal(team["b"]), space, epoch, 0, 1, prefetch=True),
            _change_lines(hub, _principal(team["a"]), space, epoch, 0, 1))

    refused, kept = asyncio.run(main())
    assert refused is None  # nothing read for the removed member
    assert kept is not None and [json.loads(line)["seq"] for line in kept] == [1]
