"""A claim token is never read as an option (issue 35): one in 64 ``token_urlsafe`` tokens
starts with ``-``, and ``--claim -x…`` made argparse stop with "expected one argument"."""

from __future__ import annotations

import itertools

import pytest

from replica.cli.main import _parser, glue_tokens
from replica.conflicts import desk

DASHED = "-" + "a" * 31  # the shape of an older token that starts with '-'


def test_a_minted_claim_token_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    drawn = itertools.chain([DASHED, "-b" + "c" * 30], itertools.repeat("x" * 32))
    monkeypatch.setattr(desk.secrets, "token_urlsafe", lambda _n: next(drawn))
    assert desk.new_claim_token() == "x" * 32
    monkeypatch.undo()
    assert not any(desk.new_claim_token().startswith("-") for _ in range(500))  # the real draw


@pytest.mark.parametrize("argv", [
    ["conflicts", "renew", "pk-1", "--claim", DASHED],
    ["conflicts", "renew", "pk-1", f"--claim={DASHED}"],
    ["conflicts", "release", "pk-1", "--claim", DASHED, "--json"],
    ["conflicts", "resolve", "pk-1", "--digest", "d", "--claim", DASHED, "--take", "ours"],
])
def test_an_older_token_starting_with_a_dash_is_taken_in_either_form(argv: list[str]) -> None:
    args = _parser().parse_args(glue_tokens(argv))
    assert args.claim == DASHED


def test_only_a_token_after_claim_is_joined() -> None:
    # an option after --claim (a forgotten token) is left for argparse to refuse
    assert glue_tokens(["conflicts", "renew", "pk-1", "--claim", "--json"]) == [
        "conflicts", "renew", "pk-1", "--claim", "--json"]
    assert glue_tokens(["x", DASHED]) == ["x", DASHED]
