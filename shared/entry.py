"""The entry model (docs/architecture.md, "Entries and versions") and its two encodings:
canonical JSON (for the version) and vault form (Markdown with YAML front matter, for people
and agents).

An entry's ``version`` is the SHA-256 of its canonical JSON. A deletion is a tombstone with
its own version, so history keeps it. Reading a vault file and writing it back unchanged
gives the same version (tested by round-trip tables).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace
from typing import Any

from shared.canonical import (
    CanonicalError,
    _fast_dumps,
    _fast_ok,
    canonical_bytes,
    has_lone_surrogate,
)
from shared.digest import sha256_hex
from shared.ids import entry_id_problem, is_entry_id, split_entry_id
from shared.kinds import GUARDRAIL, effective_kind

SEVERITIES = ("info", "warn", "block")
MAX_TITLE = 500
MAX_TAGS = 64
MAX_TAG_LEN = 64
MAX_LINKS = 256
MAX_META_BYTES = 16 * 1024
DEFAULT_MAX_BODY = 1024 * 1024
_TAG_RE = re.compile(r"^[^\s,\[\]{}#][^\s,\[\]{}]*$")
FRONT_KEYS = ("title", "tags", "links", "meta")
LOCAL_KEY = "quire"  # replica-local markers in front matter; never part of the entry


class EntryError(ValueError):
    """An entry that is not valid; ``line`` is set when it came from a vault file, ``key``
    names the field at fault (``meta.severity``, ``tags[2]``) when there is one."""

    def __init__(self, message: str, line: int | None = None, key: str | None = None):
        super().__init__(message)
        self.line = line
        self.key = key


@dataclass(frozen=True)
class Entry:
    id: str
    title: str = ""
    body: str = ""
    tags: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    deleted: bool = False
    # the file as its author wrote it (BOM, CR/LF, front matter style; D150), when that is
    # not the canonical vault form of the fields above, which are what it parses to
    raw: str | None = None

    @property
    def kind(self) -> str:
        """The effective kind (shared/kinds.py): front matter ``kind:``, else the folder."""
        return effective_kind(self.id, self.meta)

    @property
    def slug(self) -> str:
        return split_entry_id(self.id)[1]

    def to_dict(self) -> dict[str, Any]:
        """The canonical content (what the version is computed over)."""
        if self.deleted:
            return {"id": self.id, "deleted": True}
        d = {
            "id": self.id,
            "title": self.title,
            "body": self.body,
            "tags": list(self.tags),
            "links": list(self.links),
            "meta": self.meta,
        }
        if self.raw is not None:  # absent otherwise: versions without raw never change
            d["raw"] = self.raw
        return d

    @property
    def version(self) -> str:
        # frozen, so computed once: versions are asked for on every hot path
        cached = self.__dict__.get("_version")
        if cached is None:
            cached = sha256_hex(canonical_bytes(self.to_dict()))
            object.__setattr__(self, "_version", cached)
        return cached

    def __hash__(self) -> int:  # meta is a dict; hash on the version
        return hash(self.version)


def validated_canonical_bytes(e: Entry) -> bytes:
    """The canonical JSON of an entry made by ``make_entry`` (its version is the SHA-256 of
    it), walking only ``meta``: title, body, tags and links are strings by then, so the
    standard encoder's output is canonical when ``meta`` qualifies and nothing holds a lone
    surrogate (the UTF-8 encoding fails on one; the full path then names it)."""
    d = e.to_dict()
    if e.deleted or _fast_ok(e.meta):
        try:
            return _fast_dumps(d).encode("utf-8")
        except UnicodeEncodeError:
            pass
    return canonical_bytes(d)


def tombstone(entry_id: str) -> Entry:
    return Entry(id=entry_id, deleted=True)


def _check_json_value(v: Any, where: str) -> None:
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return
    if isinstance(v, int):
        return
    if isinstance(v, float):
        raise EntryError(f"{where}: numbers with a fraction are not allowed; quote it as a string",
                         key=where)
    if isinstance(v, list):
        for i, x in enumerate(v):
            _check_json_value(x, f"{where}[{i}]")
        return
    if isinstance(v, dict):
        for k, x in v.items():
            if not isinstance(k, str):
                raise EntryError(f"{where}: keys must be strings", key=where)
            _check_json_value(x, f"{where}.{k}")
        return
    raise EntryError(f"{where}: unsupported value of type {type(v).__name__}", key=where)


def make_entry(data: Any, *, max_body: int = DEFAULT_MAX_BODY,
               text_len: int | None = None) -> Entry:
    """Validate a wire/dict form and return the normalized Entry (sets sorted, deduplicated).

    Raises EntryError with a message a person can act on. ``text_len``: the length in bytes
    of the JSON text ``data`` was parsed from, when the caller has it (a snapshot line):
    the canonical form of ``meta`` is never longer than any JSON text of the same value
    (no whitespace; no escape longer than the JSON text's own; integers only), so under
    ``MAX_META_BYTES`` the size needs no encoding to check.
    """
    if not isinstance(data, dict):
        raise EntryError("entry must be an object")
    allowed = {"id", "title", "body", "tags", "links", "meta", "deleted", "raw"}
    unknown = set(data) - allowed
    if unknown:
        raise EntryError(f"unknown entry fields: {', '.join(sorted(unknown))}")
    entry_id = data.get("id")
    problem = entry_id_problem(entry_id)
    if problem or not isinstance(entry_id, str):
        raise EntryError(f"invalid entry id {entry_id!r}: {problem}")
    if data.get("deleted") is True:
        if set(data) - {"id", "deleted"}:
            raise EntryError("a tombstone carries only id and deleted")
        return tombstone(entry_id)
    if "deleted" in data and data["deleted"] is not False:
        raise EntryError("deleted must be true or absent")
    if "raw" in data:
        return _from_raw(entry_id, data, max_body)
    title = data.get("title", "")
    body = data.get("body", "")
    if not isinstance(title, str) or len(title) > MAX_TITLE or "\n" in title:
        raise EntryError(f"title must be one line of at most {MAX_TITLE} characters",
                         key="title")
    if not isinstance(body, str):
        raise EntryError("body must be a string")
    try:
        body_len, body_ok = len(body.encode("utf-8")), True
    except UnicodeEncodeError:  # a lone surrogate: refused below, after the size
        body_len, body_ok = len(body.encode("utf-8", "surrogatepass")), False
    if body_len > max_body:
        raise EntryError(f"body larger than {max_body} bytes")
    tags = data.get("tags", [])
    if not isinstance(tags, list) or len(tags) > MAX_TAGS:
        raise EntryError(f"tags must be a list of at most {MAX_TAGS} strings", key="tags")
    for i, t in enumerate(tags):
        if not isinstance(t, str) or not t or len(t) > MAX_TAG_LEN or not _TAG_RE.match(t):
            raise EntryError(f"invalid tag {t!r}: no spaces, commas or brackets, at most "
                             f"{MAX_TAG_LEN}", key=f"tags[{i}]")
    links = data.get("links", [])
    if not isinstance(links, list) or len(links) > MAX_LINKS:
        raise EntryError(f"links must be a list of at most {MAX_LINKS} entry ids", key="links")
    for i, link in enumerate(links):
        if not is_entry_id(link):
            raise EntryError(f"invalid link {link!r}: links are entry ids (vault paths "
                             "without .md)",
                             key=f"links[{i}]")
    meta = data.get("meta", {})
    if not isinstance(meta, dict):
        raise EntryError("meta must be an object", key="meta")
    _check_json_value(meta, "meta")
    try:
        if (text_len is None or text_len > MAX_META_BYTES) and len(
                canonical_bytes(meta)) > MAX_META_BYTES:
            raise EntryError(f"meta larger than {MAX_META_BYTES} bytes", key="meta")
        # a string has a canonical form unless it holds a lone surrogate, which is exactly
        # when it does not encode as UTF-8 (cheaper than making the form to find out)
        if not body_ok or has_lone_surrogate(title):
            raise CanonicalError("lone surrogate in string")
    except CanonicalError as e:
        raise EntryError(str(e)) from e
    if "severity" in meta and effective_kind(entry_id, meta) == GUARDRAIL \
            and meta["severity"] not in SEVERITIES:
        raise EntryError("meta.severity must be one of info, warn, block", key="meta.severity")
    return Entry(
        id=entry_id,
        title=title,
        body=body,
        tags=tuple(sorted(set(tags))),
        links=tuple(sorted(set(links))),
        meta=meta,
    )


STRUCTURED = ("title", "body", "tags", "links", "meta")
MAX_FRONT_BYTES = 64 * 1024  # what raw may hold beyond the body: BOM, fences, front matter


def _from_raw(entry_id: str, data: dict[str, Any], max_body: int) -> Entry:
    """An entry given as its file's text: the structured fields are what ``raw`` parses to,
    on every side. Fields the sender also gave must be exactly those: a batch whose fields
    say one thing (``severity: block``, judged by the guard) and whose raw another (what
    every vault writes) is refused."""
    raw = data["raw"]
    if not isinstance(raw, str):
        raise EntryError("raw must be a string (the file's text, UTF-8)", key="raw")
    if len(raw) > max_body + MAX_FRONT_BYTES and len(
            raw.encode("utf-8", "surrogatepass")) > max_body + MAX_FRONT_BYTES:
        raise EntryError(f"raw larger than the body limit ({max_body} bytes) and "
                         f"{MAX_FRONT_BYTES} bytes of front matter")
    if has_lone_surrogate(raw):
        raise EntryError("raw: lone surrogate in string", key="raw")
    try:
        parsed, local = parse_markdown(entry_id, raw, max_body=max_body)
    except EntryError as e:
        raise EntryError(f"raw, line {e.line}: {e}", line=e.line, key=e.key) from e
    if local:
        raise EntryError(f"raw: front matter key '{LOCAL_KEY}' is reserved for Quire",
                         key=LOCAL_KEY)
    given = {k: data[k] for k in STRUCTURED if k in data}
    if given:
        claimed = make_entry({"id": entry_id, **given}, max_body=max_body).to_dict()
        parsed_d = parsed.to_dict()
        wrong = [k for k in STRUCTURED if claimed[k] != parsed_d[k]]
        if wrong:
            raise EntryError("the entry's fields are not what its raw text parses to ("
                             + ", ".join(wrong) + "): fields are derived from raw",
                             key=wrong[0])
    return replace(parsed, raw=raw)


def raw_head(e: Entry) -> str:
    """What comes before the body in ``e.raw`` (BOM, fences, front matter as written)."""
    assert e.raw is not None and e.raw.endswith(e.body)
    return e.raw[: len(e.raw) - len(e.body)]


def edited(e: Entry, **changes: Any) -> Entry:
    """``e`` with some fields changed, validated. An entry with ``raw`` keeps its file's
    front matter as written when only the body changes; any other change renders the
    fields in canonical vault form (raw dropped), as a file written by Quire is."""
    d = dict(e.to_dict(), **changes)
    d.pop("raw", None)
    if e.raw is not None and set(changes) <= {"body"}:
        return make_entry({"id": e.id, "raw": raw_head(e) + d["body"]})
    return make_entry(d)


# ---------------------------------------------------------------- vault form


@functools.cache
def _yaml() -> tuple[Any, Any, Any]:
    """(yaml, its safe loader without implicit timestamps, its safe dumper), made at the
    first use: a command that reads and writes no Markdown (a no-op sync, a status) does
    not import yaml (~15-45 ms; D141)."""
    import yaml

    class _Loader(yaml.SafeLoader):
        """Safe YAML without implicit timestamps: dates stay strings, as people wrote them."""

    _Loader.yaml_implicit_resolvers = {
        k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
        for k, v in yaml.SafeLoader.yaml_implicit_resolvers.copy().items()
    }

    class _Dumper(yaml.SafeDumper):
        pass

    def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data)

    _Dumper.add_representer(str, _str_representer)
    return yaml, _Loader, _Dumper


def _dump(value: Any) -> str:
    yaml, _, dumper = _yaml()
    return str(yaml.dump(value, Dumper=dumper, sort_keys=True, allow_unicode=True,
                         default_flow_style=False, width=1 << 30))


def load_front(text: str) -> Any:
    """YAML ``text`` as front matter reads it (safe, dates kept as strings); raises
    EntryError when it is not valid YAML."""
    yaml, loader, _ = _yaml()
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as e:
        raise EntryError(f"front matter is not valid YAML: {e}") from e


def dump_front(value: dict[str, Any], *, flow: bool = False) -> str:
    """``value`` as block-style YAML, as the canonical vault form writes it (``flow``: its
    lists and mappings in flow style, ``[a, b]``)."""
    if not flow:
        return _dump(value)
    yaml, _, dumper = _yaml()
    return str(yaml.dump(value, Dumper=dumper, sort_keys=False, allow_unicode=True,
                         default_flow_style=None, width=1 << 30))


def to_markdown(entry: Entry, local: dict[str, Any] | None = None) -> str:
    """Vault form. ``local`` adds replica-local markers under the ``quire`` key."""
    if entry.deleted:
        raise EntryError("a tombstone has no vault form")
    if entry.raw is not None:  # the file as its author wrote it
        return with_local(entry.raw, local) if local else entry.raw
    # title first: it is what a person looks for when opening the file
    front: dict[str, Any] = {}
    if entry.tags:
        front["tags"] = list(entry.tags)
    if entry.links:
        front["links"] = list(entry.links)
    if entry.meta:
        front["meta"] = entry.meta
    text = "---\n" + _dump({"title": entry.title}) + (_dump(front) if front else "")
    if local:
        text += _dump({LOCAL_KEY: local})
    return text + "---\n" + entry.body


_FENCE = re.compile(r"^---[ \t]*\r?$")


@dataclass(frozen=True)
class Split:
    """A vault file's text in parts: ``bom + front + body`` is the text; ``front`` is the
    front matter with both fence lines ('' when there is none), ``lines`` its lines between
    the fences (each with its line end)."""

    bom: str
    front: str
    lines: tuple[str, ...]
    body: str

    @property
    def newline(self) -> str:
        return "\r\n" if self.front.startswith("---\r\n") else "\n"


def split_text(text: str) -> Split:
    """Split a vault file's text (raises EntryError when its front matter is not closed)."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    text = text[len(bom):]
    if not (text.startswith("---\n") or text.startswith("---\r\n") or text == "---"):
        return Split(bom, "", (), text)
    lines = text.splitlines(keepends=True)
    for i in range(1, len(lines)):
        if _FENCE.match(lines[i].rstrip("\n")):
            front = "".join(lines[: i + 1])
            return Split(bom, front, tuple(lines[1:i]), text[len(front):])
    raise EntryError("front matter is not closed by a '---' line", line=1)


def with_local(text: str, local: dict[str, Any]) -> str:
    """``text`` with replica-local markers (``quire:``) as the last key of its front matter
    (a front matter added when it has none); ``without_local`` takes them out again."""
    sp = split_text(text)
    block = _dump({LOCAL_KEY: local}).replace("\n", sp.newline)
    if not sp.front:
        return sp.bom + "---\n" + block + "---\n" + sp.body
    head = sp.front[: len(sp.front) - len(sp.front.splitlines(keepends=True)[-1])]
    return sp.bom + head + block + sp.front[len(head):] + sp.body


def without_local(text: str) -> str:
    """``text`` without the ``quire:`` key of its front matter (a top-level key and the
    indented lines under it), and without the front matter when nothing else was in it."""
    sp = split_text(text)
    kept: list[str] = []
    inside = False
    for line in sp.lines:
        if line.startswith(LOCAL_KEY + ":"):
            inside = True
            continue
        if inside and line[:1] in (" ", "\t"):
            continue
        inside = False
        kept.append(line)
    if not kept:
        return sp.bom + sp.body
    first = sp.front.splitlines(keepends=True)
    return sp.bom + first[0] + "".join(kept) + first[-1] + sp.body


def parse_markdown(entry_id: str, text: str, *, max_body: int = DEFAULT_MAX_BODY
                   ) -> tuple[Entry, dict[str, Any]]:
    """Parse vault form into (entry, local markers). Raises EntryError with a line number.

    Unknown front-matter keys (say ``aliases`` from another editor) are kept under ``meta``.
    """
    if text.startswith("\ufeff"):  # a byte-order mark (Windows editors): not content, and
        text = text[1:]  # before it the front matter's fence would not be seen
    front: dict[str, Any] = {}
    body, raw = text, ""
    if text.startswith("---\n") or text.startswith("---\r\n") or text == "---":
        lines = text.splitlines(keepends=True)
        end = None
        for i in range(1, len(lines)):
            if _FENCE.match(lines[i].rstrip("\n")):
                end = i
                break
        if end is None:
            raise EntryError("front matter is not closed by a '---' line", line=1)
        raw = "".join(lines[1:end])
        yaml, loader, _ = _yaml()
        try:
            loaded = yaml.load(raw, Loader=loader) if raw.strip() else {}
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            line = (mark.line + 2) if mark is not None else 1
            reason = getattr(e, "problem", None) or str(e)
            raise EntryError(f"front matter is not valid YAML: {reason}", line=line) from e
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise EntryError("front matter must be a mapping of keys to values", line=2)
        front = loaded
        body = "".join(lines[end + 1:])
    try:
        return _entry_from_front(entry_id, front, body, max_body)
    except EntryError as e:
        # find the line of the key at fault only now: valid files never pay for it
        line = _key_line(raw, e.key) if e.key else None
        raise EntryError(str(e), line=line or e.line or 2, key=e.key) from e


def _entry_from_front(entry_id: str, front: dict[str, Any], body: str, max_body: int
                      ) -> tuple[Entry, dict[str, Any]]:
    local = front.pop(LOCAL_KEY, None) or {}
    if not isinstance(local, dict):
        raise EntryError(f"front matter key '{LOCAL_KEY}' is reserved for Quire", key=LOCAL_KEY)
    meta = front.pop("meta", None)
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise EntryError("meta must be a mapping", key="meta")
    meta = dict(meta)
    for k in [k for k in front if k not in FRONT_KEYS]:
        if not isinstance(k, str):
            raise EntryError("front matter keys must be strings")
        if k in meta:
            raise EntryError(f"front matter key {k!r} is also in meta", key=k)
        meta[k] = front.pop(k)
    title = front.get("title", "")
    if title is None:
        title = ""
    if not isinstance(title, str):
        title = str(title) if isinstance(title, (int, bool)) else title
    data = {
        "id": entry_id,
        "title": title,
        "body": body,
        "tags": front.get("tags") or [],
        "links": front.get("links") or [],
        "meta": meta,
    }
    return make_entry(data, max_body=max_body), local


_PATH_PART = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def _key_line(raw: str, key: str) -> int | None:
    """The file line (front matter starts on line 2) of ``key`` (``meta.severity``,
    ``tags[2]``) in the front matter ``raw``; the closest enclosing key found, else None.
    Unknown top-level keys are kept under ``meta``, so ``meta.X`` is also looked up as ``X``."""
    yaml, loader, _ = _yaml()
    try:
        node = yaml.compose(raw, Loader=loader)
    except yaml.YAMLError:
        return None
    parts: list[str | int] = [m.group(1) if m.group(1) is not None else int(m.group(2))
                              for m in _PATH_PART.finditer(key)]
    best = _walk(node, parts)
    if parts[:1] == ["meta"] and len(parts) > 1:
        top = _walk(node, parts[1:])
        if top is not None and (best is None or top[1] > best[1]):
            best = top
    return best[0] + 2 if best is not None else None


def _walk(node: Any, parts: list[str | int]) -> tuple[int, int] | None:
    """(0-based line, depth reached) of the deepest node of ``parts`` found from ``node``."""
    yaml = _yaml()[0]
    found: tuple[int, int] | None = None
    for depth, part in enumerate(parts, 1):
        nxt = None
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == part:
                    found, nxt = (k.start_mark.line, depth), v
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part < len(node.value):
                nxt = node.value[part]
                found = (nxt.start_mark.line, depth)
        if nxt is None:
            break
        node = nxt
    return found


def guardrail_rank(entry: Entry | None) -> int:
    """Severity rank of a guardrail (info < warn < block); -1 when absent."""
    if entry is None or entry.deleted:
        return -1
    sev = entry.meta.get("severity")
    return SEVERITIES.index(sev) if sev in SEVERITIES else -1
