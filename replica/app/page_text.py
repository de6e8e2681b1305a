"""Pure text work behind an agent's page tools (replica/mcp/page_tools.py): partial edits of
a body, the links a page makes, and the search query language. No store, no I/O.

    edit_body(body, replace_lines | replace_text | append_under)  the new body and the
                                      lines it touched; every refusal an InvalidRequest
                                      naming the problem (out of range, not unique, …)
    links_of(entry, known)            the entry ids a page links to: its ``links`` field,
                                      ``[[wikilinks]]`` and relative Markdown links
    parse_query(text) / matches()     words, "quoted phrases" and OR between groups
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from shared import links
from shared.entry import Entry
from shared.errors import InvalidRequest

MAX_EDIT_TEXT = 256 * 1024  # characters an edit may send (a replacement, an appended part)
MAX_QUERY_GROUPS = 8
MAX_QUERY_TERMS = 16

# ---------------------------------------------------------------- partial edits


def _lines(body: str) -> list[str]:
    """The body's lines, each with its line end (the last may have none)."""
    return body.splitlines(keepends=True)


def _as_lines(text: str) -> list[str]:
    """``text`` as whole lines: a missing final newline is added, so a replacement never
    glues itself to the next line."""
    if text == "":
        return []
    return _lines(text if text.endswith("\n") else text + "\n")


