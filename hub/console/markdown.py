"""An entry's Markdown body as safe HTML for the console (docs/console.md, "Rendered pages").

    render(body, source, space, resolve)
      1. parse with markdown-it-py, CommonMark plus tables and strikethrough, raw HTML OFF:
         ``<script>`` in a body is text, never a tag; its link check on (a
         ``javascript:``, ``vbscript:``, ``file:`` or ``data:`` link stays text)
      2. find ``[[wiki links]]`` (an inline rule of ours); ``resolve(names)`` says which
         name is which live entry (hub/wikilinks.py, the replica's rules)
      3. render: headings one level down (the page's title is the h1), a resolved wiki
         link or relative ``.md`` link as a link to that entry in the console, an
         unresolved one as plain text, an image as a link to it (the CSP loads no image
         from elsewhere)
      4. sanitize the HTML with nh3 (ammonia) by an allow-list: only the tags and
         attributes below; links only http, https, mailto or relative, each with
         ``rel="noopener nofollow ugc"``; no style, no id, no event handler, no comment

Step 4 holds even if steps 1–3 had a bug: whatever the renderer emits, what reaches the
browser is in the allow-list. And the page's Content-Security-Policy runs no script at all
(hub/console/http.py), with a report endpoint (hub/console/csp_reports.py) that counts what
the browser blocked. A body over ``MAX_RENDERED`` is shown as text, unrendered.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import nh3
from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from markupsafe import Markup, escape

MAX_RENDERED = 512 * 1024  # characters; a longer body is shown as text
MAX_WIKILINKS = 200  # distinct names resolved per page; past it, shown as text

TAGS = {"p", "br", "hr", "h2", "h3", "h4", "h5", "h6", "em", "strong", "del", "s", "code",
        "pre", "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th",
        "td", "span"}
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
CLASSES = {"a": {"wikilink"}, "span": {"wikilink-missing"}}
SCHEMES = {"http", "https", "mailto"}
REL = "noopener nofollow ugc"

_WIKI = re.compile(r"\[\[([^\[\]\n|#]+)(?:#([^\[\]\n|]*))?(?:\|([^\[\]\n]*))?\]\]")
_CLEANER = nh3.Cleaner(tags=TAGS, attributes=ATTRIBUTES, allowed_classes=CLASSES,
                       url_schemes=SCHEMES, link_rel=REL, strip_comments=True,
                       clean_content_tags={"script", "style"})

Resolve = Callable[[set[str]], dict[str, str]]


def _wikilink(state: StateInline, silent: bool) -> bool:
    """``[[name]]``, ``[[name|label]]``, ``[[name#heading]]`` as one ``wikilink`` token."""
    if not state.src.startswith("[[", state.pos):
        return False
    m = _WIKI.match(state.src, state.pos)
    if m is None:
        return False
    if not silent:
        token = state.push("wikilink", "", 0)
        token.meta = {"name": m.group(1).strip(), "label": (m.group(3) or "").strip()}
        token.content = m.group(0)
    state.pos = m.end()
    return True


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.inline.ruler.before("link", "wikilink", _wikilink)
    return md


_MD = _parser()


def _names(tokens: list[Any]) -> set[str]:
    out: set[str] = set()
    for t in tokens:
        for c in t.children or ():
            if c.type == "wikilink" and len(out) < MAX_WIKILINKS:
                out.add(c.meta["name"].removesuffix(".md"))
    return out


def entry_href(space: str, entry_id: str) -> str:
    return f"/console/spaces/{quote(space, safe='')}/entry?id={quote(entry_id, safe='/')}"


def md_link_target(source: str, href: str) -> str | None:
    """The entry a relative ``.md`` link in ``source`` points to (``../skill/x.md``,
    ``x.md``, ``/page/x.md``), as the replica reads it; None for anything else."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or not parts.path.endswith(".md"):
        return None
    path = unquote(parts.path)
    if path.startswith("/"):
        path = posixpath.normpath(path.lstrip("/"))
    else:
        path = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
    return None if path.startswith("..") else path[:-3]


def render(body: str, source: str, space: str, resolve: Resolve) -> Markup:
    """``body`` (the Markdown of entry ``source`` in ``space``) as sanitized HTML."""
    if len(body) > MAX_RENDERED:
        return Markup('<pre class="body">{}</pre>').format(body)
    env: dict[str, Any] = {}
    tokens = _MD.parse(body, env)
    names = _names(tokens)
    found = resolve(names) if names else {}

    for t in tokens:
        if t.type in ("heading_open", "heading_close"):  # the page's h1 is the title
            t.tag = f"h{min(6, int(t.tag[1]) + 1)}"
        for c in t.children or ():
            if c.type == "link_open":
                href = str(c.attrGet("href") or "")
                target = md_link_target(source, href)
                if target is not None:
                    c.attrSet("href", entry_href(space, target))

    env["quire_found"], env["quire_space"] = found, space
    return Markup(_CLEANER.clean(str(_MD.renderer.render(tokens, _MD.options, env))))


def _render_wikilink(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    meta = tokens[idx].meta
    label = meta["label"] or meta["name"]
    target = env["quire_found"].get(meta["name"].removesuffix(".md"))
    if target is None:
        return str(Markup('<span class="wikilink-missing">{}</span>').format(label))
    return str(Markup('<a class="wikilink" href="{}">{}</a>').format(
        entry_href(env["quire_space"], target), label))


def _render_image(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    t = tokens[idx]
    alt = "".join(c.content for c in t.children or ()) or "image"
    return str(Markup('<a href="{}">{}</a>').format(t.attrGet("src") or "", f"image: {alt}"))


_MD.add_render_rule("wikilink", _render_wikilink)
_MD.add_render_rule("image", _render_image)


def text(value: str) -> Markup:
    """Escaped text (for the unrendered view)."""
    return Markup(escape(value))
