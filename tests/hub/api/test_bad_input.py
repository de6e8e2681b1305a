"""Every malformed request gets its documented code and changes nothing."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from shared.digest import digest_of
from shared.signing import BATCH_DOMAIN, new_private_key, public_b64, sign
from tests.kit.wire import put, redeem


def _redigest(b: dict[str, Any], key: Any) -> dict[str, Any]:
    """Re-digest and re-sign after a mutation, so only the mutation is wrong."""
    body = {k: v for k, v in b.items() if k not in ("digest", "signature")}
    b["digest"] = digest_of(body)
    b["signature"] = sign(key, BATCH_DOMAIN, b["digest"].encode())
    return b


def _mut(fn: Callable[[dict[str, Any]], None], resign: bool = True):
    def make(ctx: dict[str, Any]) -> tuple[str, str, Any, dict[str, str]]:
        b = copy.deepcopy(ctx["batch"])
        fn(b)
        if resign:
            try:
                _redigest(b, ctx["editor"].key)
            except Exception:
                pass  # a value with no canonical form: sent as is
        return "POST", f"/v1/spaces/{ctx['space']}/batches", b, ctx["editor"].auth
    return make


def _raw(body: bytes | str, path: str | None = None, auth: bool = True):
    def make(ctx: dict[str, Any]) -> tuple[str, str, Any, dict[str, str]]:
        return ("POST", path or f"/v1/spaces/{ctx['space']}/batches", body,
                ctx["editor"].auth if auth else {})
    return make


def _get(path_fmt: str, auth: bool = True, headers: dict[str, str] | None = None):
    def make(ctx: dict[str, Any]) -> tuple[str, str, Any, dict[str, str]]:
        h = headers if headers is not None else (ctx["editor"].auth if auth else {})
        return "GET", path_fmt.format(**ctx), None, h
    return make


def _entry(**fields: Any):
    def fn(b: dict[str, Any]) -> None:
        b["ops"][0]["entry"].update(fields)
    return fn


def _set(path: list[Any], value: Any):
    def fn(b: dict[str, Any]) -> None:
        node = b
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = value
    return fn


def _other_key(ctx: dict[str, Any]) -> tuple[str, str, Any, dict[str, str]]:
    b = copy.deepcopy(ctx["batch"])
    _redigest(b, new_private_key())
    return "POST", f"/v1/spaces/{ctx['space']}/batches", b, ctx["editor"].auth


def _other_space(ctx: dict[str, Any]) -> tuple[str, str, Any, dict[str, str]]:
    return "POST", f"/v1/spaces/{ctx['other']}/batches", ctx["batch"], ctx["editor"].auth


def _oversized(ctx: dict[str, Any]) -> tuple[str, str, Any, dict[str, str]]:
    return ("POST", f"/v1/spaces/{ctx['space']}/batches", b"{" + b" " * (9 * 1024 * 1024) + b"}",
            ctx["editor"].auth)


def _big_entry(b: dict[str, Any]) -> None:
    b["ops"][0]["entry"]["body"] = "x" * (1024 * 1024 + 1)


def _many_ops(b: dict[str, Any]) -> None:
    op = b["ops"][0]
    b["ops"] = [dict(op, entry=dict(op["entry"], id=f"page/p{i}")) for i in range(1001)]


def _purge(entries: list[str], who: str = "owner", reason: str = "r") -> Any:
    """A purge request (hub/purge.py) refused before it changes anything."""
    return lambda c: ("POST", f"/v1/spaces/{c['space']}/purge",
                      {"entries": entries, "reason": reason}, c[who].auth)


CASES: list[tuple[str, Any, int, str]] = [
    ("malformed JSON", _raw(b'{"batch_id": '), 422, "invalid_request"),
    ("JSON array body", _raw(b"[]"), 422, "invalid_request"),
    ("empty body", _raw(b""), 422, "invalid_request"),
    ("NaN constant", _raw(b'{"x": NaN}'), 422, "invalid_request"),
    ("duplicate keys", _raw(b'{"a": 1, "a": 2}'), 422, "invalid_request"),
    ("unknown top-level field", _mut(_set(["extra"], 1)), 422, "invalid_request"),
    ("unknown op field", _mut(_set(["ops", 0, "why"], "x")), 422, "invalid_request"),
    ("unknown entry field", _mut(_entry(color="red")), 422, "invalid_request"),
    ("oversized body", _oversized, 413, "too_large"),
    ("entry body over limit", _mut(_big_entry), 413, "too_large"),
    ("more ops than allowed", _mut(_many_ops), 413, "too_large"),
    ("../ in slug", _mut(_entry(id="page/../../etc/passwd")), 422, "invalid_request"),
    ("leading slash in slug", _mut(_entry(id="page//abs")), 422, "invalid_request"),
    # any path is an id (D132), but not one with a control character or in NFD form
    ("control character in id", _mut(_entry(id="Page/x\x07")), 422, "invalid_request"),
    ("id not in NFC", _mut(_entry(id="page/cafe\u0301")), 422, "invalid_request"),
    ("dot segment slug", _mut(_entry(id="page/.hidden")), 422, "invalid_request"),
    ("non-canonical batch id", _mut(_set(["batch_id"], "BATCH-1")), 422, "invalid_request"),
    ("non-canonical replica id", _mut(_set(["replica_id"], "u" * 26)), 422, "invalid_request"),
    ("wrong digest", _mut(_set(["digest"], "0" * 64), resign=False), 422, "invalid_request"),
    ("signature by another key", _other_key, 422, "invalid_request"),
    ("missing auth", _raw(b"{}", auth=False), 401, "unauthorized"),
    ("forged token", lambda c: ("POST", f"/v1/spaces/{c['space']}/batches", c["batch"],
                                {"Authorization": "Bearer qd_forged"}), 401, "unauthorized"),
    ("malformed auth header", lambda c: ("POST", f"/v1/spaces/{c['space']}/batches",
                                         c["batch"], {"Authorization": "Basic abc"}),
     401, "unauthorized"),
    ("unknown space", lambda c: ("POST", "/v1/spaces/nosuchspace/batches", c["batch"],
                                 c["editor"].auth), 404, "not_found"),
    ("batch for another space", _other_space, 422, "invalid_request"),
    ("traversal in space path", _get("/v1/spaces/..%2F..%2Fetc/head"), 404, "not_found"),
    ("float in meta", _mut(_entry(meta={"p": 0.5})), 422, "invalid_request"),
    ("lone surrogate", _raw(b'{"x": "\\ud800"}'), 422, "invalid_request"),
    ("duplicate entry in batch", _mut(lambda b: b["ops"].append(b["ops"][0])),
     422, "invalid_request"),
    ("empty ops", _mut(_set(["ops"], [])), 422, "invalid_request"),
    ("negative parent seq", _mut(_set(["parent", "seq"], -1)), 422, "invalid_request"),
    ("base not a digest", _mut(_set(["ops", 0, "base"], "abc")), 422, "invalid_request"),
    ("unknown op kind", _mut(_set(["ops", 0, "op"], "patch")), 422, "invalid_request"),
    ("delete without base", _mut(lambda b: b["ops"].__setitem__(
        0, {"op": "delete", "id": "page/x", "base": None})), 422, "invalid_request"),
    ("tag with space", _mut(_entry(tags=["two words"])), 422, "invalid_request"),
    ("link not an entry id", _mut(_entry(links=["no//where"])), 422, "invalid_request"),
    ("unknown provenance field", _mut(_set(["provenance"], {"secret": "x"})),
     422, "invalid_request"),
    ("unregistered replica", _mut(_set(["replica_id"], "0" * 26)), 403, "forbidden"),
    ("changes with negative after", _get("/v1/spaces/{space}/changes?after=-1"),
     422, "invalid_request"),
    ("changes with zero limit", _get("/v1/spaces/{space}/changes?limit=0"),
     422, "invalid_request"),
    ("purge by an editor", _purge(["page/seed"], "editor"), 403, "forbidden"),
    ("purge of an entry never held", _purge(["page/never"]), 404, "not_found"),
    ("purge of a bad entry id", _purge(["page/../x"]), 422, "invalid_request"),
    ("purge of no entries", _purge([]), 422, "invalid_request"),
    ("purge without a reason", _purge(["page/seed"], reason=" "), 422, "invalid_request"),
    ("changes with bad epoch", _get("/v1/spaces/{space}/changes?epoch=../x"),
     422, "invalid_request"),
    ("changes with unknown parameter", _get("/v1/spaces/{space}/changes?since=1"),
     422, "invalid_request"),
    ("receipt with bad ids", _get("/v1/spaces/{space}/receipts/x/y"), 422, "invalid_request"),
    ("unknown invite code", lambda c: ("POST", "/v1/invites/redeem",
                                       {"code": "qi_nope", "device_name": "d",
                                        "device_key": "A" * 43}, {}), 401, "unauthorized"),
    ("redeem with bad device key", lambda c: ("POST", "/v1/invites/redeem",
                                              {"code": "qi_nope", "device_name": "d",
                                               "device_key": "short"}, {}),
     422, "invalid_request"),
    ("unknown route", _get("/v1/nothing"), 404, "not_found"),
]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def module_hub(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
               ) -> Any:
    """One hub for the whole table: bad requests change nothing, so cases cannot interfere."""
    from contextlib import ExitStack

    from starlette.testclient import TestClient

    from hub.app import create_app
    from hub.settings import load_settings
    from tests.kit.hubproc import init_hub
    from tests.kit.pg import pg_database, require_pg

    with ExitStack() as stack:
        url = None
        if request.param == "postgresql":
            require_pg()
            url = stack.enter_context(pg_database())
        data = tmp_path_factory.mktemp("hub") / "data"
        code = init_hub(data, url)
        app = create_app(load_settings(data))
        client = stack.enter_context(TestClient(app, base_url="http://testhub"))
        hub_app = {"client": client, "code": code, "hub": app.state.hub}
        owner = redeem(hub_app["client"], hub_app["code"], "owner")
        space = owner.create_space("team")
        other = owner.create_space("other")
        editor = redeem(hub_app["client"], owner.invite(space, "editor"), "editor")
        r = hub_app["client"].post("/v1/invites/redeem", headers=editor.auth, json={
            "code": owner.invite(other, "editor"), "device_name": "editor",
            "device_key": public_b64(editor.key)})
        assert r.status_code == 201, r.text
        assert editor.publish(space, [put("page/seed")]).status_code == 201
        yield {"space": space, "other": other, "editor": editor, "owner": owner, **hub_app}


@pytest.fixture
def ctx(module_hub: dict[str, Any]) -> dict[str, Any]:
    n = len(module_hub.setdefault("n", []))
    module_hub["n"].append(1)
    batch = module_hub["editor"].batch(module_hub["space"], [put(f"page/new{n}", "body\n")])
    return dict(module_hub, batch=batch)


def _state(ctx: dict[str, Any]) -> tuple[Any, ...]:
    from hub.store.schema import count_rows_txn
    from hub.store.spaces_sql import get_space_txn

    with ctx["hub"].store.read() as conn:
        counts = count_rows_txn(conn)
        space = get_space_txn(conn, ctx["space"])
    return (counts, space.head_seq, space.head_digest)


@pytest.mark.parametrize("name,make,status,code", CASES, ids=[c[0] for c in CASES])
def test_bad_request_gets_its_code_and_changes_nothing(ctx: dict[str, Any], name: str,
                                                       make: Any, status: int, code: str
                                                       ) -> None:
    method, path, body, headers = make(ctx)
    before = _state(ctx)
    client = ctx["client"]
    if method == "GET":
        r = client.get(path, headers=headers)
    elif isinstance(body, (bytes, str)):
        r = client.post(path, content=body, headers={**headers,
                                                     "content-type": "application/json"})
    else:
        r = client.post(path, content=json.dumps(body), headers={
            **headers, "content-type": "application/json"})
    assert r.status_code == status, (name, r.text[:300])
    assert r.json()["error"]["code"] == code, (name, r.text[:300])
    assert isinstance(r.json()["error"]["message"], str)
    assert _state(ctx) == before
    # and the valid batch still goes through afterwards
    if path.endswith("/batches") and name != "unknown space":
        ok = client.post(f"/v1/spaces/{ctx['space']}/batches", json=ctx["batch"],
                         headers=ctx["editor"].auth)
        assert ok.status_code == 201, ok.text
