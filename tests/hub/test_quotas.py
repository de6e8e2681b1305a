"""Quotas per space and per hub: a publication that would grow a measure past its limit is
refused (``quota_exceeded`` with the numbers) before anything is written; usage is counted
in the publishing transaction and shown by ``GET …/usage`` and the head.

Attack (issue 17): there were no quotas; one member could fill a space or the hub's disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.canonical import canonical_str
from tests.e2e.test_revocation_e2e import hub, q, write_page  # noqa: F401 (fixture)
from tests.kit.hubproc import HubProcess
from tests.kit.wire import WireTeam, delete, make_wire_team, ndjson, put, redeem


@pytest.fixture
def team(tmp_path: Path, db_url: str | None) -> Iterator[WireTeam]:
    yield from make_wire_team(tmp_path / "data", db_url)


def _usage(t: WireTeam) -> dict[str, Any]:
    r = t.editor.get(f"/v1/spaces/{t.space}/usage")
    assert r.status_code == 200, r.text
    return r.json()


def _refused(r: Any, quota: str) -> dict[str, Any]:
    assert r.status_code == 413, r.text
    err = r.json()["error"]
    assert err["code"] == "quota_exceeded" and err["details"]["quota"] == quota, r.text
    return err["details"]


def test_space_at_its_entry_quota_refuses_a_create_and_accepts_an_update(team: WireTeam) -> None:
    t, ed = team, team.editor
    r = t.owner.post(f"/v1/spaces/{t.space}/quota", {"max_entries": 3})
    assert r.status_code == 200 and r.json()["quota"]["entries"] == 3, r.text
    ops = [put(f"page/p{i}", "v1\n") for i in range(3)]
    assert ed.publish(t.space, ops).status_code == 201
    before = ed.head(t.space)
    d = _refused(ed.publish(t.space, [put("page/p3")]), "entries")
    assert (d["scope"], d["limit"], d["usage"], d["after"]) == ("space", 3, 3, 4)
    assert ed.head(t.space)["digest"] == before["digest"]  # nothing written
    assert _usage(t)["entries"] == 3
    upd = put("page/p0", "v2, longer\n", base=ops[0].entry.version)
    assert ed.publish(t.space, [upd]).status_code == 201  # an update at the quota
    assert ed.publish(t.space, [delete("page/p1", ops[1].entry.version)]).status_code == 201
    assert ed.publish(t.space, [put("page/p3")]).status_code == 201  # room again
    u = _usage(t)
    assert u["entries"] == 3
    snap = [x for x in ndjson(ed.get(f"/v1/spaces/{t.space}/snapshot").text) if "entry" in x]
    assert len(snap) == 3
    assert u["bytes"] == sum(len(canonical_str(x["entry"]).encode()) for x in snap)
    assert ed.head(t.space)["usage"]["entries"] == 3  # the head carries it (unsigned)


def test_bytes_and_history_quotas(team: WireTeam) -> None:
    t, ed = team, team.editor
    assert ed.publish(t.space, [put("page/a", "x" * 1000)]).status_code == 201
    u = _usage(t)
    r = t.owner.post(f"/v1/spaces/{t.space}/quota", {"max_bytes": u["bytes"] + 100})
    assert r.status_code == 200, r.text
    d = _refused(ed.publish(t.space, [put("page/b", "y" * 500)]), "bytes")
    assert d["usage"] == u["bytes"] and d["after"] > d["limit"]
    assert ed.publish(t.space, [put("page/c", "z")]).status_code == 201  # small fits
    r = t.owner.post(f"/v1/spaces/{t.space}/quota",
                     {"max_bytes": None, "max_history_bytes": _usage(t)["history_bytes"] + 10})
    assert r.status_code == 200 and r.json()["own_quota"]["bytes"] is None, r.text
    before = ed.head(t.space)
    _refused(ed.publish(t.space, [put("page/d")]), "history_bytes")
    assert ed.head(t.space)["digest"] == before["digest"]


def test_only_admins_set_quotas_and_values_are_checked(team: WireTeam) -> None:
    t = team
    r = t.editor.post(f"/v1/spaces/{t.space}/quota", {"max_entries": 10**6})
    assert r.status_code == 403, r.text
    for bad in ({"max_entries": -1}, {"max_entries": "9"}, {"max_entries": True}, {}):
        r = t.owner.post(f"/v1/spaces/{t.space}/quota", bad)
        assert r.status_code == 422, (bad, r.text)
    r = t.owner.post(f"/v1/spaces/{t.space}/quota", {"colour": 1})
    assert r.status_code == 422
    r = t.owner.post(f"/v1/spaces/{t.space}/quota", {"max_entries": 7})
    assert r.status_code == 200
    events = ndjson(t.owner.get(f"/v1/audit?space={t.space}").text)
    assert [e["details"]["max_entries"] for e in events if e.get("action") == "quota.set"
            ] == [7]  # audited; the refused attempts changed nothing


def test_hub_quota_from_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUIRE_HUB_HUB_MAX_BYTES", "6000")
    for t in make_wire_team(tmp_path / "data", None):
        ed = t.editor
        assert ed.publish(t.space, [put("page/a", "x" * 1000)]).status_code == 201
        other = t.owner.create_space("other")
        ann = redeem(t.client, t.owner.invite(other, "editor"), "ann")
        d = _refused(ann.publish(other, [put("page/b", "y" * 5000)]), "bytes")
        assert d["scope"] == "hub" and d["limit"] == 6000
        assert ann.publish(other, [put("page/b", "small")]).status_code == 201


def test_cli_sets_and_shows_quotas_and_status_shows_usage(
        hub: HubProcess, tmp_path: Path) -> None:  # noqa: F811
    """The real CLI against ``quire hub serve``: admin space quota/show, status usage, and a
    sync over the quota reported as quota_exceeded with local edits kept."""
    owner, ann, vault = tmp_path / "owner", tmp_path / "ann", tmp_path / "vault"
    q(owner, "join", hub.url, "--invite", hub.enrollment, "--device", "owner")  # type: ignore[attr-defined]
    q(owner, "admin", "space", "create", "team")
    res = q(owner, "admin", "space", "quota", "team", "--entries", "2")
    assert res["quota"]["entries"] == 2 and res["own_quota"]["entries"] == 2, res
    code = q(owner, "admin", "invite", "create", "team", "--role", "editor")["code"]
    q(ann, "join", hub.url, "--invite", code, "--vault", str(vault), "--device", "ann")
    write_page(vault, "one", "1")
    write_page(vault, "two", "2")
    assert q(ann, "sync")["sync"]["pushed"] == 2
    q(ann, "sync")  # the head this sync reads carries the usage after the push
    usage = q(ann, "status")["usage"]
    assert (usage["entries"], usage["quota"]["entries"]) == (2, 2), usage
    write_page(vault, "three", "3")
    write_page(vault, "one", "1, edited")
    res = q(ann, "sync", check=False)  # exit 3: the new page is held back, not the edit
    assert res["sync"]["pushed"] == 1, res
    [held] = res["sync"]["policy_denied"]
    assert (held["id"], held["rule"]) == ("page/three", "quota:entries"), held
    assert "quota" in held["message"] and "quire admin space quota" in held["message"]
    assert (vault / "page" / "three.md").exists()  # kept locally
    shown = q(owner, "admin", "space", "show", "team")
    assert (shown["entries"], shown["quota"]["entries"]) == (2, 2), shown
    res = q(owner, "admin", "space", "quota", "team", "--entries", "-1")  # the hub's again
    assert res["own_quota"]["entries"] is None and res["quota"]["entries"] == 1_000_000
    assert q(ann, "sync")["sync"]["pushed"] == 1
