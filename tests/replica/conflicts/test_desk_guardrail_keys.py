"""The conflict desk and guardrail keys (docs/decisions.md, D108 "A guardrail that takes a key
is an update of its holders"): ``keep_both`` on a guardrail that has a ``meta.key`` makes a
second guardrail under that key. With another text than the hub's, that copy is an update of
the hub's guardrail that weakens it, so an editor's resolution is refused up front, as the
hub would refuse its publication; where the rules allow it, it is applied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replica.conflicts.desk import Desk
from replica.engine.markers import conflict_marker
from replica.engine.merge import merge_entry
from replica.machine.home import SpaceConfig
from replica.store import store as st
from replica.store.store import Conflict, EntryState, Store
from replica.vault import markdown as md
from shared.entry import make_entry
from shared.errors import PolicyDenied
from shared.ids import new_id
from shared.policy import DEFAULT_RULES

EID = "guardrail/no-force-push"


def g(body: str, eid: str = EID) -> Any:
    return make_entry({"id": eid, "title": "no force push", "body": body,
                       "meta": {"severity": "block", "key": "nfp"}})


def conflicted(root: Path, rules: list[dict[str, Any]], eid: str = EID,
               kinds: dict[str, str] | None = None) -> SpaceConfig:
    sp = SpaceConfig(new_id(), "t", new_id(), new_id(), root / "vault", "editor",
                     root / "space")
    sp.dir.mkdir(parents=True)
    base, ours = g("Never force-push.\n", eid), g("Never force-push to main.\n", eid)
    theirs = g("Never force-push to a release branch.\n", eid)
    r = merge_entry(base, ours, theirs)
    c = Conflict(eid, list(r.conflicts), base, ours, theirs,
                 {"user": "u2", "device": "d2", "agent": None}, 3, r.body_with_markers, 1)
    store = Store(sp.store_path)
    data = md.render(ours, conflict_marker(c))
    path = md.entry_path(sp.vault, eid)
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    with store.tx() as conn:
        st.put_state_txn(conn, EntryState(eid, theirs, ours, md.file_hash(data), None, None,
                                          True))
        st.put_conflict_txn(conn, c)
        st.set_meta_txn(conn, "access", {"role": "editor", "rules": rules,
                                         **({"kinds": kinds} if kinds else {})})
    store.close()
    return sp


def test_keep_both_of_a_keyed_guardrail_is_refused_to_an_editor(tmp_path: Path) -> None:
    space = conflicted(tmp_path, [r.to_dict() for r in DEFAULT_RULES])
    with Desk(space) as d:
        pkt = d.show(EID)
        with pytest.raises(PolicyDenied) as ex:
            d.resolve(EID, digest=pkt["digest"], how="keep_both")
        # judged as its publication: the kept version gains a link (a text change of the
        # guardrail), and the moved copy takes the key
        kept, hit = ex.value.details["denied"]
        assert (kept["id"], kept["rule"]) == (EID, "default:guardrails-additive")
        assert (hit["action"], hit["of"], hit["rule"]) == (
            "update", EID, "default:guardrails-additive")
        assert hit["id"].startswith(EID + "-alt-")
        assert d.list_packets()[0]["digest"] == pkt["digest"]  # nothing applied


def test_keep_both_of_a_keyed_guardrail_where_the_rules_allow_it(tmp_path: Path) -> None:
    space = conflicted(tmp_path, [])
    with Desk(space) as d:
        pkt = d.show(EID)
        r = d.resolve(EID, digest=pkt["digest"], how="keep_both")
        assert len(r["entries"]) == 2


def test_a_guardrail_by_the_spaces_folder_mapping_is_judged_as_one(tmp_path: Path) -> None:
    """A file with no ``kind:`` line in a folder the space maps onto guardrail (the head's
    ``kinds``, kept with the rules: D152): keeping our text over the hub's is a weakening,
    refused locally to an editor, as the guard would; unmapped, the same file is a page."""
    eid, rules = "Team Rules/no force push", [r.to_dict() for r in DEFAULT_RULES]
    space = conflicted(tmp_path / "mapped", rules, eid, {"Team Rules": "guardrail"})
    with Desk(space) as d:
        pkt = d.show(eid)
        with pytest.raises(PolicyDenied) as ex:
            d.resolve(eid, digest=pkt["digest"], how="ours")
        assert [(h["id"], h["rule"]) for h in ex.value.details["denied"]] == [
            (eid, "default:guardrails-additive")]
    space = conflicted(tmp_path / "plain", rules, eid)
    with Desk(space) as d:
        pkt = d.show(eid)
        assert d.resolve(eid, digest=pkt["digest"], how="ours")["entries"]
