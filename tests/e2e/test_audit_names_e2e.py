"""``quire admin audit`` for people (docs/decisions.md D138): the space, the member and
their device by name, never an id; ``--json`` prints the events as exported, ids and all.
Real hub process, the real CLI.

Before: each line showed a prefix of the chain's id and the actor's user id."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from tests.kit.cli import FreshHub, qjson, quire

pytestmark = [pytest.mark.e2e]

ULID = re.compile(r"\b[0-9a-hjkmnp-tv-z]{26}\b")  # as the README tour test (tests/docs)


def test_the_audit_names_the_space_and_the_people(hub: FreshHub, owner: Path,
                                                  tmp_path: Path) -> None:
    space = "audit-names-" + uuid.uuid4().hex[:6]
    qjson(owner, "admin", "space", "create", space)
    code = qjson(owner, "admin", "invite", "create", space, "--role", "editor")["code"]
    qjson(tmp_path / "carol", "join", hub.url, "--invite", code, "--device", "carol-laptop",
          "--name", "Carol C.", "--vault", str(tmp_path / "vault"))
    audit = quire(owner, "admin", "audit", "--space", space).stdout
    assert not ULID.search(audit), audit
    redeemed = next(ln for ln in audit.splitlines() if "invite.redeem" in ln)
    assert redeemed.startswith(tuple("0123456789")) and f"{space}#" in redeemed
    assert "Carol C. (carol-laptop)" in redeemed and "role editor" in redeemed, redeemed
    registered = next(ln for ln in audit.splitlines() if "replica.register" in ln)
    assert "name carol-laptop" in registered, registered
    exported = [json.loads(ln) for ln in
                quire(owner, "admin", "audit", "--space", space, "--json").stdout.splitlines()]
    assert any(ULID.fullmatch(str(e["actor"].get("user"))) for e in exported)
