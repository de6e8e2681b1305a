"""``quire verify`` through the real CLI against a real hub process: the store against the
last signed head, the vault against the store, and the hub checking itself (``--hub``)."""

from __future__ import annotations

import sqlite3

from replica.machine.home import Home
from shared.entry import Entry
from tests.kit.cli import CliTeam, quire

PAGE = Entry(id="page/deploy", title="Deploy", body="ship it\n")
NOTE = Entry(id="note/x", title="X", body="n\n")


def _verify(m, *args: str) -> tuple[int, dict]:
    import json

    p = quire(m.home, "verify", *args, "--json", check=False)
    return p.returncode, json.loads(p.stdout)


def test_verify_reports_a_verified_replica_and_every_difference(team: CliTeam):
    a, b = team.members("a", "b")
    a.write(PAGE)
    a.write(NOTE)
    a.sync()
    b.sync()
    rc, doc = _verify(b, "--hub")
    assert rc == 0 and doc["ok"], doc
    assert doc["store"]["entries"] == 2 and doc["vault"]["files"] == 2
    assert doc["hub"]["chain"]["ok"] and doc["hub"]["state"]["ok"]
    assert doc["store"]["state"] == doc["hub"]["state"]["root"]
    # the pusher verifies too: its pushed state was confirmed by a head signed over a nonce
    rc, doc = _verify(a)
    assert rc == 0 and doc["ok"], doc

    # a vault file changed behind the replica's back, another one added, one removed
    b.path(PAGE.id).write_text("tampered\n")
    (b.vault / "page" / "new.md").write_text("---\ntitle: n\n---\nbody\n")
    b.path(NOTE.id).unlink()
    rc, doc = _verify(b)
    assert rc == 6 and not doc["ok"]
    assert doc["vault"]["changed"] == [PAGE.id]
    assert doc["vault"]["missing"] == [NOTE.id]
    assert doc["vault"]["untracked"] == ["page/new.md"]
    assert doc["store"]["ok"]  # the store itself still adds up to the signed head

    # the store's synced state rewritten in place (not through a sync)
    space = Home(a.home).spaces()[0]
    con = sqlite3.connect(space.store_path)
    con.execute("UPDATE entries SET synced_version = ? WHERE id = ?", ("0" * 64, PAGE.id))
    con.commit()
    con.close()
    rc, doc = _verify(a)
    assert rc == 6 and not doc["store"]["ok"]
    assert "do not add up" in doc["store"]["problem"]
