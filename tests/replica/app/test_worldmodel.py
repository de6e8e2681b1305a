"""The world-model bundle as tables (replica/app/worldmodel.py is pure): skill precedence
space → persona → runtime with ``override`` on the association, guardrails additive
(stricter severity on duplicate keys, never lowered by a persona or at run time), the size
bound that never drops a guardrail, explicit space selection, a stable version."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replica.app.bootstrap import pick_space
from replica.app.worldmodel import bundle
from replica.machine.home import SpaceConfig
from shared.canonical import canonical_bytes
from shared.entry import Entry, make_entry
from shared.errors import SpaceAmbiguous, SpaceNotFound


def e(eid: str, body: str = "", **meta: Any) -> Entry:
    return make_entry({"id": eid, "title": eid.split("/")[1], "body": body, "meta": meta})


SKILLS = [e("skill/review", "space review"), e("skill/review-strict", "strict review",
                                                  key="review"),
          e("skill/review-lite", "lite review", key="review"), e("skill/deploy", "deploy")]


def build(extra: list[Entry] = (), guardrails: list[Entry] = (), **kw: Any) -> dict[str, Any]:
    entries = {x.id: x for x in [*SKILLS, *extra]}
    return bundle(space={"id": "s1", "name": "team"}, entries=entries,
                  guardrails=list(guardrails), head_seq=7, recent=[], **kw)


def parts(doc: dict[str, Any], key: str) -> list[str]:
    return [p["body"] for s in doc["skills"] if s["key"] == key for p in s["parts"]]


PROFILE_OVERRIDE = e("space/profile", skills=["skill/review", "skill/deploy",
                                              {"skill": "skill/review-strict", "override": True}])
PERSONA_OVERRIDE = e("persona/fast", "moves fast", skills=[
    {"skill": "skill/review-lite", "override": True}])
PERSONA_ADD = e("persona/careful", "careful", skills=[
    {"skill": "skill/review-strict", "override": False}, "skill/review"])


@pytest.mark.parametrize("name,extra,kw,key,expected", [
    ("no profile: every skill of the space, same key adds",
     [], {}, "review", ["space review", "lite review", "strict review"]),  # by id
    ("override on the space association replaces",
     [PROFILE_OVERRIDE], {}, "review", ["strict review"]),
    ("override on the persona association replaces the space's",
     [PROFILE_OVERRIDE, PERSONA_OVERRIDE], {"persona": "persona/fast"}, "review",
     ["lite review"]),
    ("persona association without override adds; same text is de-duplicated",
     [e("space/profile", skills=["skill/review"]), PERSONA_ADD], {"persona": "careful"},
     "review", ["space review", "strict review"]),
    ("the space's default persona is selected when none is named",
     [e("space/profile", skills=["skill/review"], default_persona="persona/fast"),
      PERSONA_OVERRIDE], {}, "review", ["lite review"]),
    ("runtime override replaces everything before it",
     [PROFILE_OVERRIDE, PERSONA_ADD],
     {"persona": "careful", "runtime_skills": [{"key": "review", "body": "rt",
                                                "override": True}]}, "review", ["rt"]),
    ("runtime without override adds",
     [PROFILE_OVERRIDE], {"runtime_skills": [{"key": "review", "body": "rt"}]}, "review",
     ["strict review", "rt"]),
])
def test_skill_precedence(name: str, extra: list, kw: dict, key: str, expected: list) -> None:
    assert parts(build(extra, **kw), key) == expected, name


G_WARN = e("guardrail/no-prod", "never deploy on friday", severity="warn", key="prod")
G_BLOCK = e("guardrail/no-prod-2", "no prod pushes", severity="block", key="prod")
G_INFO = e("guardrail/tidy", "tidy up", severity="info")


@pytest.mark.parametrize("name,guards,extra,kw,expected,ignored", [
    ("duplicate keys: the stricter severity wins", [G_WARN, G_BLOCK], [], {},
     {"prod": "block", "tidy": "info"}, 0),
    ("a persona that tries to lower a guardrail is ignored",
     [G_BLOCK], [e("persona/lax", guardrails=[{"key": "prod", "severity": "info"}])],
     {"persona": "lax"}, {"prod": "block", "tidy": "info"}, 1),
    ("a persona may raise one and add one",
     [G_WARN], [e("persona/strict", guardrails=[{"key": "prod", "severity": "block"},
                                                {"key": "pii", "severity": "warn"}])],
     {"persona": "strict"}, {"prod": "block", "tidy": "info", "pii": "warn"}, 0),
    ("runtime input cannot lower one", [G_BLOCK], [],
     {"runtime_guardrails": [{"key": "prod", "severity": "warn"}]},
     {"prod": "block", "tidy": "info"}, 1),
])
def test_guardrails_are_additive(name: str, guards: list, extra: list, kw: dict,
                                 expected: dict, ignored: int) -> None:
    doc = build(extra, [*guards, G_INFO], **kw)
    assert {g["key"]: g["severity"] for g in doc["guardrails"]} == expected, name
    assert len(doc["guardrails_ignored"]) == ignored
    if "prod" in expected and guards[0] is G_BLOCK:
        assert next(g for g in doc["guardrails"] if g["key"] == "prod")["body"] == \
            "no prod pushes"  # the space's text is kept


def test_size_bound_never_drops_a_guardrail() -> None:
    many = [e(f"skill/s{i}", "x" * 3000) for i in range(40)]
    guards = [e(f"guardrail/g{i}", "rule " * 20, severity="block") for i in range(5)]
    doc = build(many, guards, max_bytes=8 * 1024)
    assert len(canonical_bytes(doc)) <= 8 * 1024
    assert len(doc["guardrails"]) == 5 and doc["omitted"] and "over_bound" not in doc
    # guardrails alone over the bound: all kept, and it says so
    huge = [e(f"guardrail/h{i}", "y" * 2000, severity="warn") for i in range(10)]
    doc = build(many, huge, max_bytes=4 * 1024)
    assert len(doc["guardrails"]) == 10 and "guardrails alone" in doc["over_bound"]["reason"]
    assert doc["skills"] == []


def test_an_mcp_bundle_fits_the_answer_bound_as_sent_whatever_max_bytes() -> None:
    """Canonical bytes are not bytes as sent: a quote costs 2 in canonical JSON and 4 in an
    MCP answer, a newline 2 and 3. Skills of quotes and newlines under max_bytes = 1 MiB
    made the answer pass 48 KiB (too_large, an agent got no world model at all); with the
    answer's bound it fits as sent, the guardrails kept. Before: 14x over."""
    from shared.answers import ANSWER_BUDGET, MAX_RESULT_BYTES, answer_cost

    noisy = [e(f"skill/q{i}", '"quoted"\n' * 400) for i in range(60)]
    guards = [e("guardrail/no-prod", "never push to prod", severity="block")]
    unbounded = build(noisy, guards, max_bytes=1024 * 1024)
    assert answer_cost(unbounded) > MAX_RESULT_BYTES  # the attack: what was sent before
    doc = build(noisy, guards, max_bytes=1024 * 1024, answer_bound=ANSWER_BUDGET)
    assert answer_cost(doc) <= ANSWER_BUDGET, answer_cost(doc)
    assert answer_cost(doc) > ANSWER_BUDGET - 8 * 1024  # one skill (7 KB as sent) short at most
    assert [g["id"] for g in doc["guardrails"]] == ["guardrail/no-prod"]
    assert doc["skills"] and {o["section"] for o in doc["omitted"]} == {"skills"}
    assert "over_bound" not in doc
    # guardrails alone over the answer's bound: every one kept, and it says so
    huge = [e(f"guardrail/h{i}", '"' * 3000, severity="warn") for i in range(10)]
    doc = build(noisy, huge, max_bytes=1024 * 1024, answer_bound=ANSWER_BUDGET)
    assert len(doc["guardrails"]) == 10 and doc["skills"] == []
    assert "answer's bound" in doc["over_bound"]["reason"]
    # the canonical bound alone stays as it was: answer_bound only ever cuts more
    assert build(noisy, guards, max_bytes=4096) == build(noisy, guards, max_bytes=4096,
                                                          answer_bound=ANSWER_BUDGET)


