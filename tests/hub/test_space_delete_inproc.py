"""Space delete, restore and the retention purge on the real hub app, in-process, on SQLite
and PostgreSQL (hub/space_delete.py): the refusal carries a statement the hub key signed;
a second delete and a restore of a live space are clear errors that change nothing; the
purge removes every row that names the space (PostgreSQL checks the foreign keys, so the
order of the deletes is tested here). The CLI and replicas: tests/replica/
test_space_delete_e2e.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from hub.space_delete import purge_expired
from hub.store.space_delete_sql import reflected
from shared.signed import parse_deletion_statement
from tests.kit.wire import WireTeam, make_wire_team, put


@pytest.fixture
def team(tmp_path: Path, db_url: str | None) -> Iterator[WireTeam]:
    yield from make_wire_team(tmp_path / "data", db_url)


def _rows_naming(t: WireTeam, space_id: str) -> dict[str, int]:
    with t.hub.store.read() as conn:
        md = reflected(conn)
        out = {tb.name: conn.execute(select(func.count()).select_from(tb).where(
            tb.c.space_id == space_id)).scalar_one()
            for tb in md.sorted_tables if "space_id" in tb.c}
        out["audit"] = conn.execute(select(func.count()).select_from(md.tables["audit"])
                                    .where(md.tables["audit"].c.chain == space_id)).scalar_one()
        out["spaces"] = conn.execute(select(func.count()).select_from(md.tables["spaces"])
                                     .where(md.tables["spaces"].c.id == space_id)).scalar_one()
    return {k: v for k, v in out.items() if v}


def test_delete_refuses_restore_brings_back_and_purge_removes_every_row(team: WireTeam) -> None:
    t, ed = team, team.editor
    assert ed.publish(t.space, [put("page/a", "kept\n")]).status_code == 201
    head = ed.head(t.space)
    base = f"/v1/spaces/{t.space}"
    assert ed.post(f"{base}/delete", {}).status_code == 403  # space members: not owners
    r = t.owner.post(f"{base}/delete", {"dry_run": True})
    assert r.status_code == 200 and r.json()["impact"]["entries"] == 1, r.text
    assert ed.head(t.space)["digest"] == head["digest"]  # the preview changed nothing
    pending = ed.batch(t.space, [put("page/b")])  # made on the live head
    assert t.owner.post(f"{base}/delete", {}).status_code == 200

    r = ed.post(f"{base}/batches", pending)
    assert r.status_code == 410 and r.json()["error"]["code"] == "space_deleted", r.text
    r = ed.get(f"{base}/head")
    err = r.json()["error"]
    assert r.status_code == 410 and err["code"] == "space_deleted"
    st = parse_deletion_statement(t.hub.key.public, err["details"]["statement"],
                                  space=t.space)
    assert st.purge_after == st.deleted_at + 30 * 24 * 3600 * 1000
    r = t.owner.post(f"{base}/delete", {})
    assert r.status_code == 422 and r.json()["error"]["details"]["reason"] == "already_deleted"

    assert t.owner.post(f"{base}/restore", {}).status_code == 200
    assert ed.head(t.space)["digest"] == head["digest"]  # back, unchanged
    r = t.owner.post(f"{base}/restore", {})
    assert r.status_code == 422 and r.json()["error"]["details"]["reason"] == "not_deleted"
    assert ed.publish(t.space, [put("page/b")]).status_code == 201

    assert purge_expired(t.hub.store, t.hub.now(), 0) == []  # not deleted: kept
    assert t.owner.post(f"{base}/delete", {}).status_code == 200
    assert purge_expired(t.hub.store, t.hub.now(), 30) == []  # within the retention
    assert _rows_naming(t, t.space)
    (done,) = purge_expired(t.hub.store, t.hub.now(), 0)
    assert done["space"] == t.space and done["rows"] > 0
    assert _rows_naming(t, t.space) == {}
    assert t.owner.get("/v1/spaces").json()["spaces"] == []
    assert ed.get(f"{base}/head").status_code == 404
