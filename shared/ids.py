"""Identifiers and their validation. Validate every id before it reaches a path or a query.

- canonical ids (spaces, batches, replicas, devices, users, invites): 26 characters of
  lowercase Crockford base32, time-ordered (48-bit milliseconds, 80 random bits), like ULID;
- entry ids: the vault path of the entry's file without ``.md``, NFC (docs/architecture.md,
  "Entries and versions"); every ``<kind>/<slug>`` id of the first layout is one;
- space names: a short lowercase slug chosen by people.
"""

from __future__ import annotations

import os
import re
import time
import unicodedata
from functools import lru_cache

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
_ID_RE = re.compile(r"^[0-9a-hjkmnp-tv-z]{26}$")
_KIND_RE = re.compile(r"^[a-z][a-z0-9]{0,31}$")
_SLUG_PART_RE = re.compile(r"^[a-z0-9_.-]+$")
_SPACE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_AGENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.@:-]{0,63}$")

KNOWN_KINDS = ("page", "skill", "guardrail", "persona", "note", "source")
MAX_SLUG = 200
# an entry id (a vault path without .md) fits the hub's entry_id column, String(240), and a
# Windows path without long-path support (260) under a short vault folder
MAX_ID = 240
MAX_SEGMENT_BYTES = 255  # a file name, in UTF-8 bytes, with its .md
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f\\]")


def new_id(now_ms: int | None = None) -> str:
    """A new canonical id: sortable by creation time, 80 bits of randomness."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    n = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[n & 31])
        n >>= 5
    return "".join(reversed(chars))


def is_id(s: object) -> bool:
    return isinstance(s, str) and bool(_ID_RE.match(s))


def is_kind(s: object) -> bool:
    return isinstance(s, str) and bool(_KIND_RE.match(s))


def slug_problem(slug: object) -> str | None:
    """Why ``slug`` is not a valid slug, or None when it is."""
    if not isinstance(slug, str) or not slug:
        return "slug must be a non-empty string"
    if len(slug) > MAX_SLUG:
        return f"slug longer than {MAX_SLUG} characters"
    if slug.startswith("/") or slug.endswith("/"):
        return "slug must not start or end with '/'"
    for part in slug.split("/"):
        if not part:
            return "slug has an empty path segment"
        if part in (".", ".."):
            return "slug must not contain '.' or '..' segments"
        if part.startswith("."):
            return "slug segments must not start with '.'"
        if not _SLUG_PART_RE.match(part):
            return "slug may contain only a-z, 0-9, '-', '_', '.' and '/'"
        if part.endswith(".tmp") or part.endswith(".md"):
            return "slug segments must not end in '.md' or '.tmp'"
    return None


def entry_id_problem(entry_id: object) -> str | None:
    """Why ``entry_id`` is not an entry id, or None when it is valid. An entry id is the
    vault path of its file without ``.md`` ('/'-separated, Unicode NFC; docs/architecture.md,
    "Entries and versions"): every ``<kind>/<slug>`` id is one."""
    if not isinstance(entry_id, str):
        return "entry id must be a string"
    return _entry_id_problem(str(entry_id))


@lru_cache(maxsize=1 << 14)  # the same ids and links are checked over and over
def _entry_id_problem(entry_id: str) -> str | None:
    if not entry_id:
        return "entry id must be a non-empty path"
    if len(entry_id) > MAX_ID:
        return f"entry id longer than {MAX_ID} characters"
    if entry_id.startswith("/") or entry_id.endswith("/"):
        return "entry id must not start or end with '/'"
    if not entry_id.isascii():
        try:
            entry_id.encode("utf-8")
        except UnicodeEncodeError:
            return "entry id is not valid UTF-8 (a file name in another encoding)"
        if not unicodedata.is_normalized("NFC", entry_id):
            return "entry id must be in Unicode NFC form"
    for part in entry_id.split("/"):
        if not part:
            return "entry id has an empty path segment"
        if part in (".", ".."):
            return "entry id must not contain '.' or '..' segments"
        if part.startswith("."):
            return "entry id segments must not start with '.' (hidden files are not entries)"
        if _CONTROL_RE.search(part):
            return "entry id must not contain control characters or '\\'"
        if part.endswith(".tmp") or part.endswith(".md"):
            return "entry id segments must not end in '.md' or '.tmp'"
    return None


# names Windows reserves for devices, with or without an extension (con, con.txt, con.x.y),
# in any case (CON, Nul.md)
_RESERVED = frozenset(["con", "prn", "aux", "nul", "conin$", "conout$",
                       *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))])
_WINDOWS_FORBIDDEN = '<>:"|?*'
_WINDOWS_FORBIDDEN_RE = re.compile('[<>:"|?*]')


def portability_problem(entry_id: str) -> str | None:
    """Why a new entry with this (syntactically valid) id could not be a file on Windows,
    macOS or Linux, or None: a Windows device name (any case, any extension), a segment
    ending in a dot or space (Windows strips them), a character Windows refuses in file
    names, a segment longer than ``MAX_SEGMENT_BYTES`` in UTF-8 (most file systems' limit).
    Names that differ only in case or Unicode normalization are one file on macOS and
    Windows: that is a matter between two ids (shared/names.py ``collisions``)."""
    for part in entry_id.split("/"):  # every folder is a file name too
        stem = part.split(".", 1)[0]
        if stem.lower() in _RESERVED:
            return (f"'{part}' is a reserved device name on Windows "
                    "(con, prn, aux, nul, com0-9, lpt0-9, in any case, with or without an "
                    "extension)")
        if part.endswith((".", " ")):
            return f"'{part}' ends in a dot or space, which Windows drops from file names"
        if _WINDOWS_FORBIDDEN_RE.search(part):
            return (f"'{part}' has a character Windows does not allow in file names "
                    f"({_WINDOWS_FORBIDDEN})")
        if len(part.encode("utf-8")) > MAX_SEGMENT_BYTES - 3:  # with '.md'
            return (f"'{part[:40]}…' is longer than {MAX_SEGMENT_BYTES} bytes as a file name "
                    "(in UTF-8, with .md)")
    return None


def is_entry_id(entry_id: object) -> bool:
    return entry_id_problem(entry_id) is None


def split_entry_id(entry_id: str) -> tuple[str, str]:
    """(first folder, rest) of an id: (kind, slug) in the ``<kind>/<slug>`` layout; a file
    at the vault's root has no folder: ("", id). The entry's kind is ``Entry.kind``
    (shared/kinds.py), not this."""
    kind, sep, slug = entry_id.partition("/")
    return (kind, slug) if sep else ("", kind)


def is_space_name(s: object) -> bool:
    return isinstance(s, str) and bool(_SPACE_NAME_RE.match(s))


def is_agent_name(s: object) -> bool:
    return isinstance(s, str) and bool(_AGENT_RE.match(s))


def non_portable_ids(entry_ids: list[str]) -> list[dict[str, str]]:
    """``[{"id", "reason"}]`` for each id that ``portability_problem`` refuses: for
    ``quire verify`` to report ids a space accepted before the hub refused them."""
    out = []
    for eid in sorted(entry_ids):
        problem = portability_problem(eid)
        if problem:
            out.append({"id": eid, "reason": problem})
    return out
