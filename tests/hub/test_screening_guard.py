"""The guard's screening and the allow endpoint on the real hub app, in-process, on SQLite
and PostgreSQL (docs/security.md, Screening): a secret is refused with ``content_screened``
before anything is written; only admins allow, with checked input, once per entry version
and rule; an allowed version publishes, another version with the same secret does not.
The same through a real hub process and the CLI: tests/hub/test_screening_e2e.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.wire import WireTeam, make_wire_team, put

AWS = "AKIA" + "Z3MSJV4WW7BZYXQP"  # assembled: no literal key in the repository


@pytest.fixture
def team(tmp_path: Path, db_url: str | None) -> Iterator[WireTeam]:
    yield from make_wire_team(tmp_path / "data", db_url)


def _screened(r: Any) -> list[dict[str, Any]]:
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "content_screened", r.text
    assert AWS not in r.text
    return err["details"]["findings"]


def test_secret_refused_allowed_once_by_an_admin(team: WireTeam) -> None:
    t, ed = team, team.editor
    op = put("page/ci", f"aws_access_key_id = {AWS}\n")
    before = ed.head(t.space)
    (f,) = _screened(ed.publish(t.space, [put("page/ok"), op]))
    assert (f["entry"], f["version"], f["rule"]) == ("page/ci", op.entry.version,
                                                     "aws_access_key")
    assert ed.head(t.space)["digest"] == before["digest"]  # nothing written

    path = f"/v1/spaces/{t.space}/screening/allows"
    body = {"entry": "page/ci", "version": op.entry.version, "rule": f["fingerprint"]}
    r = ed.post(path, body)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", r.text
    for bad in ({"entry": "page/ci", "version": "abc"},
                {"entry": "page/../ci", "version": op.entry.version},
                {"entry": "page/ci", "version": op.entry.version, "rule": "Bad Rule!"},
                dict(body, extra=1)):
        r = t.owner.post(path, bad)
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", bad
    assert ed.get(path).json()["allows"] == []
    r = t.owner.post(path, body)
    assert r.status_code == 201 and r.json()["created"] is True, r.text
    again = t.owner.post(path, body).json()
    assert again["created"] is False and again["allow"]["id"] == r.json()["allow"]["id"]
    listed = ed.get(path, params={"entry": "page/ci"}).json()["allows"]
    assert [(a["entry"], a["version"], a["rule"]) for a in listed] == [
        ("page/ci", op.entry.version, f["fingerprint"])]

    assert ed.publish(t.space, [op]).status_code == 201  # that version, allowed
    newer = put("page/ci", f"aws_access_key_id = {AWS}\nrotate it\n",
                    base=op.entry.version)
    (g,) = _screened(ed.publish(t.space, [newer]))  # another version: screened again
    assert g["version"] == newer.entry.version and g["fingerprint"] == f["fingerprint"]
    assert t.viewer.get(path).status_code == 200  # members read allows


def test_a_secret_in_a_batchs_provenance_is_refused(team: WireTeam) -> None:
    """A provenance field is free text signed with the batch and kept in the space's history
    (``quire log``, the audit): a key written there is refused like one in a page. (On
    0506cf5 the batch was accepted and the key stored.)"""
    from shared.ids import new_id
    from shared.wire import build_batch

    t, ed = team, team.editor
    key = "sk-ant-api03-" + "Zq8Lw2Nx7Vb1Ty6Kp3Hs9Dm5Fg0JcR4tY7uI1oP3aS5dF8gH2jK4lZ6xC9vB" \
        "0nM3qW5eR7tY9uI2oP4aS6dF8gH1jK3lZ5xC7vB9nM2qW4eAA"
    h = ed.head(t.space)
    b = build_batch(ed.key, batch_id=new_id(), replica_id=ed.replica(t.space),
                    space=h["space"], epoch=h["epoch"], parent_seq=h["seq"],
                    parent_digest=h["digest"], ops=[put("page/eval")],
                    provenance={"tool": "eval", "note": f"ran with {key}"})
    r = ed.post(f"/v1/spaces/{t.space}/batches", b.to_wire())
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "content_screened" and key not in r.text
    assert [(f["entry"], f["rule"]) for f in err["details"]["findings"]] == [
        ("provenance.note", "anthropic_key")]
    assert ed.head(t.space)["digest"] == h["digest"]  # nothing written
