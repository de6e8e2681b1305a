"""A person at a vault, for the randomized save-race tests (issue 35): saves in every editor
style, and the ledger an oracle checks at the end.

Every body line is a token (``tk<replica>x<n>``, seeds ``sd<entry>x<line>``): an edit
replaces one line's token, so what each write did and what its author saw are sets of
tokens. The person reads the file right before changing it (an editor that noticed the
file changed on disk): what the file showed is what they saw. A token that ends in no final
state, in no held conflict, and that nobody removed while seeing it is a write lost or
overwritten unseen.

    Person.act(what)   atomic (temp file renamed over), in_place (one write), two_writes
                       (truncate, half, rest), half (truncate and half now, the rest at
                       ``finish``: a save cut across syncs), delete, rename, create, resolve
                       (remove a conflict's ``quire`` block)
    Ledger             written tokens, tokens a person removed while seeing them, counts

Used by tests/replica/engine/test_save_race_fuzz.py (in-process) and
tests/e2e/test_save_race_fuzz_e2e.py (real processes).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Protocol

from replica.store.store import Store
from replica.vault import markdown as md
from replica.vault.ignore import conflict_copy
from shared.entry import Entry

TOKEN = re.compile(rb"\b(?:tk\d+x\d+|sd\d+x\d+)\b")
LINES = 6  # token lines in a created page


def tokens(data: bytes) -> set[str]:
    return {t.decode() for t in TOKEN.findall(data)}


class Machine(Protocol):
    """What the person uses of a replica: its vault and (to read a conflict's theirs, as
    ``quire conflicts show`` does) its store."""

    vault: Path
    store: Store

    def path(self, eid: str) -> Path: ...

    def write(self, e: Entry) -> None: ...


@dataclass
class Ledger:
    """The oracle's record: every token written, every token a person removed while seeing
    it, and the counts a run reports."""

    written: dict[str, str] = field(default_factory=dict)  # token -> "r1 edit page/p0 …"
    seen_removed: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)
    written_total: int = 0
    faults: int = 0

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def seed_page(self, k: int, eid: str) -> Entry:
        """The ``k``-th seed page, its tokens written."""
        for j in range(LINES):
            self.written[f"sd{k}x{j}"] = f"seed edit {eid}"
        return Entry(id=eid, title=eid, body="".join(f"sd{k}x{j}\n" for j in range(LINES)))

    def missing(self, final: set[str], held: set[str], live: set[str]
                ) -> tuple[list[str], list[str]]:
        """(lost, overwritten unseen): tokens in no final state, no held conflict, and never
        removed by a person who saw them; overwritten when their entry is live (another
        token holds the line), lost when no trace is left."""
        gone = [t for t in self.written
                if t not in final and t not in held and t not in self.seen_removed]
        over = [t for t in gone if self.written[t].split()[2] in live]
        lost = [t for t in gone if t not in over]
        return ([f"{t}: {self.written[t]}" for t in lost],
                [f"{t}: {self.written[t]}" for t in over])


@dataclass
class HalfSave:
    path: Path
    data: bytes
    cut: int
    fd: int = -1


class Person:
    """The person at one replica's vault: reads a file right before changing it."""

    def __init__(self, i: int, local: Machine, book: Ledger, rng: Random):
        self.i, self.local, self.book, self.rng = i, local, book, rng
        self.n = 0
        self.half: HalfSave | None = None

    def _token(self) -> str:
        self.n += 1
        return f"tk{self.i}x{self.n}"

    def files(self) -> list[str]:
        out = []
        for p in sorted(self.local.vault.rglob("*.md")):
            eid = p.relative_to(self.local.vault).as_posix()[:-3]
            if conflict_copy(eid + ".md"):
                continue  # theirs of a held conflict: a view, never published (D133)
            if self.half is None or p != self.half.path:
                out.append(eid)
        return out

    def act(self, what: str, eid: str | None = None) -> str | None:
        """One action by name on ``eid`` (or a random file); the entry acted on, or None
        when nothing could be done."""
        if what == "finish":
            return self.finish()
        if what == "create":
            return self.create()
        files = self.files()
        if what == "resolve" and eid is None:  # a file that shows a marker, if any
            files = [f for f in files if _shows_marker(self.local.path(f))]
        if eid is None or eid not in files:
            if not files:
                return None
            eid = self.rng.choice(files)
        path = self.local.path(eid)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if what == "delete":
            try:
                path.unlink()
            except FileNotFoundError:
                return None
            self.book.seen_removed |= tokens(data) | self._theirs_shown(eid, data)
            self.book.count("delete")
        elif what == "rename":
            new = f"page/mv{self.i}x{self._token()[2:]}"
            target = self.local.path(new)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(path, target)
            except FileNotFoundError:
                return None
            # a held file moved away resolves its conflict by a delete, as a delete does
            self.book.seen_removed |= self._theirs_shown(eid, data)
            self.book.count("rename")
        elif what == "resolve":
            return eid if self.resolve(eid, path, data) else None
        elif what == "half":
            if self.half is not None or not self.start_half(eid, path, data):
                return None
        elif not self.save(eid, path, data, what):
            return None
        return eid

    def _edit(self, eid: str, data: bytes) -> bytes | None:
        have = sorted(tokens(data))
        if not have:
            return None
        old = self.rng.choice(have)
        new = self._token()
        self.book.written[new] = f"r{self.i} edit {eid} ({old} -> {new})"
        self.book.seen_removed.add(old)
        return re.sub(rb"\b" + old.encode() + rb"\b", new.encode(), data)

    def save(self, eid: str, path: Path, data: bytes, style: str) -> bool:
        out = self._edit(eid, data)
        if out is None:
            return False
        self.book.count(f"save {style}")
        if style == "atomic":
            tmp = path.with_name(f".{path.name}.swp")
            tmp.write_bytes(out)
            os.replace(tmp, path)
        elif style == "in_place":
            with open(path, "wb") as f:
                f.write(out)
        else:  # two writes, no pause
            with open(path, "wb") as f:
                f.write(out[: len(out) // 2])
                f.flush()
                f.write(out[len(out) // 2:])
        return True

    def start_half(self, eid: str, path: Path, data: bytes) -> bool:
        out = self._edit(eid, data)
        if out is None:
            return False
        body = out.index(b"\n---\n") + 5 if b"\n---\n" in out else len(out) // 2
        cut = self.rng.randint(body, max(body, len(out) - 1))
        self.half = HalfSave(path, out, cut)
        self.half.fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o600)
        os.write(self.half.fd, out[:cut])
        self.book.count("save half-written")
        return True

    def finish(self) -> str | None:
        """The rest of a half-written save, if one is open."""
        if self.half is None:
            return None
        os.write(self.half.fd, self.half.data[self.half.cut:])
        os.close(self.half.fd)
        eid = self.half.path.relative_to(self.local.vault).as_posix()[:-3]
        self.half = None
        return eid

    def create(self) -> str:
        eid = f"page/new{self.i}x{self._token()[2:]}"
        body = ""
        for _ in range(LINES):
            t = self._token()
            self.book.written[t] = f"r{self.i} create {eid}"
            body += t + "\n"
        self.local.write(Entry(id=eid, title=eid, body=body))
        self.book.count("create")
        return eid

    def _theirs_shown(self, eid: str, data: bytes) -> set[str]:
        """The tokens of the version of theirs a conflict marker in ``data`` names (the
        person can read it: ``quire conflicts show``); a marker naming an older theirs than
        the one held showed them nothing newer."""
        try:
            markers = md.read_entry(self.local.vault, eid, data)[1]
        except Exception:  # noqa: BLE001 - half written, or not an entry: no marker
            return set()
        named = (markers.get("conflict") or {}).get("theirs_version")
        for c in self.local.store.conflicts():
            if (named and c.entry_id == eid and c.theirs is not None
                    and not c.theirs.deleted and c.theirs.version == named):
                return tokens(c.theirs.body.encode())
        return set()

    def resolve(self, eid: str, path: Path, data: bytes) -> bool:
        """Remove the ``quire`` block: the person takes the file as it is, dropping what of
        theirs they do not keep (seen)."""
        try:
            entry, markers = md.read_entry(self.local.vault, eid, data)
        except Exception:  # noqa: BLE001 - not a file a person can resolve
            return False
        if not markers.get("conflict"):
            return False
        self.book.seen_removed |= self._theirs_shown(eid, data)
        path.write_bytes(md.render(entry))
        self.book.count("resolve")
        return True


def _shows_marker(path: Path) -> bool:
    try:
        return b"\nquire:" in path.read_bytes()
    except OSError:
        return False


def seeds(seed: str | None) -> Iterator[int]:
    """The fuzzes' seeds: ``seed`` alone when one is given (a replay), else consecutive
    seeds from one taken from the clock (printed by the caller)."""
    if seed is not None:
        yield int(seed)
        return
    start = int(time.time()) % 100_000
    n = 0
    while True:
        yield start + n
        n += 1
