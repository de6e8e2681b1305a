"""A rename on one machine while another edits the old name (docs/replica.md "Renames",
docs/decisions.md D144), with a real hub process and two members through the real CLI:
both vaults end with one file, at the new name, carrying the edit; the old name is not
resurrected and nothing is held; ``quire read --remote --history`` of the new name shows
both names. Before, the second sync held an edit/delete conflict on the old name and the
history of the new name began at the rename."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.entry import Entry
from tests.kit.cli import CliTeam, FreshHub

pytestmark = [pytest.mark.e2e]

OLD, NEW = "Meeting Notes/Release Plan", "Archive/Release Plan"
BODY = "goals\nscope\ndates\n"


def test_a_rename_and_an_edit_of_the_old_name_converge_on_the_new_name(
        hub: FreshHub, owner: Path, tmp_path: Path) -> None:
    team = CliTeam(hub, owner, tmp_path, "rn-" + tmp_path.name[-6:].lower().replace("_", "-"))
    ann, bob = team.members("ann", "bob")
    ann.write(Entry(id=OLD, title="Release plan", body=BODY))
    ann.write(Entry(id="Index", title="Index", body=f"see [[{OLD}]]\n"))
    ann.sync()
    bob.sync()
    # at once: ann moves the file, bob edits it under its old name
    ann.path(NEW).parent.mkdir(parents=True)
    ann.path(OLD).rename(ann.path(NEW))
    bob.write(Entry(id=OLD, title="Release plan", body=BODY.replace("dates", "dates: May 4")))
    out = ann.run("sync").stdout  # what a person reads: the link left behind, and the fix
    assert f"links to nothing in Index: [[{OLD}]]" in out, out
    assert f"renamed {OLD} to {NEW}: quire links fix '{OLD}' '{NEW}'" in out, out
    doc = bob.sync()["sync"]
    assert not doc["held"], doc
    ann.sync()
    want = {f"{NEW}.md": ann.path(NEW).read_bytes(), "Index.md": ann.path("Index").read_bytes()}
    assert ann.files() == bob.files() == want
    assert ann.read(NEW).body == "goals\nscope\ndates: May 4\n"  # type: ignore[union-attr]
    with ann.client() as c:  # the answer as the hub gives it (in-process: one CLI start less)
        hist = c.admin_get(f"/v1/spaces/{team.space['id']}/history", {"id": NEW})
    assert [(v["id"], v.get("from")) for v in hist["versions"]] == [
        (NEW, None), (NEW, OLD), (OLD, None)]
    # what a person reads: the version that renamed it, then the old name's
    lines = ann.run("read", NEW, "--remote", "--history").stdout.splitlines()[1:]
    assert len(lines) == 3 and "renamed" not in lines[0] and " as " not in lines[0], lines
    assert lines[1].endswith(f"renamed from {OLD}") and lines[2].endswith(f"as {OLD}"), lines
