"""Read scopes: what a member or an agent may read of a space. Pure functions over values,
tested by tables; every read path of the hub (pulls, events, remote reads, the console,
conflict reports, usage) and the guard ask ``may_read`` and nothing else, so no two of
them can disagree (docs/security.md, "Read rules"; decisions.md D142).

    the space's rules + the reader (Actor) --read_scope()--> ReadScope (the read rules
                                                             that apply to it)
    ReadScope + an entry (id, kind, tags) --may_read()--> True | False

Read rules are rules of the ordinary typed language (shared/policy.py: effect, who, actions,
a glob on entry ids) whose action is ``read``. Beside the glob (a folder is a prefix:
``page/hr/*``) a read rule may name ``kinds`` (the entry's effective kind is one of them:
its front matter's ``kind:``, else the space's folder mapping, else its first folder when a
kind word: shared/kinds.py, the mapping the scope carries, D152) and ``tags`` (the entry
holds one of them); empty means any. No op is a
read, so a read rule never decides a write, and a write rule never a read. Who they reach is what ``rule_applies`` says for every rule: a
role, a user id, ``agents`` or ``agent:NAME``; a role's or a user's rule reaches their
agents only when it denies, so an agent never reads more than its member.

Of the read rules that apply and match an entry, the most specific decides: the glob's
specificity first (an exact id over any glob, then more literal characters), then the
number of conditions it adds (kinds, tags), then a space rule over a default, then deny
over allow. No matching rule: the member reads it (the default is unchanged: members read
everything). So ``deny read *`` for ``agent:scout`` with ``allow read projects/alpha/*``
for it gives scout exactly that folder.

An entry is judged whole, by its id, its kind and its tags at the head an answer is built
from (a deleted entry by the tags of its last live version): its content at any seq, its
history and its diffs are in scope exactly when the entry is (decisions.md D142).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cached_property
from typing import Any

from shared.canonical import canonical_str
from shared.digest import sha256_hex
from shared.kinds import effective_kind, folder_kind
from shared.policy import Actor, Rule, rule_applies

__all__ = ["EVERYTHING", "READ", "ReadRule", "ReadScope", "check_only", "content_matters",
           "in_only", "is_read_rule", "kind_of", "may_read", "may_read_entry", "read_rules",
           "read_scope", "scope_of_head", "tags_matter", "withheld_mark"]

READ = "read"  # the action a read rule names


@dataclass(frozen=True)
class ReadRule:
    """A read rule: whom (``who``, as every rule), a glob on entry ids, and optionally the
    kinds and tags an entry must have one of."""

    id: str
    effect: str  # "allow" | "deny"
    who: str
    entries: str
    kinds: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    source: str = "space"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReadRule:
        return cls(str(d["id"]), str(d.get("effect", "deny")), str(d["who"]),
                   str(d["entries"]), tuple(d.get("kinds") or ()), tuple(d.get("tags") or ()),
                   str(d.get("source", "space")))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "effect": self.effect, "who": self.who,
                               "actions": [READ], "entries": self.entries,
                               "source": self.source}
        if self.kinds:
            out["kinds"] = list(self.kinds)
        if self.tags:
            out["tags"] = list(self.tags)
        return out

    def applies(self, actor: Actor) -> bool:
        """``rule_applies`` of the write rules, to the letter."""
        return rule_applies(Rule(self.id, self.effect, self.who, (READ,), self.entries,
                                 source=self.source), actor)


def is_read_rule(d: dict[str, Any]) -> bool:
    """Is the stored rule ``d`` a read rule (its actions hold ``read``)?"""
    return READ in (d.get("actions") or ())


def read_rules(rules: Iterable[dict[str, Any]]) -> list[ReadRule]:
    """The read rules among a space's rules (as stored: dicts)."""
    return [ReadRule.from_dict(d) for d in rules if is_read_rule(d)]


