"""Human output (replica/cli/humanout.py): aligned tables everywhere, colour only on a terminal
and never with NO_COLOR."""

from __future__ import annotations

import io

import pytest

from replica.cli import humanout

ROWS = [["team-memory", "editor", "in 7 days, 2026-12-08 04:00 UTC"], ["x", None, "never"]]
COLS = ["space", "role", "expires"]


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_pipe_gets_plain_aligned_columns_without_colour() -> None:
    out = humanout.table(COLS, ROWS, stream=io.StringIO())
    assert out.splitlines() == [
        "space        role    expires",
        "team-memory  editor  in 7 days, 2026-12-08 04:00 UTC",
        "x                    never",
    ]
    assert "\x1b[" not in out
    assert humanout.table(COLS, [], empty="no spaces", stream=io.StringIO()) == "no spaces"


def test_a_terminal_gets_a_rich_table_in_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    out = humanout.table(COLS, ROWS, stream=Tty())
    assert "\x1b[" in out  # bold header
    plain = humanout.table(COLS, ROWS, stream=io.StringIO())
    for word in ("team-memory", "editor", "in 7 days"):
        assert word in out and word in plain
    assert humanout.state("error", Tty()) != "error"


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"NO_COLOR": ""}, {"TERM": "dumb"}])
def test_no_colour_with_no_color_or_a_dumb_terminal(monkeypatch, env) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    out = humanout.table(COLS, ROWS, stream=Tty())
    assert "\x1b[" not in out and "team-memory" in out
    assert humanout.state("error", Tty()) == "error"
