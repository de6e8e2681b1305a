"""Human output of the real CLI: times people read, aligned tables, colour only on a terminal
and never with NO_COLOR; ``--json`` keeps Unix milliseconds."""

from __future__ import annotations

import os
import re

import pytest

from tests.kit.cli import QUIRE, CliTeam, qjson, quire
from tests.kit.host import REPO, run_on_pty

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ESC = "\x1b["


def on_terminal(home, *args: str, env: dict[str, str] | None = None) -> str:
    """Run quire with stdout on a pseudo-terminal; what it wrote there."""
    e = dict(os.environ, QUIRE_HOME=str(home), TERM="xterm-256color", COLUMNS="160")
    e.pop("NO_COLOR", None)
    e.update(env or {})
    code, out = run_on_pty([*QUIRE, *args], e, cwd=REPO)
    assert code == 0
    return out.decode()


def test_invite_times_read_as_dates_and_lists_are_aligned_tables(team: CliTeam):
    created = qjson(team.owner, "admin", "invite", "create", team.name, "--role", "viewer")
    assert isinstance(created["expires_at"], int)  # --json unchanged: Unix milliseconds
    human = quire(team.owner, "admin", "invite", "create", team.name, "--role",
                  "viewer").stdout
    assert re.search(r"expires in 7 days, \d{4}-\d\d-\d\d \d\d:\d\d UTC", human), human
    assert not re.search(r"\d{13}", human)
    listed = quire(team.owner, "admin", "invite", "list", team.name).stdout.splitlines()
    assert re.match(r"^id\s+for\s+role\s+expires\s+state$", listed[0]), listed  # for: the name
    row = next(ln for ln in listed if ln.startswith(created["id"]))
    assert re.search(r"viewer\s+in 7 days, .* UTC\s+open$", row), row
    assert listed[0].index("role") == row.index("viewer")  # aligned columns
    assert ESC not in "\n".join(listed)  # a pipe: no colour


def test_colour_on_a_terminal_and_never_with_no_color(team: CliTeam):
    team.invite("viewer")
    tty = on_terminal(team.owner, "admin", "invite", "list", team.name)
    assert ESC in tty and "expires" in tty
    plain = on_terminal(team.owner, "admin", "invite", "list", team.name,
                        env={"NO_COLOR": "1"})
    assert ESC not in plain and "expires" in plain
