"""The exit-code scheme (replica/cli/exitcodes.py) as a table, and its documentation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from replica.cli import exitcodes as ec

DOC = Path(__file__).resolve().parents[3] / "docs" / "cli.md"


@pytest.mark.parametrize(("code", "expected"), [
    ("usage", ec.USAGE),
    ("transfer_failed", ec.UNREACHABLE),
    ("unavailable", ec.UNREACHABLE),
    ("rate_limited", ec.UNREACHABLE),
    ("unauthorized", ec.REFUSED),
    ("forbidden", ec.REFUSED),
    ("not_found", ec.REFUSED),
    ("hub_unverified", ec.UNVERIFIED),
    ("local_error", ec.ERROR),
    ("lock_held", ec.ERROR),
    ("invalid_request", ec.ERROR),
    (None, ec.ERROR),
])
def test_error_codes_map_to_stable_exit_codes(code: str | None, expected: int) -> None:
    assert ec.for_error_code(code) == expected


def test_a_missing_page_is_an_error_and_a_refusal_stays_a_refusal() -> None:
    """A page the vault or the hub does not have exits 1; every other ``not_found`` (a
    revoked replica, a space the member left) still exits 5."""
    assert ec.for_error_code("not_found", {"where": "local"}) == ec.ERROR
    assert ec.for_error_code("not_found", {"reason": "no_entry"}) == ec.ERROR
    assert ec.for_error_code("not_found", {"reason": "replica_revoked"}) == ec.REFUSED
    assert ec.for_error_code("not_found", {}) == ec.REFUSED


@pytest.mark.parametrize(("doc", "expected"), [
    ({"state": "ok", "conflicts": [], "problems": [], "policy_denied": []}, ec.OK),
    ({"state": "ok", "policy_denied": [{"id": "page/a"}]}, ec.ATTENTION),
    ({"state": "ok", "sync": {"held": ["page/a"]}}, ec.ATTENTION),
    ({"state": "conflicts"}, ec.ATTENTION),
    ({"state": "problems"}, ec.ATTENTION),
    ({"state": "pending"}, ec.ATTENTION),
    ({"state": "never_synced"}, ec.ATTENTION),
    ({"state": "suspended", "last_error": {"code": "forbidden"}}, ec.REFUSED),
    ({"state": "error", "last_error": {"code": "transfer_failed"}}, ec.UNREACHABLE),
    ({"state": "error", "last_error": {"code": "hub_unverified"}}, ec.UNVERIFIED),
    ({"state": "error", "last_error": {"code": "local_error"}}, ec.ERROR),
])
def test_status_states_map_to_the_same_scheme(doc: dict, expected: int) -> None:
    assert ec.for_status(doc) == expected


def test_every_exit_code_is_documented_with_its_name() -> None:
    rows = dict(re.findall(r"^\| (\d) \| (\w+) \|", DOC.read_text(), re.M))
    assert rows == {str(code): name for code, name, _ in ec.describe()}