@dataclass(frozen=True)
class ReadScope:
    """The read rules that apply to one reader (``read_scope``), and the globs a partial
    replica chose to hold (``only``: empty, everything it may read). ``only`` narrows and
    never widens: an entry is in scope when it matches one of them *and* the rules let the
    reader read it (a glob is not a rule: no specificity contest with a deny)."""

    rules: tuple[ReadRule, ...] = ()
    only: tuple[str, ...] = ()
    folders: tuple[tuple[str, str], ...] = ()  # the space's folder mapping (D152), sorted

    @cached_property
    def mapping(self) -> dict[str, str]:
        """The folder mapping kinds are judged under (shared/kinds.py ``folder_kind``); built
        once per scope, as ``may_read`` asks for it per entry (not to be changed)."""
        return dict(self.folders)

    @property
    def unrestricted(self) -> bool:
        """No deny applies and no ``only``: the reader reads everything (an allow alone
        widens nothing)."""
        return not self.only and not any(r.effect == "deny" for r in self.rules)

    @property
    def fingerprint(self) -> str:
        """A digest of the rules and globs that make this scope ("" when unrestricted): two
        answers with the same fingerprint were built under the same scope. A replica
        computes it from the rules its head names, the folder mapping it gives and its own
        ``only`` (``scope_of_head``). The mapping counts only when a rule names kinds (else
        it decides nothing here); a remap then changes the fingerprint, so a copy built
        under the old one is sent to a snapshot."""
        if self.unrestricted:
            return ""
        rules = sorted((r.to_dict() for r in self.rules), key=lambda d: str(d["id"]))
        body: Any = rules if not self.only else {"rules": rules, "only": sorted(self.only)}
        if self.folders and any(r.kinds for r in self.rules):
            body = {"rules": rules, "only": sorted(self.only), "kinds": self.mapping}
        return sha256_hex(canonical_str(body).encode("utf-8"))

    def narrowed(self, only: Iterable[str]) -> ReadScope:
        """This scope intersected with a partial replica's globs (none: unchanged)."""
        globs = tuple(sorted(set(only)))
        return self if not globs else ReadScope(self.rules, globs, self.folders)

    def describe(self) -> list[str]:
        """The applying read rules, one line each, in the order they were given."""
        out = []
        for r in self.rules:
            cond = "".join([f" of kind {', '.join(r.kinds)}" if r.kinds else "",
                            f" tagged {', '.join(r.tags)}" if r.tags else ""])
            out.append(f"{r.effect} read {r.entries}{cond}")
        return out


EVERYTHING = ReadScope()


def _folders(folders: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((folders or {}).items()))


def read_scope(rules: Iterable[dict[str, Any]], actor: Actor,
               folders: Mapping[str, str] | None = None) -> ReadScope:
    """The scope of ``actor``: the space's read rules (``rules``: every rule, as stored)
    that apply to it, judging kinds under the space's folder mapping ``folders``."""
    return ReadScope(tuple(r for r in read_rules(rules) if r.applies(actor)),
                     folders=_folders(folders))


def in_only(only: Iterable[str], entry_id: str) -> bool:
    """Does ``entry_id`` match one of a partial replica's globs (``fnmatch``: ``*`` crosses
    folders, so ``projects/alpha/*`` is the folder and all below it)?"""
    return any(fnmatchcase(entry_id, g) for g in only)


ONLY_MAX = 32  # globs a partial replica may choose
ONLY_GLOB_MAX = 300  # characters a glob


def check_only(only: Iterable[str]) -> tuple[str, ...]:
    """A partial replica's globs, checked (``ValueError`` says what is wrong): at most
    ``ONLY_MAX``, each 1-``ONLY_GLOB_MAX`` printable characters without a comma or a
    leading slash."""
    out = tuple(sorted(set(only)))
    if len(out) > ONLY_MAX:
        raise ValueError(f"at most {ONLY_MAX} scope patterns")
    for g in out:
        if not (0 < len(g) <= ONLY_GLOB_MAX and g.isprintable() and "," not in g
                and not g.startswith("/")):
            raise ValueError(f"scope pattern {g!r}: 1-{ONLY_GLOB_MAX} printable characters, "
                             "no comma, not starting with '/'")
    return out


