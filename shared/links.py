"""The links a page makes, read from its body, and what each one points to (docs/decisions.md
D132 part 6, D139). Pure: the replica (its MCP ``links`` tool and backlinks,
replica/app/page_text.py) and anything else that reads links call this one parser.

    body --parse()--> Link(target, heading, alias, via)      as written, in order
    Link + source id + the space's ids --resolve()--> an entry id, or None (dangling)

Forms: ``[[Note]]``, ``[[Note|alias]]``, ``[[Note#heading]]``, ``[[Folder/Note]]``,
``![[Note]]`` (an embed), and relative Markdown links ``[text](../Notes/Plan.md)``,
``[text](<Release Plan.md>)``, ``[text](Release%20Plan.md#part)``. Links inside fenced code
blocks and inline code are not links (as Obsidian reads them).

A wikilink resolves as Obsidian resolves it: the id as written (a path from the vault's
root), else the same name next to the source (``../`` allowed), else the entries whose
path ends with the name, compared ignoring case and Unicode normalization, the one with
the shortest path first (then by id). A Markdown link is a path relative to the source's
folder (or to the root with a leading ``/``) and must name an entry exactly.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import unquote

from shared.ids import entry_id_problem
from shared.names import fold

WIKILINK = "wikilink"
MARKDOWN = "markdown"

_WIKI = re.compile(r"!?\[\[([^\[\]\n|#]*)(?:#([^\[\]\n|]*))?(?:\|([^\[\]\n]*))?\]\]")
_MDLINK = re.compile(r"\]\((?:<([^<>\n]+?\.md)(?:#([^<>\n]*))?>|([^()\s<>]+?\.md)(?:#([^()\s]*))?)"
                     r"(?:\s+\"[^\"\n]*\")?\)")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")


@dataclass(frozen=True)
class Link:
    target: str  # as written: a name or path (wikilink) or an href, decoded (markdown)
    heading: str | None = None
    alias: str | None = None
    via: str = WIKILINK


def prose(lines: list[str]) -> Iterator[int]:
    """The indexes of ``lines`` outside fenced code (shared/linkfix.py rewrites those)."""
    fence: str | None = None
    for i, line in enumerate(lines):
        m = FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield i


def _prose(body: str) -> Iterable[str]:
    """The lines of ``body`` outside fenced code, with inline code blanked."""
    lines = body.splitlines()
    for i in prose(lines):
        line = lines[i]
        yield CODE_SPAN.sub(lambda c: " " * len(c.group(0)), line) if "`" in line else line


def parse(body: str) -> list[Link]:
    """Every link of ``body``, in order (repeats kept)."""
    out: list[Link] = []
    if "[[" not in body and ".md" not in body:
        return out
    for line in _prose(body):
        if "[[" in line:
            for m in _WIKI.finditer(line):
                name = m.group(1).strip()
                if name or m.group(2):
                    out.append(Link(name, (m.group(2) or "").strip() or None,
                                    m.group(3).strip() if m.group(3) is not None else None))
        if ".md" in line:
            for m in _MDLINK.finditer(line):
                href = m.group(1) or m.group(3)
                heading = m.group(2) if m.group(1) else m.group(4)
                if "://" in href or href.startswith("mailto:"):
                    continue
                out.append(Link(unquote(href), unquote(heading) if heading else None,
                                None, MARKDOWN))
    return out


class Names:
    """The space's entry ids, indexed for resolving wikilinks (by folded last segment)."""

    def __init__(self, ids: Iterable[str]):
        self.ids = ids if isinstance(ids, (set, frozenset)) else set(ids)
        self._tails: dict[str, list[str]] | None = None

    def by_tail(self, name: str) -> list[str]:
        if self._tails is None:
            tails: dict[str, list[str]] = {}
            for eid in self.ids:
                tails.setdefault(fold(eid.rsplit("/", 1)[-1]), []).append(eid)
            self._tails = tails
        return self._tails.get(fold(name.rsplit("/", 1)[-1]), [])


def resolve_wikilink(source: str, name: str, names: Names) -> str | None:
    """The entry ``[[name]]`` in ``source`` points to, or None (dangling)."""
    name = unicodedata.normalize("NFC", name.strip()).removesuffix(".md").strip("/")
    if not name:
        return None
    if name in names.ids:
        return name
    folder = posixpath.dirname(source)
    if folder:
        near = posixpath.normpath(posixpath.join(folder, name))
        if near in names.ids:
            return near
    want = fold(name)
    hits = [eid for eid in names.by_tail(name)
            if fold(eid) == want or fold(eid).endswith("/" + want)]
    return min(hits, key=lambda e: (e.count("/"), len(e), e)) if hits else None


def resolve_markdown(source: str, href: str) -> str | None:
    """The entry a relative Markdown link ``href`` in ``source`` names (``../page/x.md``,
    ``x.md``, ``/page/x.md``), or None when it leaves the vault or is no entry id."""
    if "://" in href or href.startswith(("mailto:", "#")):
        return None
    if href.startswith("/"):
        path = posixpath.normpath(href.lstrip("/"))
    else:
        path = posixpath.normpath(posixpath.join(posixpath.dirname(source), href))
    if path.startswith("..") or not path.endswith(".md"):
        return None
    eid = unicodedata.normalize("NFC", path[:-3])
    return None if entry_id_problem(eid) else eid


def resolve(source: str, link: Link, names: Names) -> str | None:
    if link.via == MARKDOWN:
        return resolve_markdown(source, link.target)
    if not link.target:  # [[#heading]]: the page itself
        return None
    return resolve_wikilink(source, link.target, names)


def targets(source: str, body: str, names: Names) -> list[tuple[str, str]]:
    """(entry id, via) of each entry ``body`` links to, once each, in order; dangling
    links and links to ``source`` itself left out."""
    out: dict[str, str] = {}
    for link in parse(body):
        t = resolve(source, link, names)
        if t is not None and t != source:
            out.setdefault(t, link.via)
    return list(out.items())


def dangling(source: str, body: str, names: Names) -> list[Link]:
    """The links of ``body`` that point to no entry (``quire sync`` may report them)."""
    return [link for link in parse(body) if link.target and (
        resolve(source, link, names) is None
        or (link.via == MARKDOWN and resolve(source, link, names) not in names.ids))]
