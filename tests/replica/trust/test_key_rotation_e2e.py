"""Hub key rotation end to end: a real ``quire hub serve`` process (its own: the file
rotates its key), ``quire hub key rotate`` while it serves, and the real CLI.

- a replica offline during two rotations follows the chain on its next sync and pulls what
  was published since; a watcher follows it too; ``quire verify`` passes afterwards;
- the attacks: the hub's key replaced by hand (file and database record, as an intruder on
  the server would), then a forged rotation statement signed by the wrong key. A replica
  whose chain check is removed (patched out of the real CLI) takes the intruder's heads and
  content; with the check, ``hub_key_unchained`` (exit 6) and nothing is written;
- the lost-key recovery: ``quire hub key reset`` and ``quire repin`` with the checked id.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from replica.app import selfcheck
from replica.cli import doctor
from replica.machine.home import Home
from replica.store.store import Store
from replica.trust import verify
from shared.canonical import canonical_str
from shared.hubkeys import rotation_body, sign_rotation
from shared.signed import parse_head
from shared.signing import key_id, new_private_key, public_b64, save_private
from tests.kit.cli import CliMember, CliTeam, FreshHub, qjson, quire
from tests.kit.host import REPO
from tests.kit.hubproc import init_hub, serve_hub
from tests.kit.watcher import DEADLINE, HUB_ENV, WatchProc, page, wait_for

# The real CLI with the chain check removed: whatever key the hub offers is pinned
NO_CHAIN_CHECK = [sys.executable, "-c",
                  "import sys, replica.trust.keypin as kp\n"
                  "def follow(self, doc):\n"
                  "    self.history = (self.current, *self.history)\n"
                  "    self.current = doc['public_key']\n"
                  "    return True\n"
                  "kp.KeyPin.follow = follow\n"
                  "from replica.cli.main import main; sys.exit(main())"]


class Rotating:
    """The module's hub process, its data folder and a team on it."""

    def __init__(self, root: Path):
        self.data = root / "hub"
        code = init_hub(self.data)
        self.proc = serve_hub(self.data, env=HUB_ENV)
        self.owner = root / "owner"
        qjson(self.owner, "join", self.proc.url, "--invite", code, "--device", "owner")
        self.team = CliTeam(FreshHub(self.proc.url, self.data, code, self.proc.proc), self.owner,
                         root, "keys")

    def rotate(self) -> dict[str, Any]:
        return qjson(None, "hub", "key", "rotate", "--data", str(self.data))

    def hub_key(self) -> dict[str, Any]:
        return httpx2.get(self.proc.url + "/v1/hub/keys", timeout=10).json()

    def db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.data / "hub.db")


@pytest.fixture()
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rotating]:
    """A hub of the test's own: each test rotates or replaces its key."""
    r = Rotating(tmp_path_factory.mktemp("keyrot"))
    yield r
    r.proc.stop()


def pinned(m: CliMember) -> Any:
    return Home(m.home).hubs()[0]


def publish(m: CliMember, eid: str, body: str) -> None:
    p = m.path(eid)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(page(eid.split("/")[-1], body))
    m.sync()


def has(m: CliMember, eid: str, body: str) -> bool:
    e = m.read(eid)
    return e is not None and e.body == body


def store_digest(m: CliMember) -> str:
    st = Store(Home(m.home).spaces()[0].store_path)
    try:
        return st.digest()
    finally:
        st.close()


def test_replicas_follow_two_rotations_made_while_one_was_offline(hub: Rotating) -> None:
    ann, bob, cat, dan = hub.team.members("ann", "bob", "cat", "dan")
    # bob and dan hold their join snapshot and are offline from here on; page/before is
    # pulled by them after the rotations, with its receipt signed by the first key
    publish(ann, "page/before", "published under the first key\n")
    first = pinned(bob).public_key
    w = WatchProc(cat)
    try:
        w.wait_ready()
        wait_for(lambda: has(cat, "page/before", "published under the first key\n"))
        # the hub rotates twice while it serves
        one, two = hub.rotate(), hub.rotate()
        assert (one["seq"], two["seq"]) == (1, 2) and two["previous"] == one["key_id"]
        doc = hub.hub_key()
        assert doc["key_id"] == two["key_id"] and len(doc["chain"]) == 2
        publish(ann, "page/after", "published under the third key\n")
        assert pinned(ann).key_id == two["key_id"]
        # the watcher hears the new head (signed by a key it never pinned) and follows
        wait_for(lambda: has(cat, "page/after", "published under the third key\n"),
                 DEADLINE, lambda: f"{w.status()}\n{w.log.read_text()[-3000:]}")
        assert pinned(cat).key_id == two["key_id"]
    finally:
        w.stop()
    # before it: 'quire doctor' tells bob the chain leads to the hub's new key
    found = [(f.check, f.level) for f in doctor.check_hub(pinned(bob))]
    assert ("hub_key", "info") in found and not [f for f in found if f[1] == "error"]
    # bob and dan come back: one sync walks both links from the pin and pulls the new page
    for m in (bob, dan):
        m.sync()
        assert has(m, "page/after", "published under the third key\n")
        assert has(m, "page/before", "published under the first key\n")
        h = pinned(m)
        assert h.key_id == two["key_id"] and h.key_history[-1] == first
        assert [s["seq"] for s in h.key_chain] == [1, 2]
        saved = json.loads((h.dir / "hub.json").read_text())
        assert saved["public_key"] == h.public_key and len(saved["key_chain"]) == 2
    # history verified under the old key stays valid ('quire verify', and the same check
    # in-process for the others)
    assert qjson(bob.home, "verify")["ok"] is True
    for m in (ann, cat, dan):
        home = Home(m.home)
        assert selfcheck.run(home, home.spaces()[0])["ok"] is True


