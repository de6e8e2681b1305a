"""Conflicts for people, on the CLI path (real ``quire`` processes, a real hub): resolving
with ``--take`` or ``--file`` needs no digest copied by hand, publishes at once (or says
exactly what is pending and the command that publishes it), and no human output of
``quire conflicts …`` shows ``None`` (issue 31, item 5)."""

from __future__ import annotations

import pytest

from replica.machine.home import Home
from replica.vault import markdown as md
from tests.kit.host import free_port
from tests.replica.conflicts.conftest import entry
from tests.replica.conflicts.test_e2e import make_scene, packet_for, sync

pytestmark = pytest.mark.e2e


def _human(m, *args: str, code: int = 0) -> str:
    p = m.run(*args, check=False)
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "None" not in p.stdout + p.stderr, p.stdout + p.stderr
    return p.stdout


def test_a_person_resolves_without_a_digest_and_it_publishes_at_once(hub, owner, tmp_path):
    scene = make_scene(hub, owner, tmp_path, ("page/deploy", "page/both", "page/stale"))
    alice, bob = scene.alice, scene.bob
    name = scene.team.name

    listed = _human(alice, "conflicts", "list")
    assert "page/deploy" in listed and "page/both" in listed
    shown = _human(alice, "conflicts", "show", "page/deploy")
    assert "theirs" in shown and "step one (bob)" in shown

    # theirs: the hub's version, so nothing is left to publish; the vault shows theirs
    out = _human(alice, "conflicts", "resolve", "page/deploy", "--take", "theirs")
    assert "took theirs" in out, out
    assert alice.read("page/deploy").body == "step one (bob)\nstep two\n"
    assert packet_for(alice, "page/deploy") is None

    # a merged file, by entry id, no digest: published by this command, no sync after it
    merged = tmp_path / "merged.md"
    merged.write_bytes(md.render(entry("page/both", "merged v3\n")))
    out = _human(alice, "conflicts", "resolve", "page/both", "--file", str(merged))
    assert "published" in out and "pending" not in out, out
    sync(bob)
    assert bob.read("page/both").body == "merged v3\n"

    # the hub cannot be reached now: the resolution is kept, and the output names what is
    # pending and the exact command that publishes it (exit 4, as for any unreachable hub)
    hub_json = Home(alice.home).hubs()[0].dir / "hub.json"
    real = hub_json.read_text()
    hub_json.write_text(real.replace(hub.url, f"http://127.0.0.1:{free_port()}"))
    try:
        out = _human(alice, "conflicts", "resolve", "page/stale", "--take", "ours", code=4)
    finally:
        hub_json.write_text(real)
    assert "pending" in out and f"quire sync --space {name}" in out, out
    assert packet_for(alice, "page/stale") is None
    sync(alice)
    sync(bob)
    assert bob.read("page/stale").body == "alice s2\n"


def test_theirs_is_a_file_next_to_ours_never_published_and_gone_once_resolved(
        hub, owner, tmp_path):
    scene = make_scene(hub, owner, tmp_path, ("page/deploy", "page/both", "page/stale"))
    alice, bob = scene.alice, scene.bob
    copies = {p.relative_to(alice.vault).as_posix().split(".conflict-")[0]: p
              for p in alice.vault.rglob("*.conflict-*.md")}
    assert sorted(copies) == ["page/both", "page/deploy", "page/stale"], copies
    deploy_copy = copies["page/deploy"]
    assert md.read_entry(alice.vault, "page/deploy", deploy_copy.read_bytes())[0].body == \
        "step one (bob)\nstep two\n"  # theirs, in vault form: a parseable entry

    # the copy is never published, and an edit of it neither: nothing pending, the hub and
    # bob never see it
    first = deploy_copy.read_bytes()
    deploy_copy.write_bytes(first + b"a note of mine\n")
    out = sync(alice)
    assert out["sync"]["pushed"] == 0 and out["unpublished"]["entries"] == [], out
    sync(bob)
    assert list(bob.vault.rglob("*.conflict-*")) == []

    # resolved at the CLI: its copy goes
    _human(alice, "conflicts", "resolve", "page/both", "--take", "theirs")
    assert not copies["page/both"].exists()
    # resolved by hand (the quire block removed, as docs/replica.md says): the sync that
    # closes it removes the copy; one a person edited stays (an edit is never lost)
    deploy_copy.write_bytes(first)
    copies["page/stale"].write_bytes(copies["page/stale"].read_bytes() + b"mine\n")
    alice.write(entry("page/deploy", "step one (both)\nstep two\n"))
    alice.write(entry("page/stale", "both s2\n"))
    sync(alice)
    assert packet_for(alice, "page/deploy") is None and packet_for(alice, "page/stale") is None
    assert not deploy_copy.exists()
    assert copies["page/stale"].read_bytes().endswith(b"mine\n")
    sync(bob)
    assert bob.read("page/deploy").body == "step one (both)\nstep two\n"


def test_the_copy_name_is_reserved_and_named_after_the_author():
    from replica.conflicts.siblings import copy_path, who
    from replica.vault.ignore import conflict_copy

    assert conflict_copy("page/deploy.conflict-bob.md")
    assert conflict_copy("skill/a/b.conflict-theirs.md")
    assert not conflict_copy("page/deploy.md") and not conflict_copy("page/.conflict-x.md")
    assert not conflict_copy("page/deploy.conflicting.md")
    people = {"u1": "Bob Smith", "u2": "***"}
    assert who({"user": "u1"}, people) == "bob-smith"
    assert who({"user": "u2"}, people) == who({"user": "u3"}, people) == who(None, people) \
        == "theirs"
    assert copy_path("page/deploy", "bob-smith") == "page/deploy.conflict-bob-smith.md"
