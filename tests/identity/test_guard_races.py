"""The guard re-checks identity at commit: a publication paused after preparation
(``GuardHooks.after_prepare``) while another connection lowers the role, removes the member,
revokes the device, revokes the delegation, adds a rule that denies the op or bumps the
epoch, is refused with nothing written. 20 trials of each, with random timing around the
change, on PostgreSQL (tests/hub covers the same seam on SQLite)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import pytest

from hub.store import queries as q
from shared.dpop import make_proof
from tests.identity.conftest import Team
from tests.kit import put

TRIALS = 20


def _publish_as_agent(t: Team, m: Any, token: str, body: dict[str, Any]) -> Any:
    path = f"/v1/spaces/{t.space}/batches"
    return t.raw.post(path, json=body, headers={
        "Authorization": f"DPoP {token}",
        "DPoP": make_proof(m.key, "POST", t.url + path, access_token=token)})


def _admin(t: Team, path: str, body: dict[str, Any]) -> None:
    r = t.owner.post(path, body)
    assert r.status_code in (200, 201), r.text


MUTATIONS: dict[str, tuple[Callable[[Team, Any, dict[str, Any]], None], set[str]]] = {
    "role_lowered": (lambda t, m, ctx: t.hub.store.run_write(
        lambda c: q.set_member_txn(c, t.space, m.user_id, "viewer", 0)), {"forbidden"}),
    "member_removed": (lambda t, m, ctx: _admin(
        t, f"/v1/spaces/{t.space}/members/{m.user_id}/remove", {}), {"not_found"}),
    "device_revoked": (lambda t, m, ctx: _admin(
        t, f"/v1/devices/{m.device_id}/revoke", {}), {"unauthorized"}),
    "delegation_revoked": (lambda t, m, ctx: _admin(
        t, f"/v1/delegations/{ctx['delegation']}/revoke", {}), {"unauthorized"}),
    # the rule changed after preparation: head_changed, and the retry meets the rule
    "rule_denies_op": (lambda t, m, ctx: _admin(
        t, f"/v1/spaces/{t.space}/rules",
        {"who": "editor", "actions": ["create"], "entries": "page/race-*"}), {"head_changed"}),
    "epoch_bumped": (lambda t, m, ctx: _admin(
        t, f"/v1/spaces/{t.space}/epoch", {"reason": "race test"}), {"epoch_changed"}),
}


@pytest.mark.parametrize("kind", list(MUTATIONS))
def test_change_during_prepare_blocks_publication(team_pg: Team, kind: str) -> None:
    t = team_pg
    mutate, codes = MUTATIONS[kind]
    rng = random.Random(kind)
    hooks = t.hub.hooks
    through = 0
    for i in range(TRIALS):
        m = t.member("editor", f"{kind}-{i}")
        ctx: dict[str, Any] = {}
        body = m.batch(t.space, [put(f"page/race-{kind}-{i}")])
        if kind == "delegation_revoked":
            r = m.post("/v1/delegations", {"space": t.space, "agent": "racer",
                                           "scope": "write", "ttl_seconds": 600})
            assert r.status_code == 201, r.text
            ctx["delegation"] = r.json()["delegation"]["id"]
            ctx["token"] = r.json()["token"]
        before = t.counts()

        def pause(_batch: Any, ctx: dict[str, Any] = ctx, m: Any = m) -> None:
            time.sleep(rng.random() * 0.004)  # the change lands at a random moment
            mutate(t, m, ctx)
            time.sleep(rng.random() * 0.004)

        hooks.after_prepare = pause
        try:
            if kind == "delegation_revoked":
                r = _publish_as_agent(t, m, ctx["token"], body)
            else:
                r = m.post(f"/v1/spaces/{t.space}/batches", body)
        finally:
            hooks.after_prepare = None
        if r.status_code in (200, 201):
            through += 1
            continue
        assert r.json()["error"]["code"] in codes, r.text
        after = t.counts()
        assert (after["batches"], after["entries"]) == (before["batches"], before["entries"])
        if kind == "rule_denies_op":
            # the retry is judged by the new rule, and says which op it denies
            again = m.post(f"/v1/spaces/{t.space}/batches", m.batch(t.space, [
                put(f"page/race-{kind}-{i}")]))
            assert again.json()["error"]["code"] == "policy_denied", again.text
            denied = again.json()["error"]["details"]["denied"]
            assert denied == [{"id": f"page/race-{kind}-{i}", "action": "create",
                               "rule": denied[0]["rule"]}]
            rules = t.owner.get(f"/v1/spaces/{t.space}/rules").json()["rules"]
            for rule in rules:
                _admin(t, f"/v1/spaces/{t.space}/rules/{rule['id']}/remove", {})
    assert through == 0
