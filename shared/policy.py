"""Roles and space rules: pure functions over values (no I/O), tested by tables. The hub
(``hub/policy.py``, the guard) and the replica (its local check before pushing, its check
of a conflict resolution) both call this code, so the two never disagree on what a rule
denies.

    op + the hub's state before it --change_of()--> Change(action, weakens, reason)
    Change + effective rules (defaults + space rules) --decide()--> the deciding rule

Roles per space, weakest first: viewer (pull) < editor (push) < admin (manage the space).
Hub owners act as admin in every space; a delegated token is at most an editor.

An op is judged on what it does to the hub's state, never on what the client declares:
a put on a live entry is an update (a put equal to it does nothing and is not judged), a
put where a tombstone stands is an update too (deleting and re-creating an entry is an
update of it: otherwise ``deny update`` is bypassed by a delete in one batch and a create
in the next), a put where nothing ever stood is a create.

Typed memory rules (docs/security.md, "Rules"): guardrails are additive. Creating one or raising its
severity (info < warn < block) is an ordinary create/update; lowering the severity,
changing anything else (the text), deleting one or re-creating a deleted one *weakens* it.
The default rule ``default:guardrails-additive`` denies weakening to editors (delegated
agents are editors at most), so only admins may, unless a space rule allows it.

Copies of a guardrail key (``meta.key``, default the slug) are one guardrail to agents: the
world model combines them (replica/app/worldmodel.py). So a put that makes an entry take a key
another live guardrail holds (a new guardrail, a re-created one, or one moved onto the key) is
also an update of each holder (``key_takeovers``): judged by the rules on the holder's id and
weakening it unless it is the holder's text at the same or a stricter severity. Otherwise a
new guardrail, additive on its own id, would shadow the team's under its key.

Rules have an effect, ``allow`` or ``deny``, and name whom they apply to: a role, a user
id, ``agents`` (every delegated agent) or ``agent:NAME`` (one). A role's or a user's rule
reaches the agents acting under it only when it denies (``rule_applies``). Of the rules
that apply to the caller and match the op, the one with the most specific pattern decides
(an exact id over any glob, then more literal characters); on equal patterns a space rule
beats a default, then deny beats allow. No matching rule: the role decides (editors
publish).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import Any

from shared.entry import SEVERITIES, Entry, guardrail_rank
from shared.kinds import GUARDRAIL, effective_kind

ROLES = ("viewer", "editor", "admin")
ACTIONS = ("create", "update", "delete")  # what one op does
# what a rule may name: the ops' actions, and ``bulk_delete``: each delete of a batch that
# deletes more pages than ``BULK_DELETE`` allows at once (``bulk_deletes``), denied to
# agents by default
RULE_ACTIONS = (*ACTIONS, "bulk_delete")
EFFECTS = ("allow", "deny")
WEAKENS = "weakens"  # a rule's ``when``: it matches only ops that weaken a guardrail
AGENT_PREFIX = "agent:"  # a rule's ``who`` naming one agent: ``agent:NAME``
# the space's folder mapping (shared/kinds.py ``folder_kind``; None: the default layout)
Folders = Mapping[str, str] | None


def role_rank(role: str | None) -> int:
    return ROLES.index(role) if role in ROLES else -1


def at_least(role: str | None, minimum: str) -> bool:
    return role_rank(role) >= role_rank(minimum)


@dataclass(frozen=True)
class Rule:
    id: str
    effect: str  # "allow" | "deny"
    who: str  # "viewer"|"editor"|"admin", a user id, "agents" or "agent:NAME"
    actions: tuple[str, ...]
    entries: str  # glob on entry ids, e.g. "guardrail/*"
    when: str | None = None  # None: every matching op; "weakens": ops weakening a guardrail
    source: str = "space"  # "space" (an admin's rule) or "default" (built in)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Rule:
        return cls(d["id"], d.get("effect", "deny"), d["who"], tuple(d["actions"]),
                   d["entries"], d.get("when"), d.get("source", "space"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "effect": self.effect, "who": self.who,
                               "actions": list(self.actions), "entries": self.entries,
                               "source": self.source}
        if self.when is not None:
            out["when"] = self.when
        return out


DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("default:guardrails-additive", "deny", "editor", ("update", "delete"), "guardrail/*",
         when=WEAKENS, source="default"),
    # an agent deleting many pages at once is the mass delete a person's replica holds for
    # confirmation (replica/engine/mass_delete.py); an agent has nobody to confirm, so the
    # hub refuses it unless a space rule allows the agent ``bulk_delete``
    Rule("default:agents-no-bulk-delete", "deny", "agents", ("bulk_delete",), "*",
         source="default"),
)


@dataclass(frozen=True)
class BulkDelete:
    """How many deletes in one batch are a bulk delete: more than ``pages``, or more than
    ``share`` of the space's live pages when more than ``min_pages`` (the replica's default
    mass-delete threshold, replica/engine/mass_delete.py)."""

    pages: int = 50
    share: float = 0.25
    min_pages: int = 10

    def exceeded(self, deletes: int, live: int) -> str | None:
        if deletes > self.pages:
            return f"more than {self.pages} pages"
        if deletes > self.min_pages and deletes > self.share * live:
            return f"more than {self.share:.0%} of the space"
        return None


BULK_DELETE = BulkDelete()


def bulk_deletes(changes: list[Change], live: int | None,
                 limit: BulkDelete = BULK_DELETE) -> list[Change]:
    """A ``bulk_delete`` change for each delete of a batch whose deletes are more than
    ``limit`` allows at once (``live``: the space's live pages before it, read only when the
    share could decide; None: not read), else none."""
    deletes = [c for c in changes if c.action == "delete" and c.taker is None]
    why = limit.exceeded(len(deletes), live if live is not None else len(deletes) * 4 + 1)
    if why is None:
        return []
    return [Change(c.entry_id, "bulk_delete", reason=f"{len(deletes)} deletes in one batch, "
                                                     f"{why}", kind=c.kind) for c in deletes]


def needs_live_count(changes: list[Change], limit: BulkDelete = BULK_DELETE) -> bool:
    """Could the space's size decide whether ``changes`` are a bulk delete?"""
    n = sum(1 for c in changes if c.action == "delete" and c.taker is None)
    return limit.min_pages < n <= limit.pages


