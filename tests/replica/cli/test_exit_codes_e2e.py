"""Exit codes of ``quire sync`` and ``quire status --strict``, as documented (docs/cli.md,
"Exit codes"; replica/cli/exitcodes.py), for each situation a script or an agent loop must tell
apart. Real hub processes, the real CLI; what is held or refused is listed in the output."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from replica.cli import exitcodes as ec
from replica.machine.home import Home
from shared.entry import Entry
from tests.kit.cli import CliMember, CliTeam, init_and_serve_hub, qjson, quire

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LINES = "one\ntwo\nthree\n"


@dataclass
class Case:
    member: CliMember
    shows: str  # what the human output of sync must say
    after: Callable[[], None] = lambda: None


def clean(team: CliTeam, tmp: Path) -> Case:
    a = team.member("clean")
    a.write(Entry(id="page/fine", title="Fine", body=LINES))
    return Case(a, "pushed 1 change(s)")


def held_conflict(team: CliTeam, tmp: Path) -> Case:
    a, b = team.members("held-a", "held-b")
    a.write(Entry(id="page/both", title="Both", body=LINES))
    a.sync()
    b.sync()
    a.write(Entry(id="page/both", title="Both", body=LINES.replace("two", "two (a)")))
    a.sync()
    b.write(Entry(id="page/both", title="Both", body=LINES.replace("two", "two (b)")))
    return Case(b, "held in conflict: page/both")


def policy_denied(team: CliTeam, tmp: Path) -> Case:
    a = team.member("denied")
    a.write(Entry(id="page/locked", title="Locked", body=LINES))
    a.sync()
    quire(team.owner, "admin", "rules", "add", team.space["id"], "--deny", "update", "--who",
          "editor", "--entries", "page/locked")
    a.write(Entry(id="page/locked", title="Locked", body=LINES + "four\n"))
    return Case(a, "policy_denied")


def unparsable_file(team: CliTeam, tmp: Path) -> Case:
    a = team.member("unparsable")
    path = a.path("guardrail/no-force-push")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("---\ntitle: No force push\nmeta:\n  severity: high\n---\nNever.\n")
    return Case(a, "not published: guardrail/no-force-push.md:4: meta.severity must be one "
                   "of info, warn, block")


def hub_down(team: CliTeam, tmp: Path) -> Case:
    own = init_and_serve_hub(tmp / "hub")
    owner = tmp / "owner"
    qjson(owner, "join", own.url, "--invite", own.enrollment_code, "--device", "o")
    qjson(owner, "admin", "space", "create", "down")
    code = qjson(owner, "admin", "invite", "create", "down", "--role", "editor")["code"]
    home = tmp / "m"
    qjson(home, "join", own.url, "--invite", code, "--vault", str(tmp / "v"))
    own.proc.terminate()
    own.proc.wait(10)
    m = CliMember(team, "down", home, tmp / "v")
    m.write(Entry(id="page/offline", title="Offline", body=LINES))
    return Case(m, "transfer_failed")


def revoked_device(team: CliTeam, tmp: Path) -> Case:
    a = team.member("revoked")
    device = Home(a.home).hubs()[0].device_id
    quire(team.owner, "admin", "devices", "revoke", device)
    a.write(Entry(id="page/after", title="After", body=LINES))
    return Case(a, "unauthorized")


def vault_moved(team: CliTeam, tmp: Path) -> Case:
    a = team.member("moved")
    a.write(Entry(id="page/kept", title="Kept", body=LINES))
    a.sync()
    a.vault.rename(tmp / "elsewhere")  # moved, or its disk not mounted: never "all deleted"

    def kept() -> None:
        assert not a.vault.exists()
        doc = qjson(a.home, "status")  # says so itself, and lists no page as deleted
        assert doc["state"] == "error" and doc["vault_missing"]["recorded"] == 1, doc
        assert doc["unpublished"]["count"] == 0 and doc["scanned"] is False, doc
        with a.client() as c:  # the page is still the space's
            assert "page/kept" in {e.id for e, _ in list(c.snapshot(team.space["id"]))[1:]}

    return Case(a, "vault_missing", kept)


TABLE = [
    (clean, ec.OK, ec.OK),
    (held_conflict, ec.ATTENTION, ec.ATTENTION),
    (policy_denied, ec.ATTENTION, ec.ATTENTION),
    (unparsable_file, ec.ATTENTION, ec.ATTENTION),
    (hub_down, ec.UNREACHABLE, ec.UNREACHABLE),
    (revoked_device, ec.REFUSED, ec.REFUSED),
    (vault_moved, ec.ERROR, ec.ERROR),
]


@pytest.mark.parametrize(("setup", "sync_code", "strict_code"), TABLE,
                         ids=[t[0].__name__ for t in TABLE])
def test_exit_codes_of_sync_and_strict_status(team: CliTeam, tmp_path: Path, setup, sync_code,
                                              strict_code):
    case = setup(team, tmp_path)
    human = quire(case.member.home, "sync", check=False)
    assert human.returncode == sync_code, (human.stdout, human.stderr)
    assert case.shows in human.stdout + human.stderr, (human.stdout, human.stderr)
    again = quire(case.member.home, "sync", "--json", check=False)  # --json: same code
    assert again.returncode == sync_code
    doc = json.loads(again.stdout)
    assert ("error" in doc) == (sync_code in (ec.ERROR, ec.UNREACHABLE, ec.REFUSED))
    strict = quire(case.member.home, "status", "--strict", check=False)
    assert strict.returncode == strict_code, strict.stdout
    assert quire(case.member.home, "status", check=False).returncode == ec.OK
    case.after()
