"""Links with the real CLI and a real hub process (docs/cli.md, "Links between pages"):
`quire sync` names the links its changes leave dangling, `quire read --backlinks` answers
from the local index (the hub's answer: tests/hub/console/test_console_backlinks.py), and `quire links fix OLD NEW` rewrites the links to a renamed page,
leaving every other byte as it was. With QUIRE_LONG_E2E=1 (the test time budget): the
default tier covers the same in process (test_links_index.py, tests/shared/test_linkfix.py,
tests/hub/console/test_console_backlinks.py)."""

from __future__ import annotations

import os

import pytest

from tests.kit.cli import qjson, quire

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not os.environ.get("QUIRE_LONG_E2E"),
                                                  reason="long variant: QUIRE_LONG_E2E=1")]

PLAN = "---\r\ntitle: Release plan\r\n---\r\nDates.\r\n"
KICKOFF = ("\ufeff---\r\ntitle: Kickoff\r\n---\r\nSee [[release plan|the plan]] and "
           "[p](../Projects/Release%20Plan.md#dates).\r\n")


def test_dangling_backlinks_and_fix(team) -> None:  # type: ignore[no-untyped-def]
    alice = team.member("alice")
    for rel, text in (("Projects/Release Plan.md", PLAN), ("Meeting Notes/Kickoff.md", KICKOFF),
                      ("Home.md", "[[Kickoff]] and [[Nowhere]]\n")):
        (alice.vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (alice.vault / rel).write_bytes(text.encode())
    human = quire(alice.home, "sync", check=False).stdout
    assert "links to nothing in Home: [[Nowhere]]" in human, human
    back = qjson(alice.home, "read", "Projects/Release Plan", "--backlinks")
    assert back["backlinks"] == [{"id": "Meeting Notes/Kickoff", "via": "markdown",
                                  "title": "Kickoff"}]

    # the page is renamed by hand, then the links to it are fixed and published
    (alice.vault / "Archive").mkdir()
    (alice.vault / "Projects/Release Plan.md").rename(alice.vault / "Archive/Launch Plan.md")
    fixed = qjson(alice.home, "links", "fix", "Projects/Release Plan", "Archive/Launch Plan")
    assert fixed["pages"] == [{"id": "Meeting Notes/Kickoff", "links": 2}]
    assert (alice.vault / "Meeting Notes/Kickoff.md").read_bytes() == KICKOFF.replace(
        "[[release plan|", "[[Launch Plan|").replace(
        "../Projects/Release%20Plan.md", "../Archive/Launch%20Plan.md").encode()
    assert alice.sync()["sync"]["dangling"] == []
