"""Identifiers and their validation. Validate every id before it reaches a path or a query.

- canonical ids (spaces, batches, replicas, devices, users, invites): 26 characters of
  lowercase Crockford base32, time-ordered (48-bit milliseconds, 80 random bits), like ULID;
- entry ids: ``<kind>/<slug>`` (docs/architecture.md, "Entries and versions");
- space names: a short lowercase slug chosen by people.
"""

from __future__ import annotations

import os
import re
import time
from functools import lru_cache

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
_ID_RE = re.compile(r"^[0-9a-hjkmnp-tv-z]{26}$")
_KIND_RE = re.compile(r"^[a-z][a-z0-9]{0,31}$")
_SLUG_PART_RE = re.compile(r"^[a-z0-9_.-]+$")
_SPACE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_AGENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.@:-]{0,63}$")

KNOWN_KINDS = ("page", "skill", "guardrail", "persona", "note", "source")
MAX_SLUG = 200


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
    """Why ``entry_id`` is not ``<kind>/<slug>``, or None when it is valid."""
    if not isinstance(entry_id, str):
        return "entry id must be a string"
    return _entry_id_problem(str(entry_id))


@lru_cache(maxsize=1 << 14)  # the same ids and links are checked over and over
def _entry_id_problem(entry_id: str) -> str | None:
    kind, sep, slug = entry_id.partition("/")
    if not sep:
        return "entry id must be '<kind>/<slug>'"
    if not is_kind(kind):
        return "kind must be a lowercase word (a-z, 0-9, starting with a letter, at most 32)"
    return slug_problem(slug)


# names Windows reserves for devices, with or without an extension (con, con.txt, con.x.y);
# conin$/conout$ are listed although '$' is already outside the slug alphabet
_RESERVED = frozenset(["con", "prn", "aux", "nul", "conin$", "conout$",
                       *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))])


def portability_problem(entry_id: str) -> str | None:
    """Why a new entry with this (syntactically valid) id could not be a file on Windows,
    macOS or Linux, or None. The slug alphabet is lowercase ASCII, so two valid ids never
    differ only in case or Unicode normalization (the case-insensitive file systems of
    macOS and Windows cannot collide them); what remains are Windows' reserved device names
    and segments ending in a dot or space, which Windows strips."""
    for part in entry_id.split("/"):  # the kind is a folder in the vault too
        stem = part.split(".", 1)[0]
        if stem in _RESERVED:
            return (f"'{part}' is a reserved device name on Windows "
                    "(con, prn, aux, nul, com0-9, lpt0-9, with or without an extension)")
        if part.endswith((".", " ")):
            return f"'{part}' ends in a dot or space, which Windows drops from file names"
        if part != part.lower():
            return f"'{part}' has uppercase letters (ids are lowercase)"
    return None


def is_entry_id(entry_id: object) -> bool:
    return entry_id_problem(entry_id) is None


def split_entry_id(entry_id: str) -> tuple[str, str]:
    kind, _, slug = entry_id.partition("/")
    return kind, slug


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