def effective_rules(space_rules: list[dict[str, Any]]) -> list[Rule]:
    """The built-in defaults followed by the space's own rules."""
    return list(DEFAULT_RULES) + [Rule.from_dict(dict(r, source="space")) for r in space_rules]


@dataclass(frozen=True)
class Actor:
    user_id: str
    role: str | None
    agent: str | None = None


@dataclass(frozen=True)
class Change:
    """What one op does to the hub's state."""

    entry_id: str
    action: str  # create | update | delete
    weakens: bool = False
    reason: str = ""  # why it weakens, for the error
    # a key takeover (``key_takeovers``): the entry the op writes, while ``entry_id`` is the
    # guardrail whose key it takes (the one the rules judge)
    taker: str | None = None
    # the effective kind (shared/kinds.py) the change is judged as: guardrail when the
    # version it replaces or the one it writes is one; "" when not known (plain pairs)
    kind: str = ""

    def names(self) -> tuple[str, ...]:
        """What a rule's ``entries`` glob is matched against: the id, and the kind-qualified
        name ``<kind>/<id>`` when the file is not in its kind's folder, so that a rule on
        ``guardrail/*`` covers every guardrail wherever its file is (D139)."""
        if not self.kind or self.entry_id.startswith(self.kind + "/"):
            return (self.entry_id,)
        return (self.entry_id, f"{self.kind}/{self.entry_id}")


def op_action(deleted: bool, current: tuple[str, bool] | None) -> str:
    """What an op does to the current content: create, update or delete (a put over a
    tombstone re-creates the entry: an update)."""
    if deleted:
        return "delete"
    return "create" if current is None else "update"


def _text_changes(before: Entry, after: Entry) -> list[str]:
    out = [f for f in ("title", "body") if getattr(before, f) != getattr(after, f)]
    out += [f for f in ("tags", "links") if set(getattr(before, f)) != set(getattr(after, f))]
    # severity is judged by rank and the kind by ``change_of``: a ``kind: guardrail`` line
    # added to a guardrail's file changes nothing
    meta_b = {k: v for k, v in before.meta.items() if k not in ("severity", "kind")}
    meta_a = {k: v for k, v in after.meta.items() if k not in ("severity", "kind")}
    if meta_b != meta_a:
        out.append("meta")
    return out


def _sev(e: Entry) -> str:
    r = guardrail_rank(e)
    return SEVERITIES[r] if r >= 0 else "none"


def kind_of(e: Entry, folders: Folders = None) -> str:
    """``e``'s effective kind under the space's folder mapping (shared/kinds.py)."""
    return effective_kind(e.id, e.meta, folders)


