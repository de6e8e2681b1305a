"""One replica holding every conflict packet the MCP answer tests read
(tests/replica/mcp/test_mcp_paging.py, test_mcp_small_items.py), built once per test
session through the real CLI and hub (``held_scene``, registered by this folder's
conftest): alice (an editor) holds a packet for each entry of ``SIDES``; bob (an admin)
published first.

- ``META``: 16 KB bodies and three 5,000-character meta fields per side, text that is costly
  to escape (quotes, backslashes, tabs, newlines, CJK);
- ``HUGE``: 300 KB bodies sharing all but their first line (merged: 300 KB too);
- ``GUARD``: a guardrail bob raised to block with a new text while alice lowered it to info
  and edited the same line; ``PAGE``: one line edited on both sides;
- ``CJK`` (a body of 3-byte characters) and ``WIDE`` (64 tags, 256 long links, a 16 KB
  meta): entries, not packets.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.kit.cli import CliMember, CliTeam, FreshHub
from tests.replica.conflicts.conftest import entry
from tests.replica.conflicts.test_e2e import sync

META = "page/meta"
HUGE = "page/huge"
GUARD = "guardrail/no-force-push"
PAGE = "page/deploy"
CJK = "page/cjk"
WIDE = "page/wide"


def body(who: str, size: int) -> str:
    """``size`` characters of text that is costly to escape."""
    line = f'{who}: "quoted" \\ back\tslash, café ✓ 漢字 and words to fill the line\n'
    return (line * (size // len(line) + 1))[:size]


def meta(who: str) -> dict[str, Any]:
    return {f"field{k}": (f'{who} {k} "q"\n' + "m" * 5000)[:5000] for k in range(3)}


def huge(who: str) -> str:
    """300 KB that the three sides share but for their first line: one conflict region."""
    return f"{who} changed the first line\n" + "".join(
        f"line {i}: the runbook says – café ✓ and more words\n" for i in range(5400))


SIDES: dict[str, list[tuple[str, dict[str, Any]]]] = {  # (base, alice's, bob's): (body, meta)
    META: [(body(w, 16_000), meta(w)) for w in ("base", "alice", "bob")],
    HUGE: [(huge(w), {}) for w in ("base", "alice", "bob")],
    GUARD: [("Never force-push main.\n", {"severity": "warn"}),
            ("Avoid force-pushing main.\n", {"severity": "info"}),
            ("Never force-push main or release/*.\n", {"severity": "block"})],
    PAGE: [("step one\n", {}), ("step one (alice)\n", {}), ("step one (bob)\n", {})],
}


@pytest.fixture(scope="session")
def held_scene(hub: FreshHub, owner: Any, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[tuple[CliTeam, CliMember]]:
    team = CliTeam(hub, owner, tmp_path_factory.mktemp("held"), f"held{os.getpid() % 10000}")
    alice, bob = team.member("alice"), team.member("bob", role="admin")
    for eid, sides in SIDES.items():
        alice.write(entry(eid, sides[0][0], meta=sides[0][1]))
    alice.write(entry(CJK, "漢字仮名交じり文。" * 6000))
    alice.write(entry(WIDE, "short", tags=[f"t{i}" for i in range(64)],
                      links=[f"page/{'l' * 150}-{i}" for i in range(256)],
                      meta={"blob": "x" * 16_000}))
    sync(alice)
    sync(bob)
    for eid, sides in SIDES.items():
        bob.write(entry(eid, sides[2][0], meta=sides[2][1]))
    sync(bob)
    for eid, sides in SIDES.items():
        alice.write(entry(eid, sides[1][0], meta=sides[1][1]))
    assert sorted(sync(alice)["sync"]["held"]) == sorted(SIDES)
    yield team, alice
