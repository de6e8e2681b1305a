"""Names that are one file on macOS and Windows (docs/decisions.md D139): the hub refuses a
create whose name equals a live entry's ignoring case (``policy_denied``, rule
``name_collision``, naming the other entry and a name that would do), nothing written; and
the replica keeps such a file back before publishing, with the same rule
(tests/replica/engine/test_any_path_inproc.py). The attack: a
member on Linux publishes ``notes/plan`` beside ``Notes/Plan``; every member on a Mac then
holds one file for two entries, and each sync there overwrites one with the other."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kit.wire import WireTeam, delete, make_wire_team, put


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireTeam]:
    yield from make_wire_team(tmp_path_factory.mktemp("hub") / "data", None)


def refused(r: object) -> list[tuple[str, str, str]]:
    assert r.status_code == 403, r.text  # type: ignore[attr-defined]
    err = r.json()["error"]  # type: ignore[attr-defined]
    assert err["code"] == "policy_denied" and err["details"]["reason"] == "name_collision"
    return [(d["id"], d["rule"], d["of"]) for d in err["details"]["denied"]]


def test_a_name_differing_only_in_case_is_refused_and_a_rename_is_not(
        team: WireTeam, monkeypatch: pytest.MonkeyPatch) -> None:
    ed = team.editor
    first = put("Notes/Plan")
    assert ed.publish(team.space, [first]).status_code == 201
    before = ed.head(team.space)
    for other in ("notes/plan", "NOTES/PLAN", "Notes/plan"):
        r = ed.publish(team.space, [put(other)])
        assert refused(r) == [(other, "name_collision", "Notes/Plan")], other
        name = other.rsplit("/", 1)[1]
        assert r.json()["error"]["details"]["denied"][0]["suggested"] == f"Notes/{name} 2"
    assert ed.head(team.space)["digest"] == before["digest"]  # nothing written
    # two new names in one batch: the second (sorted) is refused, the batch with it
    r = ed.publish(team.space, [put("Q/Café"), put("Q/café")])
    assert refused(r) == [("Q/café", "name_collision", "Q/Café")]
    # a rename that changes the case: the old name is deleted in the same batch
    r = ed.publish(team.space, [delete("Notes/Plan", first.entry.version), put("notes/plan")])
    assert r.status_code == 201, r.text
    # without the checks (preparing, and under the lock) the attack lands
    import hub.guard
    import hub.policy

    monkeypatch.setattr(hub.policy, "check_names_txn", lambda *a: None)
    monkeypatch.setattr(hub.guard, "check_names", lambda *a: None)
    assert ed.publish(team.space, [put("NOTES/PLAN")]).status_code == 201


def test_a_name_taken_while_the_batch_was_prepared_is_refused_at_commit(
        team: WireTeam) -> None:
    """``Race/Plan`` lands between the preparation of ``race/plan`` and its committing
    transaction (rebased onto it): only the lookup under the space lock sees it."""
    hooks = team.hub.hooks
    body = team.editor.batch(team.space, [put("race/plan")])
    landed = []

    def other_lands(_batch: object) -> None:
        hooks.after_prepare = None
        landed.append(team.owner.publish(team.space, [put("Race/Plan")]).status_code)

    hooks.after_prepare = other_lands
    try:
        r = team.editor.post(f"/v1/spaces/{team.space}/batches?rebase=1", body)
    finally:
        hooks.after_prepare = None
    assert landed == [201]
    assert refused(r) == [("race/plan", "name_collision", "Race/Plan")]
