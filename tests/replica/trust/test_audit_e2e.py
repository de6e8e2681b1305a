"""The audit log against a DB-level attacker, refused attempts in it, and the epoch bump's
dry run: end to end with a real ``quire hub serve`` process and the real ``quire`` CLI.

Each test runs a hub of its own (it stops the hub and edits its SQLite file, as someone
with the database and not the hub key would). The attacks are written first: each shows
that the chain alone still verifies after it (the check before signed tips), then that
``quire admin audit --verify`` and a replica's sync catch it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from hub.audit import event_digest
from replica.cli.identity import verify_audit_events
from replica.hubclient.client import HubClient
from replica.machine.home import Home
from shared.entry import make_entry
from tests.kit.cli import device_auth, qjson, quire
from tests.kit.hubproc import HubProcess, init_hub, serve_hub
from tests.kit.wire import put, redeem

pytestmark = pytest.mark.e2e


@dataclass
class Site:
    hub: HubProcess
    data: Path
    owner: Path
    root: Path

    def client(self, home: Path) -> HubClient:
        h = Home(home).hubs()[0]
        return HubClient(h.url, auth=device_auth(h), hub_key=h.public_key)

    def space(self, name: str) -> dict[str, Any]:
        # setup in-process with the owner's credential (each CLI start costs ~0.5 s); the
        # commands under test run through the CLI
        with self.client(self.owner) as c:
            return c.create_space(name)["space"]

    def rule(self, space: dict[str, Any], **rule: Any) -> None:
        with self.client(self.owner) as c:
            c.admin_post(f"/v1/spaces/{space['id']}/rules", rule)

    def join(self, space: dict[str, Any], name: str, role: str = "editor") -> tuple[Path, Path]:
        with self.client(self.owner) as c:
            code = c.create_invite(space["id"], role)["code"]
        home, vault = self.root / name / "home", self.root / name / "vault"
        qjson(home, "join", self.hub.url, "--invite", code, "--vault", str(vault),
              "--device", name)
        return home, vault

    def events(self, space: str | None = None) -> list[dict[str, Any]]:
        with self.client(self.owner) as c:
            return list(c.audit(space))

    def restart_after(self, attack: Any) -> None:
        """Stop the hub, run ``attack(sqlite connection)`` on its database, serve again on
        the same port (the replicas' configuration names it)."""
        self.hub.stop()
        conn = sqlite3.connect(self.data / "hub.db")
        try:
            attack(conn)
            conn.commit()
        finally:
            conn.close()
        self.hub = serve_hub(self.data, port=self.hub.port, env=self.env)

    env: dict[str, str] | None = None


def _site(root: Path, env: dict[str, str] | None = None) -> Site:
    data = root / "hub"
    code = init_hub(data)
    hp = serve_hub(data, env=env)
    owner = root / "owner"
    qjson(owner, "join", hp.url, "--invite", code, "--device", "owner")
    return Site(hp, data, owner, root, env)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    """A hub of the test's own: the attacks stop it and edit its database."""
    s = _site(tmp_path)
    yield s
    s.hub.stop()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """One hub for the tests that do not attack it (a small cap of distinct refusals)."""
    s = _site(tmp_path_factory.mktemp("audit"), {"QUIRE_HUB_AUDIT_REFUSAL_KEYS": "20"})
    yield s
    s.hub.stop()


def _page(vault: Path, eid: str, body: str) -> None:
    from replica.vault import markdown as md

    p = md.entry_path(vault, eid)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(md.render(make_entry({"id": eid, "title": eid, "body": body})))


def _tip_row(conn: sqlite3.Connection, chain: str) -> tuple[int, str]:
    return conn.execute("SELECT n, digest FROM audit WHERE chain = ? ORDER BY n DESC LIMIT 1",
                        (chain,)).fetchone()


def _set_tip(conn: sqlite3.Connection, chain: str) -> None:
    """Make the hub's own bookkeeping agree with the edited chain (a careful attacker)."""
    n, digest = _tip_row(conn, chain)
    if chain == "hub":
        conn.execute("UPDATE hub_state SET audit_seq = ?, audit_digest = ?", (n, digest))
    else:
        conn.execute("UPDATE spaces SET audit_seq = ?, audit_digest = ? WHERE id = ?",
                     (n, digest, chain))


def _rehash_from(conn: sqlite3.Connection, chain: str, n0: int) -> None:
    """Recompute every digest of ``chain`` from event ``n0`` on (the algorithm is public)."""
    prev = conn.execute("SELECT digest FROM audit WHERE chain = ? AND n = ?",
                        (chain, n0 - 1)).fetchone()[0]
    rows = conn.execute("SELECT n, at, action, actor, details FROM audit WHERE chain = ? "
                        "AND n >= ? ORDER BY n", (chain, n0)).fetchall()
    for n, at, action, actor, details in rows:
        d = event_digest(chain=chain, n=n, at=at, action=action, actor=json.loads(actor),
                         details=json.loads(details), prev=prev)
        conn.execute("UPDATE audit SET prev = ?, digest = ? WHERE chain = ? AND n = ?",
                     (prev, d, chain, n))
        prev = d
    _set_tip(conn, chain)


def _history(site: Site, name: str) -> tuple[dict[str, Any], Path]:
    """A space with a member's published page and a rule, verified once by the owner (who
    keeps the signed tips) and synced once more by the member (whose replica keeps them)."""
    space = site.space(name)
    alice, vault = site.join(space, "alice")
    _page(vault, "page/a", "one\n")
    qjson(alice, "sync")
    site.rule(space, who="editor", actions=["delete"], entries="page/*")
    site.rule(space, who="viewer", actions=["update"], entries="page/*")
    doc = qjson(site.owner, "admin", "audit", "--verify")
    assert doc["ok"] is True and doc["signed_tips"] >= 2, doc
    qjson(alice, "sync")
    return space, alice


def _refused(p: Any) -> dict[str, Any]:
    assert p.returncode == 6, (p.returncode, p.stdout, p.stderr)
    return json.loads(p.stdout)["error"]


def test_deleting_the_last_audit_events_is_detected(site: Site) -> None:
    space, alice = _history(site, "trunc")
    before = site.events()

    def attack(conn: sqlite3.Connection) -> None:
        n, _ = _tip_row(conn, space["id"])
        conn.execute("DELETE FROM audit WHERE chain = ? AND n > ?", (space["id"], n - 2))
        _set_tip(conn, space["id"])
        hn, _ = _tip_row(conn, "hub")
        conn.execute("DELETE FROM audit WHERE chain = 'hub' AND n = ?", (hn,))
        _set_tip(conn, "hub")

    site.restart_after(attack)
    after = site.events()
    assert len(after) == len(before) - 3
    # the attack passes the chain check alone: what `--verify` did before signed tips
    assert verify_audit_events(after) == (True, None)

    err = _refused(quire(site.owner, "admin", "audit", "--verify", "--json", check=False))
    assert err["code"] == "audit_truncated", err
    assert err["details"]["last_n"] < err["details"]["n"]
    # a space admin's view of the one chain is caught too
    err = _refused(quire(site.owner, "admin", "audit", "--verify", "--space", space["name"],
                         "--json", check=False))
    assert err["code"] == "audit_truncated" and err["details"]["chain"] == space["id"]
    # and the member's replica refuses the hub on its next sync, applying nothing
    err = _refused(quire(alice, "sync", "--json", check=False))
    assert err["code"] == "hub_unverified" and err["details"]["reason"] == "audit_rollback"


def test_editing_an_event_and_rehashing_the_chain_is_detected(site: Site) -> None:
    space, alice = _history(site, "rehash")

    def attack(conn: sqlite3.Connection) -> None:
        # the first rule, made to say something else; every later digest recomputed
        n = conn.execute("SELECT n FROM audit WHERE chain = ? AND action = 'rule.add' "
                         "ORDER BY n LIMIT 1", (space["id"],)).fetchone()[0]
        details = json.loads(conn.execute("SELECT details FROM audit WHERE chain = ? AND "
                                          "n = ?", (space["id"], n)).fetchone()[0])
        details["entries"] = "nothing/*"
        conn.execute("UPDATE audit SET details = ? WHERE chain = ? AND n = ?",
                     (json.dumps(details, sort_keys=True, separators=(",", ":")),
                      space["id"], n))
        _rehash_from(conn, space["id"], n)

    site.restart_after(attack)
    after = site.events()
    assert verify_audit_events(after) == (True, None)  # the chain alone: fooled
    assert any(e["action"] == "rule.add" and "nothing/*" in json.dumps(e["details"])
               for e in after)

    err = _refused(quire(site.owner, "admin", "audit", "--verify", "--json", check=False))
    assert err["code"] == "audit_rewritten", err
    assert err["details"]["chain"] == space["id"]
    assert err["details"]["digest"] != err["details"]["signed_digest"]
    err = _refused(quire(alice, "sync", "--json", check=False))
    assert err["code"] == "hub_unverified" and err["details"]["reason"] == "audit_rollback"


def test_refused_attempts_are_audited_counted_and_bounded(shared: Site) -> None:
    site = shared
    space = site.space("refusals")
    alice, _ = site.join(space, "alice")
    before = len(site.events())
    url = site.hub.url
    with httpx2.Client(base_url=url, timeout=30) as raw:
        # a burst of 1,000 identical refusals: a bad token on one route
        for _ in range(1000):
            r = raw.get("/v1/spaces", headers={"Authorization": "DPoP not-a-token",
                                               "DPoP": "not-a-proof"})
            assert r.status_code == 401
        # policy_denied: the guard refuses an editor's batch by the space's rules (a raw
        # publication: the CLI would refuse it locally before sending)
        site.rule(space, who="editor", actions=["create"], entries="guardrail/*")
        with site.client(site.owner) as c:
            code = c.create_invite(space["id"], "editor")["code"]
        bob = redeem(raw, code, "bob")
        r = bob.publish(space["id"], [put("guardrail/no-prod")])
        assert r.status_code == 403 and r.json()["error"]["code"] == "policy_denied", r.text
        # a forbidden admin call by an editor, through the CLI
        p = quire(alice, "admin", "rules", "add", space["name"], "--deny", "create", "--who",
                  "viewer", "--entries", "*", "--json", check=False)
        assert p.returncode == 5 and json.loads(p.stdout)["error"]["code"] == "forbidden"
        # a flood of distinct refusals (another space name each time): past the cap of
        # distinct keys a window, one overflow count
        for i in range(300):
            r = raw.get(f"/v1/spaces/s{i}/head", headers={"Authorization": "DPoP x"})
            assert r.status_code == 401

    events = site.events()[before:]
    refused = [e for e in events if e["action"] == "refused"]
    overflow = [e for e in events if e["action"] == "refused.overflow"]
    assert len(refused) <= 20 and len(overflow) == 1, [e["details"] for e in events]
    burst = [e for e in refused if e["details"]["route"] == "/v1/spaces"]
    assert len(burst) == 1 and burst[0]["details"]["count"] == 1000
    assert burst[0]["actor"] == {"client": "127.0.0.1"}
    assert burst[0]["details"]["code"] == "unauthorized"
    denied = [e for e in refused if e["details"]["code"] == "policy_denied"]
    assert [(e["actor"]["user"], e["details"]["count"], e["details"]["space"])
            for e in denied] == [(bob.user_id, 1, space["id"])]
    forbidden = [e for e in refused if e["details"]["code"] == "forbidden"]
    alice_user = Home(alice).hubs()[0].user_id
    assert [(e["actor"]["user"], e["details"]["route"]) for e in forbidden] == [
        (alice_user, "/v1/spaces/{space}/rules")]
    total = sum(e["details"]["count"] for e in refused + overflow)
    assert total == 1000 + 1 + 1 + 300
    # the refusals are chain events like any other: the log still verifies
    assert qjson(site.owner, "admin", "audit", "--verify")["ok"] is True


def test_epoch_bump_dry_run_reports_the_impact_and_changes_nothing(shared: Site) -> None:
    site = shared
    space = site.space("bump")
    alice, vault = site.join(space, "carol")
    _page(vault, "page/a", "one\n")
    _page(vault, "page/b", "two\n")
    qjson(alice, "sync")
    _page(vault, "page/c", "three\n")
    qjson(alice, "sync")
    replica = Home(alice).spaces()[0].replica_id

    def state() -> tuple[Any, ...]:
        with site.client(site.owner) as c:
            h = c.head(space["id"])
        return (h["epoch"], h["seq"], h["digest"], h["state"], h["audit_seq"],
                h["audit_digest"], site.events(space["id"]))

    before = state()
    doc = qjson(site.owner, "admin", "epoch", "bump", space["name"], "--reason", "test",
                "--dry-run")
    assert doc["dry_run"] is True and doc["epoch"] is None
    assert doc["previous"] == before[0]
    imp = doc["impact"]
    assert [r["id"] for r in imp["replicas_resnapshot"]] == [replica]
    assert imp["entries_carried"] == 3 and imp["loses_access"] == []
    assert imp["history_left"] == {"epoch": before[0], "batches": before[1],
                                   "head_digest": before[2]}
    text = quire(site.owner, "admin", "epoch", "bump", space["name"], "--reason", "test",
                 "--dry-run").stdout
    assert "dry run: nothing changed" in text and "carol" in text  # the replica by name
    assert replica not in text  # ids only in --json
    assert state() == before  # head, epoch, state and the audit log as they were

    done = qjson(site.owner, "admin", "epoch", "bump", space["name"], "--reason", "test")
    assert done["dry_run"] is False and done["epoch"] != before[0]
    assert done["impact"] == imp
    assert state()[0] == done["epoch"]
