"""What the store holds, as values: an entry's synced and local states (``EntryState``), the
head (``Head``), a held conflict (``Conflict``), and the canonical JSON the store keeps of
each entry (``entry_json``, rebuilt without validating again by ``stored_entry``). Pure:
no database here (``replica/store/store.py`` reads and writes them)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from shared.canonical import canonical_str
from shared.entry import Entry, make_entry, tombstone


def entry_json(e: Entry | None) -> str | None:
    if e is None:
        return None
    text = e.__dict__.get("_canonical")  # set where the canonical JSON is already at hand
    return text if text is not None else canonical_str(e.to_dict())


SAME = ""  # stored for local: the synced entry; for file_base: the local entry


def _same_entry(a: Entry | None, b: Entry | None) -> bool:
    return a is b or (a is not None and b is not None and a.version == b.version)


def with_canonical(e: Entry, text: str, version: str) -> Entry:
    """``e`` carrying its canonical JSON and version (computed once by the caller)."""
    object.__setattr__(e, "_canonical", text)
    object.__setattr__(e, "_version", version)
    return e


def entry_from_json(s: str | None) -> Entry | None:
    return None if s is None else make_entry(json.loads(s))


TOMBSTONE_PREFIX = '{"deleted":true,'  # canonical JSON of a tombstone starts so; nothing else


def stored_entry(s: str | None, version: str | None = None) -> Entry | None:
    """An entry this store wrote (canonical JSON of a validated entry): rebuilt without
    validating it again, and with its stored version, so nothing is recomputed."""
    if s is None:
        return None
    d = json.loads(s)
    if d.get("deleted") is True:
        e = tombstone(d["id"])
    else:
        e = Entry(id=d["id"], title=d["title"], body=d["body"], tags=tuple(d["tags"]),
                  links=tuple(d["links"]), meta=d["meta"], raw=d.get("raw"))
    if version is not None:
        object.__setattr__(e, "_version", version)  # Entry.version's cache
        object.__setattr__(e, "_canonical", s)  # stored as it was given: canonical
    return e


def version_of(e: Entry | None) -> str | None:
    return None if e is None else e.version


def live_version(e: Entry | None) -> str | None:
    """Version for comparing states: absent and tombstone compare equal."""
    return None if e is None or e.deleted else e.version


@dataclass
class EntryState:
    id: str
    synced: Entry | None
    local: Entry | None
    file_hash: str | None = None
    file_size: int | None = None
    file_mtime_ns: int | None = None
    held: bool = False
    file_base: Entry | None = None
    # what the file last showed (replica/store/schema.py): the hash of its bytes (None: no
    # file) and, when they carried this replica's conflict marker, the theirs version it
    # named ('' for none)
    shown_hash: str | None = None
    shown_marker: str | None = None

    @property
    def dirty(self) -> bool:
        return live_version(self.local) != live_version(self.synced)


@dataclass(frozen=True)
class Head:
    epoch: str
    seq: int
    digest: str

    def to_json(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "seq": self.seq, "digest": self.digest}


@dataclass
class Conflict:
    entry_id: str
    fields: list[str]
    base: Entry | None
    ours: Entry | None
    theirs: Entry | None
    theirs_author: dict[str, Any] | None
    theirs_seq: int | None
    body_with_markers: str | None
    created_at: int

    def to_json(self) -> dict[str, Any]:
        def side(e: Entry | None) -> dict[str, Any] | None:
            return None if e is None else {"version": e.version, "entry": e.to_dict()}
        return {"entry": self.entry_id, "fields": self.fields, "base": side(self.base),
                "ours": side(self.ours), "theirs": side(self.theirs),
                "theirs_author": self.theirs_author, "theirs_seq": self.theirs_seq}