def scope_of_head(rules: Iterable[dict[str, Any]], only: Iterable[str] = (),
                  folders: Mapping[str, str] | None = None) -> ReadScope:
    """The scope a replica holds, from the rules the hub's head says apply to it (its read
    rules among them, as ``ReadRule.to_dict``), the folder mapping it gives (``kinds``) and
    its own globs: its fingerprint is what the hub's answers to it carry."""
    return ReadScope(tuple(read_rules(rules)), folders=_folders(folders)).narrowed(only)


def kind_of(entry_id: str, folders: Mapping[str, str] | None = None) -> str:
    """An entry's kind from its id alone (its folder under the space's mapping:
    shared/kinds.py ``folder_kind``), for an entry whose front matter is not at hand."""
    return folder_kind(entry_id, folders)


def _specificity(pattern: str) -> tuple[int, int]:
    wild = any(c in pattern for c in "*?[")
    return (0 if wild else 1, sum(1 for c in pattern if c not in "*?[]"))


def _matches(r: ReadRule, entry_id: str, kind: str, tags: frozenset[str]) -> bool:
    return (fnmatchcase(entry_id, r.entries) and (not r.kinds or kind in r.kinds)
            and (not r.tags or not tags.isdisjoint(r.tags)))


def may_read(scope: ReadScope, entry_id: str, tags: Iterable[str] = (),
             kind: str | None = None) -> bool:
    """May the reader of ``scope`` read the entry ``entry_id`` with ``tags`` (its tags at the
    answer's head; a deleted entry's last live tags) and ``kind`` (default: from the id)?"""
    if scope.only and not in_only(scope.only, entry_id):
        return False
    if not scope.rules:
        return True
    k = kind if kind is not None else kind_of(entry_id, scope.mapping)
    held = frozenset(tags)
    hits = [r for r in scope.rules if _matches(r, entry_id, k, held)]
    if not hits:
        return True
    best = max(hits, key=lambda r: (_specificity(r.entries), bool(r.kinds) + bool(r.tags),
                                    r.source == "space", r.effect == "deny"))
    return best.effect == "allow"


def may_read_entry(scope: ReadScope, entry_id: str, entry: dict[str, Any]) -> bool:
    """``may_read`` of an entry whose content (a dict as the wire holds it) is at hand: its
    tags and its effective kind (front matter ``kind:`` first)."""
    meta = entry.get("meta")
    return may_read(scope, entry_id, entry.get("tags") or (),
                    effective_kind(entry_id, meta if isinstance(meta, dict) else None,
                                   scope.mapping))


def content_matters(scope: ReadScope, entry_id: str) -> bool:
    """Could the entry's content (its tags, or a kind its front matter declares) change
    ``may_read`` for it? False: the id decides, so a reader of many entries need not read
    their content."""
    return any((r.tags or r.kinds) and fnmatchcase(entry_id, r.entries) for r in scope.rules)


def tags_matter(scope: ReadScope, entry_id: str, kind: str | None = None) -> bool:
    """Could the entry's tags change ``may_read`` for it, its kind being ``kind``?"""
    k = kind if kind is not None else kind_of(entry_id, scope.mapping)
    return any(r.tags and fnmatchcase(entry_id, r.entries) and (not r.kinds or k in r.kinds)
               for r in scope.rules)


def withheld_mark(entry_id: str, version: str) -> str:
    """What a scoped pull says of a version a withheld op replaced: SHA-256 over the id and
    the version. A replica holding that very version (it was in its scope before) finds it
    by the mark and removes it; to anyone else the mark names nothing it can test without
    already knowing the entry's id and exact content (a version is a digest of it)."""
    return sha256_hex(f"quire-withheld-v1\n{entry_id}\n{version}".encode())
