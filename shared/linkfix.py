"""Links that point to a renamed page, rewritten to its new name (docs/decisions.md D132 part
6, D145). Pure: ``quire links fix OLD NEW`` (replica/app/backlinks.py) calls it for each page
that links to OLD, and a rename may call it for the pages its move leaves pointing nowhere.

    a page's text + its id + OLD + NEW + the space's ids before the move
        --rewrite()--> the text with each link that resolved to OLD naming NEW, and the count

Only the target changes: ``[[Old]]`` becomes ``[[New]]``, ``[[Old#Part|see]]`` keeps its
heading and alias (``[[New#Part|see]]``), ``![[Old]]`` stays an embed, a Markdown link keeps
its text, heading and title and is written relative to the page as before (``<…>`` kept,
``%20`` for spaces where the link had no brackets). A wikilink written as a bare name stays
a bare name when that name finds NEW after the move (shared/links.py rules), else it names
the whole path. Links in code (fenced blocks, inline spans) and every other byte (front
matter, CRLF line ends, a byte-order mark) are left as they are.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from urllib.parse import unquote

from shared import links
from shared.links import Names

_WIKI = re.compile(r"(!?\[\[)([^\[\]\n|#]*)((?:#[^\[\]\n|]*)?(?:\|[^\[\]\n]*)?\]\])")
_MDLINK = re.compile(r"(\]\()(?:<([^<>\n]+?\.md)((?:#[^<>\n]*)?)>|([^()\s<>]+?\.md)"
                     r"((?:#[^()\s]*)?))((?:\s+\"[^\"\n]*\")?\))")
_NEEDS_BRACKETS = re.compile(r"[()<>\s]")


def _spans(line: str) -> list[tuple[int, int]]:
    return [m.span() for m in links.CODE_SPAN.finditer(line)] if "`" in line else []


def _outside(spans: list[tuple[int, int]], start: int) -> bool:
    return not any(a <= start < b for a, b in spans)


def _wiki_name(source: str, written: str, new: str, after: Names) -> str:
    if "/" not in written.strip("/"):
        tail = new.rsplit("/", 1)[-1]
        if links.resolve_wikilink(source, tail, after) == new:
            return tail
    return new


def _md_href(source: str, written: str, new: str, bracketed: bool) -> str:
    if written.startswith("/"):
        href = "/" + new + ".md"
    else:
        href = posixpath.relpath(new + ".md", posixpath.dirname(source) or ".")
    if bracketed or _NEEDS_BRACKETS.sub("", href.replace(" ", "")) != href.replace(" ", ""):
        return "<" + href + ">"
    return href.replace(" ", "%20")


def rewrite(source: str, text: str, old: str, new: str, names: Names) -> tuple[str, int]:
    """``text`` of page ``source`` with every link that resolves to ``old`` (among
    ``names``, the ids before the move) naming ``new``; and how many were rewritten."""
    after = Names((set(names.ids) - {old}) | {new})
    count = 0

    def sub(pattern: re.Pattern[str], line: str, fix: Callable[[re.Match[str]], str | None]
            ) -> str:
        nonlocal count
        spans = _spans(line)
        out, pos = [], 0
        for m in pattern.finditer(line):
            if not _outside(spans, m.start()):
                continue
            done = fix(m)
            if done is not None:
                out.append(line[pos:m.start()] + done)
                pos = m.end()
                count += 1
        return "".join(out) + line[pos:]

    def wiki(m: re.Match[str]) -> str | None:
        written = m.group(2)
        if not written.strip() or links.resolve_wikilink(source, written, names) != old:
            return None
        return m.group(1) + _wiki_name(source, written, new, after) + m.group(3)

    def markdown(m: re.Match[str]) -> str | None:
        bracketed = m.group(2) is not None
        written = m.group(2) if bracketed else m.group(4)
        if "://" in written or links.resolve_markdown(source, unquote(written)) != old:
            return None
        heading = m.group(3) if bracketed else m.group(5)
        href = _md_href(source, unquote(written), new, bracketed)
        if href.startswith("<"):
            return m.group(1) + href[:-1] + heading + ">" + m.group(6)
        return m.group(1) + href + heading + m.group(6)

    if "[[" not in text and ".md" not in text:
        return text, 0
    lines = text.splitlines(keepends=True)
    for i in links.prose(lines):
        line = lines[i]
        if "[[" in line:
            line = sub(_WIKI, line, wiki)
        if ".md" in line:
            line = sub(_MDLINK, line, markdown)
        lines[i] = line
    return "".join(lines), count
