"""A resolution made with the CLI keeps its provenance when it is merged before it goes out
(issue 35): a pull that brings another member's edit of other lines merges the resolved
version cleanly, and the batch that publishes the merge still says which packet it resolves
(``resolved pk-… (merged)``), where it used to go out as a plain edit with no note."""

from __future__ import annotations

from pathlib import Path

from replica.conflicts.desk import Desk
from replica.machine.home import SpaceConfig
from shared.entry import Entry
from tests.kit.inproc import Local, Space

ID = "page/r"


def page(body: str) -> Entry:
    return Entry(id=ID, title="R", body=body)


def config(local: Local, space: Space) -> SpaceConfig:
    return SpaceConfig(space_id=space.id, name=space.name, hub_id="inproc",
                       replica_id=local.engine.replica_id, vault=local.vault, role="editor",
                       dir=local.root / local.name)


def held_on_a(tmp_path: Path, space: Space) -> tuple[Local, Local]:
    a, b = space.replica(tmp_path, "a"), space.replica(tmp_path, "b")
    a.write(page("a0\nb0\nc0\nd0\ne0\n"))
    a.sync()
    b.sync()
    b.write(page("a by B\nb0\nc0\nd0\ne0\n"))
    b.sync()
    a.write(page("a by A\nb0\nc0\nd0\ne0\n"))
    a.sync()
    assert ID in a.held()
    return a, b


def resolve_with_the_cli(a: Local, space: Space) -> str:
    with Desk(config(a, space)) as desk:
        pkt = desk.list_packets()[0]
        desk.resolve(pkt["packet_id"], digest=pkt["digest"], how="ours", agent="fixer")
        return str(pkt["packet_id"])


def test_a_cli_resolution_merged_with_a_later_pull_keeps_its_attribution(
        tmp_path: Path, space: Space) -> None:
    a, b = held_on_a(tmp_path, space)
    try:
        pid = resolve_with_the_cli(a, space)
        b.write(page("a by B\nb0\nc0\nd0\ne by B\n"))  # other lines: merges cleanly
        b.sync()
        report = a.sync()
        assert ID in report.merged and not a.held()
        batch = space.batches(a)[-1]
        assert [op["entry"]["body"] for op in batch["ops"]] == ["a by A\nb0\nc0\nd0\ne by B\n"]
        assert batch["provenance"]["note"] == f"resolved {pid} (merged)"
        assert batch["provenance"]["tool"] == "quire conflict resolve"
    finally:
        a.close()
        b.close()


def test_a_cli_resolution_published_as_it_was_says_so_without_merged(
        tmp_path: Path, space: Space) -> None:
    a, b = held_on_a(tmp_path, space)
    try:
        pid = resolve_with_the_cli(a, space)
        a.sync()
        assert space.batches(a)[-1]["provenance"]["note"] == f"resolved {pid}"
    finally:
        a.close()
        b.close()


def test_an_edit_after_the_resolution_is_not_the_resolvers(
        tmp_path: Path, space: Space) -> None:
    a, b = held_on_a(tmp_path, space)
    try:
        resolve_with_the_cli(a, space)
        a.write(page("a by A, edited again\nb0\nc0\nd0\ne0\n"))  # the person's own edit
        a.sync()
        assert "note" not in (space.batches(a)[-1].get("provenance") or {})
    finally:
        a.close()
        b.close()
