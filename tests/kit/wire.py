"""A client that speaks the hub's wire protocol directly, for the hub's own tests (the
replica has its own client; these exercise the hub without it).

``WireMember`` is a device with a real key and DPoP-bound tokens (``redeem`` makes one);
``WireTeam`` an owner, editor and viewer of one space on the hub app in-process
(``make_wire_team``); ``put``/``delete`` build ops, ``ndjson`` reads a stream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

from shared import PROTOCOL_HEADER, PROTOCOL_VERSION
from shared.dpop import make_proof
from shared.entry import make_entry
from shared.ids import new_id
from shared.signing import new_private_key, public_b64
from shared.wire import Op, build_batch
from tests.kit.hubproc import init_hub


class KitSigner(httpx2.Auth):
    """Signs a DPoP proof for every request that carries ``Authorization: DPoP <token>`` of a
    known member and no proof of its own, so tests can pass ``member.auth`` as plain headers
    (the replica does the same in ``replica/hubclient/auth.py``). Installed as the client's auth."""

    def __init__(self, base_url: str):
        self.base_url = base_url.rstrip("/")
        self.keys: dict[str, Any] = {}

    def auth_flow(self, request: httpx2.Request) -> Any:
        auth = request.headers.get("authorization", "")
        if auth.startswith("DPoP ") and "dpop" not in request.headers:
            token = auth[5:]
            key = self.keys.get(token)
            if key is not None:
                request.headers["DPoP"] = make_proof(key, request.method,
                                                     self.base_url + request.url.path,
                                                     access_token=token)
        yield request


def signer(client: Any) -> KitSigner:
    """The client's signer, installed on first use (the hub's public URL is its htu base)."""
    auth = getattr(client, "_auth", None)
    if isinstance(auth, KitSigner):
        return auth
    url = client.get("/v1/hub").json()["url"]
    s = KitSigner(url)
    client.auth = s
    return s


@dataclass
class WireMember:
    """A device on the hub, speaking the protocol with a real key and device-bound tokens."""

    client: Any  # httpx2.Client or starlette TestClient
    token: str  # access token (DPoP-bound)
    key: Any
    user_id: str
    device_id: str
    replicas: dict[str, str] = field(default_factory=dict)
    refresh_token: str | None = None

    def __post_init__(self) -> None:
        signer(self.client).keys[self.token] = self.key

    @property
    def auth(self) -> dict[str, str]:
        # a current replica names its protocol version (hub/protocol.py)
        return {"Authorization": f"DPoP {self.token}",
                PROTOCOL_HEADER: str(PROTOCOL_VERSION)}

    def use_token(self, token: str) -> None:
        """Switch to another access token (refreshed or delegated) bound to this key."""
        self.token = token
        signer(self.client).keys[token] = self.key

    def proof(self, method: str, path: str, **kw: Any) -> str:
        return make_proof(self.key, method, signer(self.client).base_url + path, **kw)

    def get(self, path: str, **kw: Any) -> Any:
        return self.client.get(path, headers=self.auth, **kw)

    def post(self, path: str, body: Any, **kw: Any) -> Any:
        return self.client.post(path, json=body, headers=self.auth, **kw)

    def head(self, space: str) -> dict[str, Any]:
        r = self.get(f"/v1/spaces/{space}/head")
        assert r.status_code == 200, r.text
        return r.json()

    def replica(self, space: str) -> str:
        if space not in self.replicas:
            r = self.post(f"/v1/spaces/{space}/replicas", {"name": "test"})
            assert r.status_code == 201, r.text
            self.replicas[space] = r.json()["replica_id"]
        return self.replicas[space]

    def batch(self, space: str, ops: list[Op], *, head: dict[str, Any] | None = None,
              batch_id: str | None = None) -> dict[str, Any]:
        h = head or self.head(space)
        b = build_batch(self.key, batch_id=batch_id or new_id(), replica_id=self.replica(space),
                        space=h["space"], epoch=h["epoch"], parent_seq=h["seq"],
                        parent_digest=h["digest"], ops=ops)
        return b.to_wire()

    def publish(self, space: str, ops: list[Op], **kw: Any) -> Any:
        return self.post(f"/v1/spaces/{space}/batches", self.batch(space, ops, **kw))

    def create_space(self, name: str) -> str:
        r = self.post("/v1/spaces", {"name": name})
        assert r.status_code == 201, r.text
        return r.json()["space"]["id"]

    def invite(self, space: str, role: str, ttl: int = 3600) -> str:
        r = self.post(f"/v1/spaces/{space}/invites", {"role": role, "ttl_seconds": ttl})
        assert r.status_code == 201, r.text
        return r.json()["code"]


def redeem(client: Any, code: str, name: str = "dev") -> WireMember:
    key = new_private_key()
    r = client.post("/v1/invites/redeem", json={"code": code, "device_name": name,
                                                "device_key": public_b64(key)})
    assert r.status_code == 201, r.text
    d = r.json()
    return WireMember(client, d["access_token"], key, d["user_id"], d["device_id"],
                  refresh_token=d["refresh_token"])


def put(entry_id: str, body: str = "text\n", base: str | None = None, **fields: Any) -> Op:
    return Op(make_entry({"id": entry_id, "title": fields.pop("title", entry_id),
                          "body": body, **fields}), base)


def delete(entry_id: str, base: str) -> Op:
    from shared.entry import tombstone

    return Op(tombstone(entry_id), base)


def ndjson(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@dataclass
class WireTeam:
    app: Any
    hub: Any
    client: Any  # signs proofs for members (KitSigner)
    raw: Any  # sends exactly what the test gives it
    url: str  # the hub's public URL (token aud, proof htu base)
    owner: WireMember
    editor: WireMember
    viewer: WireMember
    space: str

    def member(self, role: str = "editor", name: str = "m") -> WireMember:
        return redeem(self.client, self.owner.invite(self.space, role), name)

    def delegate(self, m: WireMember, scope: str = "write", space: str | None = None,
                 agent: str = "bot") -> dict[str, Any]:
        r = m.post("/v1/delegations", {"space": space or self.space, "agent": agent,
                                       "scope": scope, "ttl_seconds": 3600})
        assert r.status_code == 201, r.text
        return r.json()

    def counts(self) -> dict[str, int]:
        from hub.store.schema import count_rows_txn

        with self.hub.store.read() as conn:
            return count_rows_txn(conn)


def make_wire_team(data: Path, db: str | None) -> Iterator[WireTeam]:
    from starlette.testclient import TestClient

    from hub.app import create_app
    from hub.guard import GuardHooks
    from hub.ratelimit import RateLimiter
    from hub.settings import load_settings

    code = init_hub(data, db)
    settings = load_settings(data)
    app = create_app(settings, hooks=GuardHooks())
    hub = app.state.hub
    # these tests make many members from one address; the redemption limit has its own test
    hub.redeem_limiter = RateLimiter(rate_per_s=1000.0, burst=1000, clock=hub.now)
    with TestClient(app, base_url="http://testhub") as client, \
            TestClient(app, base_url="http://testhub") as raw:
        owner = redeem(client, code, "owner")
        space = owner.create_space("team")
        editor = redeem(client, owner.invite(space, "editor"), "editor")
        viewer = redeem(client, owner.invite(space, "viewer"), "viewer")
        yield WireTeam(app, app.state.hub, client, raw, settings.url, owner, editor, viewer, space)
