"""An entry's kind: what the typed rules (shared/policy.py), the world model and the tools
judge it by (docs/decisions.md D132 part 2, D139). Pure; the guard and the replica's local
checks call the same function, so they never disagree on what is a guardrail.

    front matter ``kind:`` (``meta.kind``: a kind word, any case)      wins
    else the space's folder mapping (``folders``: folder path -> kind,
         the longest folder that holds the file)
    else the first folder, when it is a kind word (the ``<kind>/<slug>``
         layout: every id of that layout keeps its kind)
    else ``page``                                  (a file at the root, ``Meeting Notes/…``)

A kind word is a lowercase word (``shared.ids.is_kind``); a ``kind:`` value that is not one
(``kind: Meeting note``) is plain front matter and leaves the kind to the folder.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.ids import entry_id_problem, is_kind

PAGE = "page"
GUARDRAIL = "guardrail"
TYPED_KINDS = ("guardrail", "skill", "persona")  # kinds the rules or the world model read
KIND_KEY = "kind"  # the front-matter key (kept in ``meta``, as every unknown key)
MAX_FOLDERS = 64  # entries in a space's folder mapping (``quire admin kinds set``)


def declared_kind(meta: Mapping[str, Any] | None) -> str | None:
    """The kind front matter declares (``kind: Guardrail`` -> ``guardrail``), or None."""
    if not meta:
        return None
    v = meta.get(KIND_KEY)
    if not isinstance(v, str):
        return None
    word = v.strip().lower()
    return word if is_kind(word) else None


def folder_kind(entry_id: str, folders: Mapping[str, str] | None = None) -> str:
    """The kind an entry's path gives it (no front matter): the space's mapping of the
    longest folder holding it, else its first folder when that is a kind word, else page."""
    first, sep, _ = entry_id.partition("/")
    if not sep:
        return PAGE  # a file at the vault's root
    if folders:
        cut = len(entry_id)
        while (cut := entry_id.rfind("/", 0, cut)) > 0:
            mapped = folders.get(entry_id[:cut])
            if mapped is not None:
                return mapped
    return first if is_kind(first) else PAGE


def effective_kind(entry_id: str, meta: Mapping[str, Any] | None = None,
                   folders: Mapping[str, str] | None = None) -> str:
    """The entry's kind: declared in front matter, else given by its folder."""
    return declared_kind(meta) or folder_kind(entry_id, folders)


def parse_folders(value: object) -> dict[str, str]:
    """A space's folder mapping checked (``{"Skills": "skill", "team/rules": "guardrail"}``:
    a folder path as entry ids spell it, no trailing '/', to a kind word); ValueError saying
    what is wrong. The hub checks what an admin sets; the replica what a head serves."""
    if not isinstance(value, dict) or len(value) > MAX_FOLDERS:
        raise ValueError(f"the folder mapping must be an object of at most {MAX_FOLDERS} "
                         "folders")
    out: dict[str, str] = {}
    for folder, kind in value.items():
        folder = folder.strip("/") if isinstance(folder, str) else folder
        problem = entry_id_problem(folder)
        if problem is not None:
            raise ValueError(f"folder {folder!r}: {problem}")
        if not is_kind(kind):
            raise ValueError(f"folder {folder!r}: the kind must be a lowercase word, not "
                             f"{kind!r}")
        out[str(folder)] = str(kind)
    return dict(sorted(out.items()))
