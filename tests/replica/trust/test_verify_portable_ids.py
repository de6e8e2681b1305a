"""Entries whose ids are not portable, accepted before the hub and the replica refused such
new ids, are reported by `quire verify` (replica/app/selfcheck.py) and not broken: they still
update and sync."""

from __future__ import annotations

from pathlib import Path

import pytest

from replica.app import selfcheck
from shared.entry import make_entry


def _page(eid: str, body: str) -> object:
    return make_entry({"id": eid, "title": eid, "body": body})


def test_an_old_non_portable_id_is_reported_and_still_syncs(space, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    a = space.replica(tmp_path, "a")
    # history from before the rule: both checks off while page/con is created
    import hub.guard
    import replica.engine.push

    with monkeypatch.context() as m:
        m.setattr(hub.guard, "check_portable", lambda ops, current: None)
        m.setattr(replica.engine.push, "portability_problem", lambda eid: None)
        a.write(_page("page/con", "old\n"))
        a.write(_page("page/ok", "fine\n"))
        a.sync()
    assert {"page/con", "page/ok"} <= set(space.live())

    ids = selfcheck.check_ids(a.store)["non_portable"]
    assert [x["id"] for x in ids] == ["page/con"] and "reserved" in ids[0]["reason"]
    # not broken: an update of the existing entry is accepted, another replica gets it
    a.write(_page("page/con", "updated\n"))
    a.sync()
    b = space.replica(tmp_path, "b")
    b.sync()
    assert b.read("page/con").body == "updated\n"
    assert [x["id"] for x in selfcheck.check_ids(b.store)["non_portable"]] == ["page/con"]
