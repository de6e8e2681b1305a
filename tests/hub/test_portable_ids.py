"""Entry ids that cannot be files on Windows or macOS are refused for new entries, by the hub
(``invalid_request``, reason ``non_portable_id``) and by the replica before publishing
(kept locally, reported as ``policy_denied``); entries that already hold such an id keep
working (update, delete). Attack (issue 17): ``page/con``, ``page/nul``, ``page/aux``,
``page/com1``, ``page/lpt1.x`` and ``guardrail/x.`` were accepted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.ids import is_entry_id, portability_problem
from tests.e2e.test_revocation_e2e import hub, q  # noqa: F401 (fixture)
from tests.kit.hubproc import HubProcess
from tests.kit.wire import WireTeam, delete, make_wire_team, put

# valid syntax, not portable: refused as new entries
NON_PORTABLE = [
    "page/con", "page/prn", "page/aux", "page/nul", "page/com0", "page/com1", "page/com9",
    "page/lpt1", "page/lpt9", "page/lpt1.x", "page/con.txt", "page/nul.tar.gz",
    "page/aux.b.c", "page/dir/con", "page/con/inside", "page/prn/a/b", "con/x", "com1/note",
    "lpt3/x", "guardrail/x.", "page/a./b", "page/x..", "skill/deep/nul.x",
    # any path is an entry (D132): Windows' names in any case, its forbidden characters,
    # trailing spaces, a file name over 255 bytes
    "page/Con", "Notes/NUL.txt", "Notes/Lpt1", "Notes/a:b", "Notes/what?", "Notes/x ",
    "Notes/" + "é" * 127,
]
# portable look-alikes: accepted
PORTABLE = ["page/console", "page/conx", "page/com10", "page/lpt", "page/icon",
            "page/a.con", "page/x.y", "page/nul-thing", "page/auxiliary", "page/com1x"]
# names people keep (D132): valid and portable; two of them differing only in case are a
# collision (tests/hub/test_name_collisions.py), each alone is not
CASE = ["page/Foo", "page/readme/A", "Meeting Notes/Release Plan", "café-notes", "README"]


def test_windows_reserved_names_and_trailing_dots_are_flagged_and_look_alikes_are_not() -> None:
    assert len(NON_PORTABLE) >= 20
    for eid in NON_PORTABLE:
        assert is_entry_id(eid), eid  # the syntax alone let these through
        assert portability_problem(eid), eid
    for eid in PORTABLE:
        assert is_entry_id(eid) and portability_problem(eid) is None, eid
    for eid in CASE:
        assert is_entry_id(eid) and portability_problem(eid) is None, eid


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireTeam]:
    yield from make_wire_team(tmp_path_factory.mktemp("hub") / "data", None)


def test_hub_refuses_each_non_portable_new_id(team: WireTeam) -> None:
    ed = team.editor
    for eid in NON_PORTABLE:
        before = ed.head(team.space)
        r = ed.publish(team.space, [put(eid)])
        assert r.status_code == 422, (eid, r.text)
        err = r.json()["error"]
        assert err["code"] == "invalid_request" and err["details"]["reason"] == \
            "non_portable_id", (eid, r.text)
        assert err["details"]["ops"][0]["id"] == eid
        assert ed.head(team.space)["digest"] == before["digest"]  # nothing moved
    for eid in PORTABLE:
        assert ed.publish(team.space, [put(eid)]).status_code == 201, eid


def test_hub_keeps_existing_non_portable_entries_working(
        team: WireTeam, monkeypatch: pytest.MonkeyPatch) -> None:
    """An id accepted before the rule (the check switched off to make one) can still be
    updated and deleted, and a re-create after the delete is refused."""
    import hub.guard

    ed = team.editor
    monkeypatch.setattr(hub.guard, "check_portable", lambda ops, current: None)
    v1 = put("page/legacy/aux", "v1\n")
    r = ed.publish(team.space, [v1])
    assert r.status_code == 201, r.text
    monkeypatch.undo()
    v2 = put("page/legacy/aux", "v2\n", base=v1.entry.version)
    r = ed.publish(team.space, [v2])
    assert r.status_code == 201, r.text
    r = ed.publish(team.space, [delete("page/legacy/aux", v2.entry.version)])
    assert r.status_code == 201, r.text
    r = ed.publish(team.space, [put("page/legacy/aux", "again\n")])
    assert r.status_code == 422 and "non_portable_id" in r.text, r.text


def test_replica_keeps_non_portable_ids_local_and_publishes_the_rest(
        hub: HubProcess, tmp_path: Path) -> None:  # noqa: F811
    """The real CLI against ``quire hub serve``: one sync; every non-portable id is reported
    and kept, never sent (the hub sees one batch with the portable pages only)."""
    owner = tmp_path / "owner"
    vault = tmp_path / "vault"
    q(owner, "join", hub.url, "--invite", hub.enrollment, "--device", "owner")  # type: ignore[attr-defined]
    q(owner, "admin", "space", "create", "team")
    code = q(owner, "admin", "invite", "create", "team", "--role", "editor")["code"]
    ann = tmp_path / "ann"
    q(ann, "join", hub.url, "--invite", code, "--vault", str(vault), "--device", "ann")
    made = set()
    for eid in NON_PORTABLE + PORTABLE + CASE:
        *folders, name = eid.split("/")
        p = vault.joinpath(*folders, name + ".md")
        if len(name.encode()) > 252 or p.exists() or (  # longer than Linux allows
                p.parent.exists() and not p.parent.is_dir()):
            continue
        made.add(eid)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"---\ntitle: t\n---\n{eid}\n")
    res = q(ann, "sync")["sync"]
    denied = {d["id"]: d for d in res["policy_denied"]}
    want = set(NON_PORTABLE) & made
    assert set(denied) == want, sorted(set(denied) ^ want)
    assert all(d["rule"] == "portable_id" for d in denied.values())
    assert res["pushed"] == len(PORTABLE) + len(CASE), res
    problems = {p["path"] for p in res["problems"]}
    assert not {"page/Foo.md", "page/readme/A.md", "README.md"} & problems, \
        problems
    again = q(ann, "sync")["sync"]  # still kept back, nothing sent
    assert again["pushed"] == 0 and len(again["policy_denied"]) == len(want)
