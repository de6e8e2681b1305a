"""A conflict on a guardrail kept one by its front matter, or on a file at the vault's
root (docs/decisions.md D139): the packet's stakes and the resolution check judge the
effective kind, so a side that drops ``kind: guardrail`` is a weakening, and "keep both"
names a valid id for a root file. Without ``_kind`` (the id's first folder) each of these
guardrails read as a page: no stakes, and a weakening resolution passed the local check."""

from __future__ import annotations

from replica.conflicts import packets
from replica.store.records import Conflict
from shared.entry import make_entry
from shared.ids import entry_id_problem


def _e(eid: str, body: str, **meta: object):  # type: ignore[no-untyped-def]
    return make_entry({"id": eid, "title": "t", "body": body, "meta": meta})


def _conflict(base, ours, theirs) -> Conflict:  # type: ignore[no-untyped-def]
    return Conflict(base.id, ["body"], base, ours, theirs, None, None, None, 0)


def test_a_side_that_drops_the_kind_line_weakens_the_guardrail() -> None:
    base = _e("Rules/deploy", "no friday deploys\n", kind="guardrail", severity="block")
    ours = _e("Rules/deploy", "no friday deploys\n", severity="block")  # kind line gone
    theirs = _e("Rules/deploy", "no friday deploys!\n", kind="guardrail", severity="block")
    st = packets.stakes(_conflict(base, ours, theirs))
    assert st is not None and st["guardrail"] is True
    assert st["ours"]["weakens"] and "changes its kind to page" in st["ours"]["how"]
    rules = [{"id": "default:guardrails-additive", "effect": "deny", "who": "editor",
              "actions": ["update", "delete"], "entries": "guardrail/*", "when": "weakens",
              "source": "default"}]
    assert packets.rule_denies(rules, role="editor", user_id="u", agent=None,
                               entry_id="Rules/deploy", action="update") == \
        "default:guardrails-additive"


def test_keep_both_of_a_root_file_is_a_valid_id() -> None:
    other = _e("README", "theirs\n")
    alt = packets.keep_both_id("README", other)
    assert alt.startswith("README-alt-") and entry_id_problem(alt) is None
    assert packets.keep_both_id("page/x", other).startswith("page/x-alt-")