def test_default_bound_is_32_kib() -> None:
    doc = build([e(f"skill/s{i}", "z" * 3000) for i in range(40)])
    assert doc["max_bytes"] == 32 * 1024 and len(canonical_bytes(doc)) <= 32 * 1024


def test_version_is_stable_when_nothing_changed() -> None:
    a = build([PROFILE_OVERRIDE], [G_WARN], now=1)
    b = build([PROFILE_OVERRIDE], [G_WARN], now=2)
    assert a["version"] == b["version"] and a["generated_at"] != b["generated_at"]
    c = build([PROFILE_OVERRIDE], [G_BLOCK], now=1)
    assert c["version"]["digest"] != a["version"]["digest"]


def sc(sid: str, name: str) -> SpaceConfig:
    return SpaceConfig(sid, name, "h", "r", Path("/v"), "editor", Path("/d"), None)


@pytest.mark.parametrize("ref,spaces,error,candidates", [
    (None, [sc("a1", "team")], SpaceNotFound, 1),  # never chosen silently, even with one
    ("nope", [sc("a1", "team"), sc("b2", "ops")], SpaceNotFound, 2),
    ("team", [sc("a1", "team"), sc("b2", "team")], SpaceAmbiguous, 2),
])
def test_space_is_named_explicitly(ref: Any, spaces: list, error: type, candidates: int
                                   ) -> None:
    with pytest.raises(error) as ex:
        pick_space(spaces, ref)
    assert len(ex.value.details["candidates"]) == candidates