def guardrail_weakening(before: Entry | None, after: Entry | None,
                        existed: bool, folders: Folders = None) -> str | None:
    """Why going from ``before`` (the live guardrail, or None) to ``after`` (None for a
    deletion) weakens a guardrail, or None. ``existed``: a tombstone stands where ``before``
    is None (a re-create: the deleted text is not known to be kept)."""
    if after is None or after.deleted:
        return "deletes the guardrail" if before is not None else None
    if before is None:
        return ("re-creates a deleted guardrail (deleting and re-creating is an update)"
                if existed else None)
    if kind_of(before, folders) == GUARDRAIL and kind_of(after, folders) != GUARDRAIL:
        return (f"changes its kind to {kind_of(after, folders)} (a guardrail stays one; only raising "
                "the severity is additive)")
    if guardrail_rank(after) < guardrail_rank(before):
        return f"lowers its severity from {_sev(before)} to {_sev(after)}"
    changed = _text_changes(before, after)
    if changed:
        return f"changes its {', '.join(changed)} (only raising the severity is additive)"
    return None


def change_of(entry_id: str, after: Entry, current: tuple[str, bool] | None,
              before: Entry | None = None, folders: Folders = None) -> Change | None:
    """What putting ``after`` (or its tombstone) does, given the hub's current
    ``(version, deleted)`` and the current live content ``before`` (needed when it or
    ``after`` is a guardrail). None when the op changes nothing.

    The typed rules follow the effective kind (shared/kinds.py) of both versions: a
    guardrail whose ``kind:`` line is removed or changed, or whose file is deleted to be
    written under another name, is a change of a guardrail (weakening it), never a page's;
    a page that becomes a guardrail is a guardrail added. ``folders``: the space's folder
    mapping (one for both versions: the one the rules version of the judgement names)."""
    if current is not None and not current[1] and after.version == current[0]:
        return None
    action = op_action(after.deleted, current)
    live = before if current is not None and not current[1] else None
    was = live if live is not None and kind_of(live, folders) == GUARDRAIL else None
    now = after if not after.deleted and kind_of(after, folders) == GUARDRAIL else None
    kind = kind_of(after if not after.deleted or live is None else live, folders)
    if was is None and now is None:
        return Change(entry_id, action, kind=kind)
    # a tombstone where ``now`` goes: a re-create (the deleted text is not known to be
    # kept); a live page there: a guardrail added; a guardrail made another kind: weakened
    reason = guardrail_weakening(was, None if after.deleted else after, current is not None
                                 and (was is not None or current[1]), folders)
    return Change(entry_id, action, reason is not None, reason or "", kind=GUARDRAIL)


def guardrail_key(e: Entry | None, folders: Folders = None) -> str | None:
    """The key of a live guardrail: ``meta.key`` when it is a non-empty string, else the
    slug (``guardrail/<slug>``) or, for a guardrail elsewhere, its id; None for a
    tombstone or another kind."""
    if e is None or e.deleted or kind_of(e, folders) != GUARDRAIL:
        return None
    k = e.meta.get("key")
    if isinstance(k, str) and k:
        return k
    return e.id[len(GUARDRAIL) + 1:] if e.id.startswith(GUARDRAIL + "/") else e.id


def taken_key(after: Entry, before: Entry | None, folders: Folders = None) -> str | None:
    """The key ``after`` takes: its guardrail key when ``before`` (the entry's live content
    in the state it is judged against; None when absent or a tombstone) did not hold it."""
    key = guardrail_key(after, folders)
    return key if key is not None and guardrail_key(before, folders) != key else None


def _keyless(e: Entry) -> Entry:
    # raw dropped: the fields are compared, not how the file spells them
    return replace(e, meta={k: v for k, v in e.meta.items() if k != "key"}, raw=None)


def key_takeovers(after: Entry, before: Entry | None, holders: dict[str, Entry],
                  complete: bool = True, folders: Folders = None) -> list[Change]:
    """What putting ``after`` does to the guardrails whose key it takes: an update of each
    live holder (``holders``: id -> content in the state before the op; other keys and the
    op's own entry are skipped), weakening it unless ``after`` keeps its text (the key aside)
    at the same or a stricter severity. ``before``: as in ``taken_key``. ``complete``: False
    when the caller could not read every holder; the op then counts as weakening the first
    one (refused to editors, never let through unjudged)."""
    key = taken_key(after, before, folders)
    if key is None:
        return []
    out = []
    found = sorted(hid for hid, h in holders.items()
                   if hid != after.id and guardrail_key(h, folders) == key)
    for hid in found:
        why = guardrail_weakening(_keyless(holders[hid]), _keyless(after), True, folders)
        reason = (f"takes the key {key} of {hid}, an update of it that {why}" if why
                  else f"takes the key {key} of {hid} (an update of it)")
        out.append(Change(hid, "update", why is not None, reason, taker=after.id,
                          kind=GUARDRAIL))
    if found and not complete:
        out.append(Change(found[0], "update", True,
                          f"takes the key {key} of {found[0]} and of more guardrails than "
                          "one publication is judged against", taker=after.id, kind=GUARDRAIL))
    return out


