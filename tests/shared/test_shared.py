"""Pure tables for shared/: canonical JSON, ids and slugs, entries and their vault form,
the hash chain, batch digests and signatures."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.canonical import CanonicalError, canonical_str, loads_strict
from shared.digest import chain_next, genesis_digest, verify_chain
from shared.entry import EntryError, make_entry, parse_markdown, to_markdown
from shared.errors import InvalidRequest, TooLarge, from_wire
from shared.ids import entry_id_problem, is_id, new_id, slug_problem
from shared.signing import new_private_key, public_b64
from shared.wire import Op, build_batch, parse_batch


@pytest.mark.parametrize("value,expected", [
    ({"b": 1, "a": [True, None, "x"]}, '{"a":[true,null,"x"],"b":1}'),
    ({"é": 1, "z": 2, "A": 3}, '{"A":3,"z":2,"é":1}'),
    ("line\nbreak\t\"q\" \\", '"line\\nbreak\\t\\"q\\" \\\\"'),
    ("\u0001\u001f\u007f", '"\\u0001\\u001f\u007f"'),
    ("emoji 😀", '"emoji 😀"'),
    ({"\U0001f600": 1, "\uffff": 2}, '{"😀":1,"\uffff":2}'),  # UTF-16 order: surrogates first
    (-(2**53 - 1), "-9007199254740991"),
    ([], "[]"),
    ({}, "{}"),
])
def test_canonical_json_matches_rfc8785_rules(value: object, expected: str) -> None:
    assert canonical_str(value) == expected


@pytest.mark.parametrize("value", [1.5, 2**53, float("nan"), "\ud800", {1: "x"}, {"a": {1, 2}}])
def test_values_without_canonical_form_are_refused(value: object) -> None:
    with pytest.raises(CanonicalError):
        canonical_str(value)


@pytest.mark.parametrize("text", ['{"a":1,"a":2}', '{"a": NaN}', '{"a": 1.0}', "[Infinity]"])
def test_strict_json_refuses_ambiguous_documents(text: str) -> None:
    with pytest.raises(ValueError):
        loads_strict(text)


def test_ids_are_canonical_and_time_ordered() -> None:
    a, b = new_id(1000), new_id(2000)
    assert is_id(a) and is_id(b) and a < b
    assert not is_id(a.upper()) and not is_id(a[:-1]) and not is_id("u" * 26)


@pytest.mark.parametrize("slug", ["../x", "a/../b", "/abs", "a//b", ".hidden", "a/.git",
                                  "UPPER", "sp ace", "a\\b", "x" * 201, "", "a/", "n.md",
                                  "café", "a\x00b"])
def test_unsafe_slugs_are_refused(slug: str) -> None:
    assert slug_problem(slug) is not None


@pytest.mark.parametrize("entry_id", ["page/deploy", "skill/k8s/rollback", "note/2024.01.02",
                                      "widget/x_y-z", "guardrail/a.b"])
def test_valid_entry_ids_are_accepted(entry_id: str) -> None:
    assert entry_id_problem(entry_id) is None


ENTRIES = [
    {"id": "page/a", "title": "A", "body": "text\n"},
    {"id": "page/b", "title": "", "body": ""},
    {"id": "page/c", "title": "yes", "body": "---\nnot front matter\n---\n"},
    {"id": "guardrail/g", "title": "No", "body": "x", "tags": ["b", "a", "a"],
     "meta": {"severity": "block", "when": "2024-01-01", "n": 3, "on": True}},
    {"id": "skill/s", "title": "null", "body": "crlf\r\nbody\r\n", "links": ["page/a"],
     "meta": {"nested": {"list": [1, "two", None]}, "empty": ""}},
    {"id": "persona/p", "title": "'quoted' \"title\": colon", "body": "ünïcödé 😀\n"},
]


@pytest.mark.parametrize("data", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_vault_round_trip_keeps_the_version(data: dict) -> None:
    e = make_entry(data)
    back, local = parse_markdown(e.id, to_markdown(e))
    assert back.version == e.version and local == {}
    again, _ = parse_markdown(e.id, to_markdown(back))
    assert to_markdown(again) == to_markdown(e)


@given(title=st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=40)
       .filter(lambda t: "\n" not in t and "\r" not in t),
       body=st.text(st.characters(blacklist_categories=("Cs",)), max_size=200),
       tags=st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True), max_size=4))
@settings(max_examples=150, deadline=None)
def test_vault_round_trip_property(title: str, body: str, tags: list[str]) -> None:
    e = make_entry({"id": "page/p", "title": title.strip(), "body": body, "tags": tags})
    assert parse_markdown(e.id, to_markdown(e))[0].version == e.version


@pytest.mark.parametrize("text,line", [
    ("---\ntitle: [unclosed\n---\nbody", 2),
    ("---\ntitle: x\nno closing fence", 1),
    ("---\n- a list\n---\n", 2),
    ("---\nmeta:\n  p: 0.5\n---\n", 2),
    ("---\ntags: [\"two words\"]\n---\n", 2),
])
def test_broken_front_matter_is_reported_with_a_line(text: str, line: int) -> None:
    with pytest.raises(EntryError) as exc:
        parse_markdown("page/x", text)
    assert exc.value.line is not None and exc.value.line >= 1


def test_unknown_front_matter_keys_are_kept_under_meta() -> None:
    e, _ = parse_markdown("page/x", "---\ntitle: T\naliases: [a]\n---\nbody")
    assert e.meta == {"aliases": ["a"]}


def test_chain_detects_a_changed_batch() -> None:
    g = genesis_digest("s", "e")
    d1 = chain_next(g, "a" * 64)
    d2 = chain_next(d1, "b" * 64)
    assert verify_chain("s", "e", [(1, "a" * 64, d1), (2, "b" * 64, d2)]) == (2, d2)
    with pytest.raises(ValueError):
        verify_chain("s", "e", [(1, "c" * 64, d1)])
    with pytest.raises(ValueError):
        verify_chain("s", "e", [(2, "b" * 64, d2)], start=(0, g))


def _batch():
    key = new_private_key()
    op = Op(make_entry({"id": "page/a", "title": "t", "body": "b"}), None)
    return key, build_batch(key, batch_id=new_id(), replica_id=new_id(), space=new_id(),
                            epoch=new_id(), parent_seq=0, parent_digest="0" * 64, ops=[op])


def test_batch_round_trips_and_verifies() -> None:
    key, b = _batch()
    parsed = parse_batch(b.to_wire())
    assert parsed.digest == b.digest
    assert parsed.verify_signature(public_b64(key))
    assert not parsed.verify_signature(public_b64(new_private_key()))


def test_batch_with_tampered_op_fails_digest() -> None:
    _, b = _batch()
    w = b.to_wire()
    w["ops"][0]["entry"]["body"] = "changed"
    with pytest.raises(InvalidRequest):
        parse_batch(w)


def test_batch_over_op_limit_is_too_large() -> None:
    _, b = _batch()
    w = b.to_wire()
    w["ops"] = w["ops"] * 3
    with pytest.raises(TooLarge):
        parse_batch(w, max_ops=2)


@pytest.mark.parametrize("status,body,code,retryable", [
    (409, {"error": {"code": "head_changed", "message": "m", "details": {}}}, "head_changed", True),
    (403, {"error": {"code": "policy_denied", "message": "m", "details": {"denied": []}}},
     "policy_denied", False),
    (502, "<html>", "unavailable", True),
    (400, {}, "invalid_request", False),
])
def test_client_maps_wire_errors_back_to_the_same_classes(status: int, body: object, code: str,
                                                          retryable: bool) -> None:
    e = from_wire(status, body)
    assert e.code == code and e.retryable is retryable


def test_validated_canonical_bytes_equal_the_full_canonical_form():
    from shared.canonical import canonical_bytes
    from shared.entry import make_entry, tombstone, validated_canonical_bytes

    cases = [{"id": "page/a", "title": "t", "body": "b\n", "tags": ["x", "é"],
              "links": ["page/b"], "meta": {"n": 2 ** 53 - 1, "s": "\u2028", "l": [1, {"z": None}]}},
             {"id": "page/k", "meta": {"\ue000k": 1, "a": 2, "\U0001f600": "x"}},
             {"id": "page/e"}, {"id": "note/q", "title": "\x00\x1f\"\\", "meta": {"d": {}}}]
    for d in cases:
        e = make_entry(d)
        assert validated_canonical_bytes(e) == canonical_bytes(e.to_dict())
    t = tombstone("page/t")
    assert validated_canonical_bytes(t) == canonical_bytes(t.to_dict())


def test_meta_over_the_limit_is_refused_with_or_without_the_text_length():
    """``make_entry(text_len=…)`` skips encoding meta only where the text it came from is
    shorter than the limit; a snapshot line (replica/hubclient/ndjson.py) passes its own length, so a
    big meta is refused there too, and a line of the limit's size still fits."""
    import hashlib
    import json

    import pytest

    from replica.hubclient.ndjson import check_entry_line
    from shared.entry import MAX_META_BYTES, EntryError, make_entry, validated_canonical_bytes
    from shared.errors import HubUnverified

    big = {"id": "page/x", "title": "x", "meta": {"k": "v" * MAX_META_BYTES}}
    text = json.dumps(big)
    for text_len in (None, len(text)):
        with pytest.raises(EntryError, match="meta larger"):
            make_entry(json.loads(text), text_len=text_len)
    for meta in (big["meta"], {"k": "v" * (MAX_META_BYTES - 8)}):
        e = {"id": "page/x", "title": "x", "body": "", "tags": [], "links": [], "meta": meta}
        canonical = json.dumps(e, sort_keys=True, separators=(",", ":"))
        line = json.dumps({"entry": e, "version": hashlib.sha256(canonical.encode()).hexdigest(),
                           "seq": 1}).encode()
        if len(canonical_meta := json.dumps(meta, separators=(",", ":"))) > MAX_META_BYTES:
            with pytest.raises(HubUnverified, match="meta larger"):
                check_entry_line(line)
        else:
            assert len(canonical_meta) <= MAX_META_BYTES
            entry, _text, _seq = check_entry_line(line)
            assert validated_canonical_bytes(entry).decode() == canonical


def test_a_byte_order_mark_does_not_hide_the_front_matter() -> None:
    # on 0506cf5 a file saved with a BOM (Notepad, some Windows editors) was published with
    # an empty title and its whole front matter as body text, silently
    from shared.entry import parse_markdown

    for newline in ("\n", "\r\n"):
        text = "\ufeff" + newline.join(["---", "title: Deploy", "tags: [ops]", "---",
                                         "the body", ""])
        entry, _ = parse_markdown("page/deploy", text)
        assert entry.title == "Deploy" and list(entry.tags) == ["ops"]
        assert entry.body.replace("\r\n", "\n") == "the body\n"