def _heading(line: str) -> tuple[int, str] | None:
    m = re.match(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$", line.rstrip("\r\n"))
    return None if m is None else (len(m.group(1)), m.group(2).strip())


def headings(body: str) -> list[str]:
    """The Markdown headings of ``body`` (ATX, ``#`` to ``######``), in order."""
    out = []
    fenced = False
    for line in _lines(body):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        h = None if fenced else _heading(line)
        if h is not None:
            out.append(h[1])
    return out


@dataclass(frozen=True)
class Edited:
    body: str
    first_line: int  # 1-based, the first line the new text occupies
    line_count: int  # lines of new text written there
    how: str


def edit_body(body: str, *, replace_lines: dict[str, Any] | None = None,
              replace_text: dict[str, Any] | None = None,
              append_under: dict[str, Any] | None = None) -> Edited:
    """Apply exactly one partial edit to ``body`` (module docstring)."""
    given = [k for k, v in (("replace_lines", replace_lines), ("replace_text", replace_text),
                            ("append_under", append_under)) if v is not None]
    if len(given) != 1:
        raise InvalidRequest("give exactly one of replace_lines, replace_text, append_under",
                             {"given": given})
    if replace_lines is not None:
        return _replace_lines(body, replace_lines)
    if replace_text is not None:
        return _replace_text(body, replace_text)
    assert append_under is not None
    return _append_under(body, append_under)


def _text_arg(d: dict[str, Any], key: str) -> str:
    v = d.get(key)
    if not isinstance(v, str):
        raise InvalidRequest(f"{key} must be a string", {"fields": [
            {"field": key, "problem": "must be a string"}]})
    if len(v) > MAX_EDIT_TEXT:
        raise InvalidRequest(f"{key} is longer than {MAX_EDIT_TEXT} characters: use write")
    return v


def _replace_lines(body: str, a: dict[str, Any]) -> Edited:
    lines = _lines(body)
    start, end = a.get("start"), a.get("end")
    if not isinstance(start, int) or not isinstance(end, int) or isinstance(start, bool) \
            or isinstance(end, bool):
        raise InvalidRequest("replace_lines needs integers start and end (1-based, end "
                             "inclusive; end = start - 1 inserts before start)")
    if not (1 <= start <= len(lines) + 1 and start - 1 <= end <= len(lines)):
        raise InvalidRequest(f"lines {start}-{end} are outside the body ({len(lines)} lines)",
                             {"line_count": len(lines)})
    new = _as_lines(_text_arg(a, "text"))
    if end >= start and end == len(lines) and not lines[-1].endswith("\n") and new:
        new[-1] = new[-1].rstrip("\n")  # the body's last line had no line end: keep it so
    if start > 1 and not lines[start - 2].endswith("\n"):
        lines[start - 2] += "\n"  # inserting after a last line without a line end
    out = lines[:start - 1] + new + lines[end:]
    return Edited("".join(out), start, len(new), "replace_lines")


def _replace_text(body: str, a: dict[str, Any]) -> Edited:
    old, new = _text_arg(a, "old"), _text_arg(a, "new")
    if not old:
        raise InvalidRequest("replace_text.old must not be empty")
    count = body.count(old)
    if count != 1:
        raise InvalidRequest(
            f"replace_text.old occurs {count} times in the body; it must occur exactly once "
            "(give more surrounding text, or use replace_lines)", {"count": count})
    at = body.index(old)
    first = body.count("\n", 0, at) + 1
    return Edited(body.replace(old, new, 1), first, new.count("\n") + 1, "replace_text")


def _append_under(body: str, a: dict[str, Any]) -> Edited:
    want = _text_arg(a, "heading").strip().lstrip("#").strip()
    text = _text_arg(a, "text")
    lines = _lines(body)
    fenced = False
    found: tuple[int, int] | None = None  # (index, level)
    end = len(lines)
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        h = None if fenced else _heading(line)
        if h is None:
            continue
        if found is None and h[1] == want:
            found = (i, h[0])
        elif found is not None and h[0] <= found[1]:
            end = i
            break
    if found is None:
        raise InvalidRequest(f"no heading {want!r} in the body",
                             {"headings": headings(body)[:50]})
    at = end
    while at > found[0] + 1 and lines[at - 1].strip() == "":
        at -= 1  # before the blank lines that close the section
    if at > 0 and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"
    new = _as_lines(text)
    return Edited("".join(lines[:at] + new + lines[at:]), at + 1, len(new), "append_under")


def numbered(body: str, start: int, count: int) -> tuple[list[dict[str, Any]], int]:
    """Lines ``start``..``start+count-1`` of ``body`` as ``{"n", "text"}`` (without line
    ends), and the body's line count."""
    lines = body.splitlines()
    return ([{"n": i + 1, "text": lines[i]} for i in range(start - 1, min(len(lines),
                                                                        start - 1 + count))],
            len(lines))


# ---------------------------------------------------------------- links

def wikilink_target(source: str, name: str, known: set[str]) -> str | None:
    """The entry a ``[[name]]`` in ``source`` means (shared/links.py ``resolve_wikilink``:
    the id as written, else next to the source, else the shortest path ending with the
    name, case-insensitively). None when nothing matches."""
    return links.resolve_wikilink(source, name, links.Names(known))


def md_link_target(source: str, href: str) -> str | None:
    """The entry a relative Markdown link ``href`` (``../page/x.md``, ``x.md``, ``/page/x.md``)
    in ``source`` points to (shared/links.py ``resolve_markdown``)."""
    from urllib.parse import unquote

    return links.resolve_markdown(source, unquote(href))


def links_of(entry: Entry, known: set[str]) -> list[dict[str, str]]:
    """Every link ``entry`` makes, once per target and the first way found: ``via``
    ``links`` (the field), ``wikilink`` or ``markdown`` (in the body: shared/links.py)."""
    out: dict[str, str] = {}
    for target in entry.links:
        out.setdefault(target, "links")
    for target, via in links.targets(entry.id, entry.body, links.Names(known)):
        out.setdefault(target, via)
    return [{"id": k, "via": v} for k, v in out.items()]


# ---------------------------------------------------------------- search queries


@dataclass(frozen=True)
class Query:
    """OR of groups; a group matches when every one of its terms (a word or a phrase, both
    lowercase) occurs."""

    groups: tuple[tuple[str, ...], ...]

    @property
    def terms(self) -> list[str]:
        return [t for g in self.groups for t in g]


def parse_query(text: str) -> Query:
    """``deploy "blue button" OR rollback``: words and double-quoted phrases, all of a
    group required; ``OR`` (upper case) between groups. Refuses an empty group, an
    unclosed quote and more than 8 groups or 16 terms."""
    tokens: list[tuple[str, bool]] = []  # (text, quoted)
    for m in re.finditer(r'"([^"]*)"|(\S+)', text):
        if m.group(1) is not None:
            phrase = " ".join(m.group(1).split()).lower()
            if phrase:
                tokens.append((phrase, True))
        else:
            tokens.append((m.group(2), False))
    if text.count('"') % 2:
        raise InvalidRequest('an unclosed " in the query: phrases are "in double quotes"')
    groups: list[list[str]] = [[]]
    for tok, quoted in tokens:
        if tok == "OR" and not quoted:
            groups.append([])
        else:
            groups[-1].append(tok.lower() if not quoted else tok)
    if any(not g for g in groups):
        raise InvalidRequest("each side of OR needs at least one word or phrase")
    if len(groups) > MAX_QUERY_GROUPS or sum(len(g) for g in groups) > MAX_QUERY_TERMS:
        raise InvalidRequest(f"at most {MAX_QUERY_GROUPS} OR groups and "
                             f"{MAX_QUERY_TERMS} words or phrases")
    return Query(tuple(tuple(g) for g in groups))


def score(q: Query, entry_id: str, title: str, tags: Iterable[str], body: str) -> int:
    """0 when no group matches, else the best group's score (title 5, tags 3, body 1 per
    occurrence, id 2); all text compared lowercase, phrases with whitespace folded."""
    t, g, b = title.lower(), " ".join(tags).lower(), body.lower()
    b_folded: str | None = None
    best = 0
    for group in q.groups:
        total = 0
        for term in group:
            hay_b = b
            if " " in term:
                if b_folded is None:
                    b_folded = " ".join(b.split())
                hay_b = b_folded
            n = 5 * t.count(term) + 3 * g.count(term) + hay_b.count(term) \
                + 2 * (term in entry_id)
            if n == 0:
                total = 0
                break
            total += n
        best = max(best, total)
    return best
