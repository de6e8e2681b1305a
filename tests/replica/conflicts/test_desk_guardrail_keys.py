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


def g(body: str) -> Any:
    return make_entry({"id": EID, "title": "no force push", "body": body,
                       "meta": {"severity": "block", "key": "nfp"}})


def conflicted(root: Path, rules: list[dict[str, Any]]) -> SpaceConfig:
    sp = SpaceConfig(new_id(), "t", new_id(), new_id(), root / "vault", "editor",
                     root / "space")
    sp.dir.mkdir(parents=True)
    base, ours = g("Never force-push.\n"), g("Never force-push to main.\n")
    theirs = g("Never force-push to a release branch.\n")
    r = merge_entry(base, ours, theirs)
    c = Conflict(EID, list(r.conflicts), base, ours, theirs,
                 {"user": "u2", "device": "d2", "agent": None}, 3, r.body_with_markers, 1)
    store = Store(sp.store_path)
    data = md.render(ours, conflict_marker(c))
    path = md.entry_path(sp.vault, EID)
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    with store.tx() as conn:
        st.put_state_txn(conn, EntryState(EID, theirs, ours, md.file_hash(data), None, None,
                                          True))
        st.put_conflict_txn(conn, c)
        st.set_meta_txn(conn, "access", {"role": "editor", "rules": rules})
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