def test_space_by_id_or_unique_name() -> None:
    spaces = [sc("a1", "team"), sc("b2", "team"), sc("c3", "ops")]
    assert pick_space(spaces, "b2").space_id == "b2"
    assert pick_space(spaces, "ops").space_id == "c3"


def test_the_spaces_folder_mapping_gives_skills_and_guardrails(tmp_path: Path) -> None:
    """A skill and a guardrail known only by the space's folder mapping (the head's
    ``kinds``, kept by the replica: D152) are in the world model; without the mapping the
    same files are pages, and neither is."""
    from replica.app.bootstrap import world_model
    from replica.store import store as st
    from replica.store.store import EntryState, Store
    from shared.ids import new_id

    skill = make_entry({"id": "Playbooks/Review", "title": "Review", "body": "read it\n"})
    rail = make_entry({"id": "Team Rules/freeze", "title": "freeze", "body": "no deploys\n",
                       "meta": {"severity": "block"}})
    docs = []
    for kinds in ({"Playbooks": "skill", "Team Rules": "guardrail"}, None):
        sp = SpaceConfig(new_id(), "team", new_id(), new_id(), tmp_path / "vault", "editor",
                         tmp_path / f"space{len(docs)}")
        sp.dir.mkdir(parents=True)
        store = Store(sp.store_path)
        with store.tx() as conn:
            for x in (skill, rail):
                st.put_state_txn(conn, EntryState(x.id, x, x))
            st.set_meta_txn(conn, "access", {"role": "editor", "rules": [],
                                             **({"kinds": kinds} if kinds else {})})
        store.close()
        docs.append(world_model(None, sp.space_id, spaces=[sp]))  # type: ignore[arg-type]
    mapped, plain = docs
    assert [s["key"] for s in mapped["skills"]] == ["Review"]
    assert [(g["id"], g["severity"]) for g in mapped["guardrails"]] == [
        ("Team Rules/freeze", "block")]
    assert plain["skills"] == [] and plain["guardrails"] == []
