"""Member display names are not device names: set at join, changed by the member, a hub
owner or an admin of a space the member is in (nobody else), and listed by
``admin member list`` (real hub process, the real CLI)."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx2

from tests.kit.cli import FreshHub, qjson, quire
from tests.kit.hubproc import init_hub, serve_hub
from tests.kit.wire import WireMember, ndjson, redeem


def test_display_names_are_set_at_join_and_changed_only_by_those_allowed(
        tmp_path: Path) -> None:
    """Before: a member's name was their device's name (redeem had no name of its own from
    the CLI), and nothing could change it."""
    data = tmp_path / "hub"
    code = init_hub(data)
    hub = serve_hub(data)
    clients = [httpx2.Client(base_url=hub.url, timeout=30) for _ in range(4)]
    try:
        owner = redeem(clients[0], code, "owner-laptop")
        space = owner.create_space("names-" + uuid.uuid4().hex[:6])
        other = owner.create_space("other-" + uuid.uuid4().hex[:6])

        def join(c: httpx2.Client, sp: str, role: str, device: str, name: str) -> WireMember:
            from shared.signing import new_private_key, public_b64

            key = new_private_key()
            r = c.post("/v1/invites/redeem", json={
                "code": owner.invite(sp, role), "device_name": device,
                "device_key": public_b64(key), "user_name": name})
            assert r.status_code == 201, r.text
            d = r.json()
            return WireMember(c, d["access_token"], key, d["user_id"], d["device_id"])

        ann = join(clients[1], space, "admin", "ann-laptop", "Ann Example")
        bob = join(clients[2], space, "editor", "bob-desktop", "Bob")
        eve = join(clients[3], other, "admin", "eve-box", "Eve")
        members = {m["user_id"]: m["name"] for m in
                   ann.get(f"/v1/spaces/{space}/members").json()["members"]}
        assert members[ann.user_id] == "Ann Example" and members[bob.user_id] == "Bob"
        assert bob.post("/v1/users/me/name", {"name": "Robert"}).json()["previous"] == "Bob"
        assert ann.post(f"/v1/users/{bob.user_id}/name", {"name": "Rob"}).status_code == 200
        assert owner.post(f"/v1/users/{ann.user_id}/name", {"name": "Ann"}).status_code == 200
        # an editor cannot rename others; an admin of another space cannot either
        assert bob.post(f"/v1/users/{ann.user_id}/name", {"name": "x"}).status_code == 404
        assert eve.post(f"/v1/users/{bob.user_id}/name", {"name": "x"}).status_code == 404
        bad = bob.post("/v1/users/me/name", {"name": "a\x1b[31mred"})
        assert bad.status_code == 422 and bad.json()["error"]["details"]["reason"] == "bad_name"
        members = {m["user_id"]: m["name"] for m in
                   ann.get(f"/v1/spaces/{space}/members").json()["members"]}
        assert members == {owner.user_id: "owner-laptop", ann.user_id: "Ann",
                           bob.user_id: "Rob"}
        audit = ndjson(owner.get("/v1/audit").text)
        renames = [e for e in audit if e.get("action") == "user.rename"]
        assert [e["details"]["name"] for e in renames] == ["Robert", "Rob", "Ann"]
    finally:
        for c in clients:
            c.close()
        hub.stop()


def test_join_name_and_member_list_through_the_cli(hub: FreshHub, owner: Path,
                                                   tmp_path: Path) -> None:
    space = "cli-names-" + uuid.uuid4().hex[:6]
    qjson(owner, "admin", "space", "create", space)
    code = qjson(owner, "admin", "invite", "create", space, "--role", "editor")["code"]
    home = tmp_path / "carol"
    joined = qjson(home, "join", hub.url, "--invite", code, "--device", "carol-laptop",
                   "--name", "Carol C.", "--vault", str(tmp_path / "vault"))
    listed = qjson(owner, "admin", "member", "list", space)["members"]
    carol = [m for m in listed if m["user_id"] == joined["user_id"]]
    assert carol and carol[0]["name"] == "Carol C."
    renamed = qjson(home, "admin", "users", "name", "me", "Carol")
    assert renamed["previous"] == "Carol C." and renamed["name"] == "Carol"
    human = quire(owner, "admin", "member", "list", space).stdout
    assert "Carol" in human and "carol-laptop" not in human


def _join_at_a_terminal(home: Path, url: str, code: str, vault: Path, typed: str
                        ) -> tuple[str, str]:
    """``quire join`` as a person runs it: stdin and stderr on a terminal (a pty), the
    name typed at the prompt. (prompt text, stdout)."""
    import os
    import pty
    import select
    import subprocess
    import time

    from tests.kit.cli import QUIRE
    from tests.kit.host import REPO

    master, slave = pty.openpty()
    env = dict(os.environ, QUIRE_HOME=str(home))
    p = subprocess.Popen([*QUIRE, "join", url, "--invite", code, "--vault", str(vault)],
                         stdin=slave, stderr=slave, stdout=subprocess.PIPE, env=env, cwd=REPO)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    try:
        while b"]: " not in seen:
            assert time.monotonic() < deadline and p.poll() is None, seen
            if select.select([master], [], [], 0.5)[0]:
                seen += os.read(master, 4096)
        os.write(master, typed.encode() + b"\n")
        out, _ = p.communicate(timeout=60)
    finally:
        os.close(master)
    assert p.returncode == 0, (seen, out)
    return seen.decode(errors="replace"), out.decode()


def test_a_new_member_is_offered_the_invites_name_and_may_type_another(
        hub: FreshHub, owner: Path, tmp_path: Path) -> None:
    """The invite's name is the default: taken as is without a terminal (no prompt),
    offered at the prompt at one (typing another keeps that one), and ``--name`` wins over
    it. Before: every member was named after the computer account (``root`` here)."""
    space = "invite-names-" + uuid.uuid4().hex[:6]
    qjson(owner, "admin", "space", "create", space)

    def invite(name: str) -> str:
        made = qjson(owner, "admin", "invite", "create", space, "--role", "editor",
                     "--name", name)
        assert made["name"] == name
        return str(made["code"])

    dana = qjson(tmp_path / "dana", "join", hub.url, "--invite", invite("Dana Label"),
                 "--vault", str(tmp_path / "v-dana"))
    assert dana["user_name"] == "Dana Label" and dana["new_user"] is True
    erin = qjson(tmp_path / "erin", "join", hub.url, "--invite", invite("Erin Label"),
                 "--name", "Erin E.", "--vault", str(tmp_path / "v-erin"))
    assert erin["user_name"] == "Erin E."
    prompt, out = _join_at_a_terminal(tmp_path / "finn", hub.url, invite("Finn Label"),
                                      tmp_path / "v-finn", "Finnegan")
    assert "[Finn Label]" in prompt and "vault written to" in out, (prompt, out)
    names = {m["name"] for m in qjson(owner, "admin", "member", "list", space)["members"]}
    assert {"Dana Label", "Erin E.", "Finnegan"} <= names, names
    assert not names & {"Finn Label", "Erin Label"}, names  # (the owner's: a guess)
