"""The benchmark corpus must be valid Quire content, or every number built on it is wrong."""

from __future__ import annotations

import pytest

from bench import corpus as c
from shared.entry import make_entry, parse_markdown, to_markdown

# A small hand-made base keeps these tests independent of the cache and fast; one test
# below runs the real extraction.
BASE = [
    {"id": "page/stdlib/json", "title": "json (module)", "body": "# json\n\nJSON encoder.\n",
     "tags": ["module", "stdlib", "json"], "links": [],
     "meta": {"python": "3.11", "kind": "module", "module": "json", "qualname": ""}},
    {"id": "page/stdlib/json/dumps", "title": "json.dumps (function)",
     "body": "# json.dumps\n\nSerialize obj.\n", "tags": ["function", "json", "stdlib"],
     "links": ["page/stdlib/json"],
     "meta": {"python": "3.11", "kind": "function", "module": "json", "qualname": "dumps"}},
    {"id": "page/stdlib/json/loads", "title": "json.loads (function)",
     "body": "# json.loads\n\nDeserialize s.", "tags": ["function", "json", "stdlib"],
     "links": ["page/stdlib/json"],
     "meta": {"python": "3.11", "kind": "function", "module": "json", "qualname": "loads"}},
]


def _check_valid_and_round_trips(entries: list[dict]) -> None:
    ids = [e["id"] for e in entries]
    assert len(set(ids)) == len(ids), "duplicate ids in the corpus"
    for e in entries:
        entry = make_entry(e)
        again, local = parse_markdown(entry.id, to_markdown(entry))
        assert local == {}
        assert again.version == entry.version, e["id"]
        assert set(e["links"]) <= set(ids), f"{e['id']} links outside the corpus"


@pytest.mark.parametrize("n", [1, 2, 3, 7, 20])
def test_scaled_corpus_is_valid_and_round_trips(n: int) -> None:
    entries = c.corpus(n, base=BASE)
    assert len(entries) == n
    _check_valid_and_round_trips(entries)


def test_scaling_is_deterministic_and_copies_differ() -> None:
    a, b = c.corpus(10, base=BASE), c.corpus(10, base=BASE)
    assert c.digest(a) == c.digest(b)
    bodies = [e["body"] for e in a]
    assert len(set(bodies)) == len(bodies), "copies must carry an edit"


def test_edits_change_exactly_the_requested_entries() -> None:
    entries = c.corpus(12, base=BASE)
    changed = c.edited(entries, 5)
    assert len(changed) == 5
    by_id = {e["id"]: e for e in entries}
    for e in changed:
        assert make_entry(e).version != make_entry(by_id[e["id"]]).version


def test_vault_and_pouch_forms_carry_the_same_entries(tmp_path) -> None:
    entries = c.corpus(6, base=BASE)
    assert c.write_vault(entries, tmp_path) == 6
    for e in entries:
        text = c.vault_path(tmp_path, e["id"]).read_text("utf-8")
        assert parse_markdown(e["id"], text)[0].version == make_entry(e).version
    docs = list(c.pouch_docs(entries))
    assert [d["_id"] for d in docs] == [e["id"] for e in entries]


@pytest.mark.slow
def test_real_stdlib_corpus_is_valid() -> None:
    base = c.base_corpus()
    assert len(base) > 1000
    _check_valid_and_round_trips(c.corpus(300, base=base))
    _check_valid_and_round_trips(c.corpus(len(base) + 50, base=base))