def test_a_head_signed_by_a_key_outside_the_chain_is_refused(hub: Rotating) -> None:
    team = hub.team
    ann, bob, dan = team.members("ann", "bob", "dan")
    publish(ann, "page/later", "published before the intruder\n")
    # the intruder, root on the hub's server, replaces the key without a statement: a new
    # key file and the database record naming it (else the hub refuses to start)
    hub.proc.stop()
    evil = new_private_key()
    save_private(evil, hub.data / "hub_key.pem")
    with hub.db() as db:
        db.execute("UPDATE hub_state SET key_id = ?", (key_id(public_b64(evil)),))
    hub.proc = serve_hub(hub.data, port=hub.proc.port, env=HUB_ENV)
    # without the chain check the intruder's heads get through: dan takes the page
    p = subprocess.run([*NO_CHAIN_CHECK, "sync", "--json"], capture_output=True, text=True,
                       cwd=REPO, env={**os.environ, "QUIRE_HOME": str(dan.home)},
                       timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert has(dan, "page/later", "published before the intruder\n")
    st = Store(Home(dan.home).spaces()[0].store_path)
    try:  # and what it recorded is signed by the intruder's key
        parse_head(public_b64(evil), st.get_meta(verify.SIGNED_HEAD),
                   space=Home(dan.home).spaces()[0].space_id)
    finally:
        st.close()
    # with it: refused, named, nothing written
    before = (store_digest(bob), bob.files(), (pinned(bob).dir / "hub.json").read_text())
    r = quire(bob.home, "sync", "--json", check=False)
    err = json.loads(r.stdout)["error"]
    assert r.returncode == 6 and err["code"] == "hub_key_unchained", r.stdout
    assert err["details"]["reason"] == "unchained_key" and "quire repin" in err["message"]
    assert before == (store_digest(bob), bob.files(), (pinned(bob).dir / "hub.json").read_text())
    # a forged statement (signed by the intruder's key, not by the key it claims to
    # replace) is refused the same way
    last = pinned(bob).public_key
    forged = sign_rotation(evil, rotation_body(hub=pinned(bob).hub_id, seq=3, previous_key=last,
                                               key=public_b64(evil), at=1))
    with hub.db() as db:
        db.execute("INSERT INTO hub_keys (seq, key_id, statement, at) VALUES (3, ?, ?, 1)",
                   (forged["key_id"], canonical_str(forged)))
    r = quire(bob.home, "sync", "--json", check=False)
    err = json.loads(r.stdout)["error"]
    assert r.returncode == 6 and err["code"] == "hub_key_unchained", r.stdout
    assert err["details"]["reason"] == "bad_link"
    assert before == (store_digest(bob), bob.files(), (pinned(bob).dir / "hub.json").read_text())
    home = Home(bob.home)  # what bob holds still verifies
    assert selfcheck.run(home, home.spaces()[0])["ok"] is True
    # the admin's recovery: the real key is lost (overwritten), so a new key without a
    # statement ('quire hub key reset', the serving hub reloads it) and members re-pin by
    # hand, with the key id the admin gives them (a wrong one is refused, nothing changes)
    (hub.data / "hub_key.pem").unlink()
    reset = qjson(None, "hub", "key", "reset", "--data", str(hub.data))
    assert reset["previous"] == key_id(public_b64(evil)) and hub.hub_key()["key_id"] == \
        reset["key_id"]
    wrong = quire(bob.home, "repin", team.hub.url, "--hub-key", "0" * 16, "--json",
                  check=False)
    assert wrong.returncode != 0 and "fingerprint_mismatch" in wrong.stdout
    assert before[2] == (pinned(bob).dir / "hub.json").read_text()
    doc = qjson(bob.home, "repin", team.hub.url, "--hub-key", reset["key_id"])
    assert doc["changed"] is True
    bob.sync()
    assert has(bob, "page/later", "published before the intruder\n")
    assert qjson(bob.home, "verify")["ok"] is True
