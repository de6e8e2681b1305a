"""Limits that hold across hub processes (PostgreSQL), and the per-device/per-user limits.

Attack (issue 17): rate limits and the DPoP ``jti`` replay cache were per process, so three
hub processes allowed three times the attempts, and a proof replayed to another process was
accepted. Here three real ``quire hub serve`` processes share one PostgreSQL database and
one public URL (as behind a proxy); requests go straight to each process in turn."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from shared.dpop import make_proof
from shared.signing import new_private_key, public_b64
from tests.kit.host import free_port
from tests.kit.hubproc import HubProcess, init_hub, serve_hub
from tests.kit.pg import pg_database, require_pg
from tests.kit.wire import WireTeam, make_wire_team, put, redeem


@pytest.fixture
def three_hubs(tmp_path: Path) -> Iterator[list[HubProcess]]:
    require_pg()
    with pg_database() as db:
        data = tmp_path / "hub"
        code = init_hub(data, db)
        ports = [free_port() for _ in range(3)]
        env = {"QUIRE_HUB_PUBLIC_URL": f"http://127.0.0.1:{ports[0]}"}
        hubs: list[HubProcess] = []
        try:
            for port in ports:
                hubs.append(serve_hub(data, port=port, db=db, env=env))
            hubs[0].code = code  # type: ignore[attr-defined]
            yield hubs
        finally:
            for h in hubs:
                h.stop()


def test_redemption_burst_over_three_processes_is_limited_as_one(
        three_hubs: list[HubProcess]) -> None:
    clients = [httpx2.Client(base_url=h.url, timeout=30) for h in three_hubs]
    reached = 0
    t0 = time.monotonic()
    try:
        for i in range(200):
            r = clients[i % 3].post("/v1/invites/redeem", json={
                "code": "qi_nope", "device_name": "d", "device_key": "A" * 43})
            assert r.status_code in (401, 422, 429), r.text
            reached += r.status_code != 429
    finally:
        for c in clients:
            c.close()
    took = time.monotonic() - t0
    print(f"200 attempts over 3 processes in {took:.1f} s: {reached} reached the handler")
    # one bucket: burst 10, then 1 a second (per process it was 3 × that)
    assert reached <= 10 + math.ceil(took) + 1, (reached, took)


def test_dpop_proof_replayed_to_another_process_is_refused(
        three_hubs: list[HubProcess]) -> None:
    a, b, c = three_hubs
    key = new_private_key()
    with httpx2.Client(base_url=a.url, timeout=30) as ca:
        r = ca.post("/v1/invites/redeem", json={"code": a.code,  # type: ignore[attr-defined]
                                                "device_name": "owner",
                                                "device_key": public_b64(key)})
        assert r.status_code == 201, r.text
        token = r.json()["access_token"]
        public = ca.get("/v1/hub").json()["url"]
        proof = make_proof(key, "GET", public + "/v1/spaces", access_token=token)
        headers = {"Authorization": f"DPoP {token}", "DPoP": proof}
        assert ca.get("/v1/spaces", headers=headers).status_code == 200
    for other in (b, c):
        r = httpx2.get(other.url + "/v1/spaces", headers=headers, timeout=30)
        assert r.status_code == 401, r.text
        assert r.json()["error"]["details"]["reason"] == "dpop_replayed"
    fresh = make_proof(key, "GET", public + "/v1/spaces", access_token=token)
    r = httpx2.get(b.url + "/v1/spaces", timeout=30,
                   headers={"Authorization": f"DPoP {token}", "DPoP": fresh})
    assert r.status_code == 200, r.text  # a fresh proof is fine on any process


@pytest.fixture
def tight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db_url: str | None
          ) -> Iterator[WireTeam]:
    """A team on a hub with small per-user and per-device limits (SQLite and PostgreSQL)."""
    for name, value in (("INVITES_PER_MIN", "4"), ("PUBLICATIONS_PER_MIN", "3"),
                        ("REFRESHES_PER_MIN", "1")):
        monkeypatch.setenv(f"QUIRE_HUB_{name}", value)
    yield from make_wire_team(tmp_path / "data", db_url)


def test_per_user_and_per_device_limits(tight: WireTeam) -> None:
    t = tight
    # make_team created two invites as the owner: two more, then rate_limited
    codes = [t.owner.post(f"/v1/spaces/{t.space}/invites", {"role": "viewer"})
             for _ in range(3)]
    assert [r.status_code for r in codes] == [201, 201, 429], [r.text for r in codes]
    assert codes[2].json()["error"]["code"] == "rate_limited"
    # publications per device
    codes = [t.editor.publish(t.space, [put(f"page/p{i}")]).status_code for i in range(4)]
    assert codes == [201, 201, 201, 429], codes
    head = t.editor.head(t.space)
    assert head["seq"] == 3  # the refused one moved nothing
    # refreshes per device key
    m = t.editor
    statuses = []
    for _ in range(2):
        proof = make_proof(m.key, "POST", t.url.rstrip("/") + "/v1/token")
        r = t.raw.post("/v1/token", headers={"DPoP": proof},
                       json={"grant_type": "refresh_token", "refresh_token": m.refresh_token})
        statuses.append(r.status_code)
        if r.status_code == 200:
            m.refresh_token = r.json()["refresh_token"]
    assert statuses == [200, 429], statuses


def test_event_streams_per_device(tmp_path: Path) -> None:
    data = tmp_path / "hub"
    code = init_hub(data)
    hub = serve_hub(data, env={"QUIRE_HUB_STREAMS_PER_DEVICE": "2"})
    try:
        with httpx2.Client(base_url=hub.url, timeout=30) as c:
            owner = redeem(c, code, "owner")
            space = owner.create_space("team")
            path = f"/v1/spaces/{space}/events"
            with c.stream("GET", path, headers=owner.auth) as s1, \
                    c.stream("GET", path, headers=owner.auth) as s2:
                assert (s1.status_code, s2.status_code) == (200, 200)
                r = owner.get(path)
                assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited"
            # both closed: the slots come back (the hub notices the disconnects)
            deadline = time.monotonic() + 60
            while True:
                with c.stream("GET", path, headers=owner.auth) as s3:
                    if s3.status_code == 200:
                        break
                assert time.monotonic() < deadline, "stream slots were not given back"
                time.sleep(0.2)
    finally:
        hub.stop()