def rule_agent(who: str) -> str | None:
    """The one agent a rule's ``who`` names (``agent:NAME``), or None."""
    return who[len(AGENT_PREFIX):] if who.startswith(AGENT_PREFIX) else None


def rule_applies(rule: Rule, actor: Actor) -> bool:
    """Does ``rule`` apply to ``actor``? ``agents`` names every delegated agent and
    ``agent:NAME`` one of them. A rule on a role or a user id reaches the agents acting
    under it only when it denies: an allow given to a member (or to editors) is that
    person's, and an agent never holds more rights than its member, so it never gains one
    it was not named for (docs/security.md, "Rules")."""
    if rule.who == "agents":
        return actor.agent is not None
    named = rule_agent(rule.who)
    if named is not None:
        return actor.agent == named
    if actor.agent is not None and rule.effect != "deny":
        return False
    if rule.who in ROLES:
        return actor.role == rule.who
    return rule.who == actor.user_id


def _specificity(pattern: str) -> tuple[int, int]:
    wild = any(c in pattern for c in "*?[")
    literal = sum(1 for c in pattern if c not in "*?[]")
    return (0 if wild else 1, literal)


def matches(rule: Rule, change: Change) -> bool:
    return (change.action in rule.actions
            and any(fnmatchcase(n, rule.entries) for n in change.names())
            and (rule.when is None or (rule.when == WEAKENS and change.weakens)))


def deciding_rule(rules: list[Rule], change: Change) -> Rule | None:
    """The rule that decides ``change`` among rules that apply to the caller."""
    hits = [r for r in rules if matches(r, change)]
    if not hits:
        return None
    return max(hits, key=lambda r: (_specificity(r.entries), r.source == "space",
                                    r.effect == "deny"))


def denial(rules: list[Rule], change: Change) -> dict[str, str] | None:
    """The denial of ``change`` by rules that apply to the caller, or None when allowed. A
    key takeover's denial names the op's entry (``id``) and the guardrail it takes the key
    of (``of``)."""
    rule = deciding_rule(rules, change)
    if rule is None or rule.effect != "deny":
        return None
    if change.taker is not None:  # judged as the update of the guardrail whose key it takes
        tail = ("guardrails are additive, only admins may weaken one unless a space rule "
                f"allows it (rule {rule.id})" if rule.when == WEAKENS else
                f"the space rules do not let you update {change.entry_id} (rule {rule.id})")
        return {"id": change.taker, "action": change.action, "rule": rule.id,
                "reason": f"{change.taker}: {change.reason}; {tail}", "of": change.entry_id}
    if rule.when == WEAKENS:
        why = (f"{change.entry_id}: {change.action} {change.reason}; guardrails are "
               f"additive, only admins may weaken one unless a space rule allows it "
               f"(rule {rule.id})")
    elif change.action == "bulk_delete":
        why = (f"{change.entry_id}: {change.reason}: a bulk delete, which the space rules do "
               f"not let this agent make (rule {rule.id}; an admin may allow it with a rule "
               "allowing bulk_delete)")
    else:
        why = f"the space rules do not let you {change.action} {change.entry_id} (rule {rule.id})"
    return {"id": change.entry_id, "action": change.action, "rule": rule.id, "reason": why}


def denied_changes(rules: list[Rule], actor: Actor, changes: list[Change]
                   ) -> list[dict[str, str]]:
    """Every change the effective ``rules`` deny this actor, each with its rule and reason."""
    applying = [r for r in rules if rule_applies(r, actor)]
    return [d for d in (denial(applying, c) for c in changes) if d is not None]


def denied_ops(rules: list[Rule], actor: Actor,
               ops: list[tuple[str, str]]) -> list[dict[str, str]]:
    """``denied_changes`` for plain ``(entry_id, action)`` pairs (no guardrail weakening)."""
    return denied_changes(rules, actor, [Change(e, a) for e, a in ops])


def denied_by_applying(rules: list[Rule], ops: list[tuple[str, str]]) -> list[dict[str, str]]:
    """``denied_ops`` for rules already known to apply to the caller (the head sends a
    replica exactly those)."""
    return [d for d in (denial(rules, Change(e, a)) for e, a in ops) if d is not None]
