"""Content screening (docs/security.md, "Screening"): find secrets, and
instruction-injection markers in guardrails and skills, in the entries a batch writes and
in its provenance.

    screen_entries(entries)               the guard (hub/screening.py, before anything is
      └─ screen_entry(entry)              written) and the replica's push path
           ├─ the raw strings first        (replica/engine/screened.py: kept locally,
           │    screen_text(raw)            reported); most entries stop here, clean
           └─ a finding: to_markdown(entry), screened again to place it on its line
    screen_text(text)
      ├─ shared.secretscan.scan(text)     key formats, prose, normalized and decoded views
      └─ injection markers                guardrail/* and skill/* only (INJECTION_RULES),
                                          over the text with invisible characters removed
    screen_provenance(provenance)         each field as ``provenance.FIELD``

A finding names the entry, the line of its vault file (front matter included, as the
person sees it), the rule, and a fingerprint: the SHA-256 of rule and matched text, cut
to 16 hex digits. The matched text itself is never in a finding: findings travel in error
details, logs and status files. Only the entries a batch writes are screened (tombstones
have no content), so the cost of a publication grows with what it changes, not with the
space.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from shared import secretscan
from shared.entry import Entry, to_markdown

# instruction-injection markers, checked in guardrail/* and skill/* entries; a hub adds its
# own with the setting ``screening_injection`` (one regular expression a line)
INJECTION_RULES: tuple[tuple[str, str], ...] = (
    ("injection_ignore_previous",
     r"(?i)\b(ignore|disregard|forget|override)\s+(all\s+|any\s+)?(of\s+)?(the\s+|your\s+)?"
     r"(previous|prior|above|earlier|preceding|system)\s+(instructions|prompts?|rules|"
     r"guardrails|directions)"),
    ("injection_reveal_prompt",
     r"(?i)\b(reveal|print|show|repeat|output)\s+(me\s+)?(your|the)\s+(system|hidden)\s+"
     r"(prompt|instructions)"),
    ("injection_role_token",
     r"(<\|im_start\|>|<\|im_end\|>|<\|system\|>|\[/?INST\]|<<SYS>>)"),
)
INJECTION_KINDS = ("guardrail", "skill")
MAX_FINDINGS = 100  # per batch, in the error details (the count says how many in all)


@dataclass(frozen=True)
class Finding:
    entry: str
    line: int  # 1-based, in the entry's vault file
    rule: str
    fingerprint: str  # sha256(rule, matched text)[:16]: names the secret without it
    version: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"entry": self.entry, "version": self.version, "line": self.line,
                "rule": self.rule, "fingerprint": self.fingerprint}


def fingerprint(rule: str, text: str) -> str:
    return hashlib.sha256(f"{rule}\0{text}".encode()).hexdigest()[:16]


def compile_injection(extra: Iterable[str] = ()) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """The default markers plus a hub's own (``injection_custom_N``)."""
    rules = [(name, re.compile(rx)) for name, rx in INJECTION_RULES]
    rules += [(f"injection_custom_{i}", re.compile(rx, re.IGNORECASE))
              for i, rx in enumerate(x for x in extra if x.strip())]
    return tuple(rules)


DEFAULT_INJECTION = compile_injection()


def screen_text(text: str, *, injection: Sequence[tuple[str, re.Pattern[str]]] = ()
                ) -> list[tuple[int, str, str]]:
    """(line, rule, fingerprint) for each finding in ``text``, in line order: the secrets
    ``shared.secretscan`` finds, and the injection markers, both over the text with its
    invisible characters removed and its compatibility forms folded (its lines kept)."""
    view = secretscan.plain(text)
    found = {(view.count("\n", 0, off) + 1, rule, secret)
             for off, rule, secret in secretscan.scan(text)}
    for rule, rx in injection:
        for m in rx.finditer(view):
            found.add((view.count("\n", 0, m.start()) + 1, rule, m.group(0).lower()))
    return sorted((line, rule, fingerprint(rule, txt)) for line, rule, txt in found)


def _strings(v: Any, keys: list[str]) -> Iterable[str]:
    """The string values of ``v`` in order (a secret cut over two fields stays in one
    piece when joined); its keys go to ``keys``."""
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            keys.append(str(k))
            yield from _strings(x, keys)
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _strings(x, keys)


def screen_entry(entry: Entry, *, injection: Sequence[tuple[str, re.Pattern[str]]] | None
                 = None) -> list[Finding]:
    """Findings in one entry (none for a tombstone). Injection markers only in the kinds
    that steer agents (``INJECTION_KINDS``).

    Most entries hold nothing: their raw strings are screened first, and only an entry with
    a finding is rendered in vault form (YAML, the costly part) to place each on its line."""
    if entry.deleted:
        return []
    rules = (DEFAULT_INJECTION if injection is None else injection) \
        if entry.kind in INJECTION_KINDS else ()
    keys: list[str] = []
    raw = "\n".join([entry.title, *entry.tags, *entry.links, *_strings(entry.meta, keys),
                     entry.body, *keys])
    quick = screen_text(raw, injection=rules)
    # an entry with raw is written to vaults as raw: what only its text holds (a YAML
    # comment) is screened too, and findings are placed on the file's own lines
    placed = screen_text(entry.raw, injection=rules) if entry.raw is not None else None
    if not quick and not placed:
        return []
    if placed is None:
        placed = screen_text(to_markdown(entry), injection=rules)
    seen = {(rule, fp) for _, rule, fp in placed}
    # what only the raw strings show (a value YAML escaped): reported on line 1
    placed += sorted({(1, rule, fp) for _, rule, fp in quick if (rule, fp) not in seen})
    return [Finding(entry.id, line, rule, fp, entry.version) for line, rule, fp in placed]


def screen_provenance(provenance: dict[str, str] | None) -> list[Finding]:
    """Findings in a batch's provenance (its free text goes into the space's history with
    the batch): one a field, named ``provenance.FIELD`` in place of an entry, line 1."""
    out: list[Finding] = []
    for key, value in sorted((provenance or {}).items()):
        if isinstance(value, str):
            out += [Finding(f"provenance.{key}", 1, rule, fp)
                    for _, rule, fp in screen_text(value)]
    return out


def screen_entries(entries: Iterable[Entry], *,
                   injection: Sequence[tuple[str, re.Pattern[str]]] | None = None
                   ) -> list[Finding]:
    out: list[Finding] = []
    for e in entries:
        out.extend(screen_entry(e, injection=injection))
    return out


def allowed(f: Finding, allows: Iterable[dict[str, Any]]) -> bool:
    """Does an admin's allow (``entry``, ``version``, ``rule``: a rule name, a fingerprint
    or ``*``) cover this finding? Scoped to one entry version: an allow never carries over
    to another version, even with the same secret."""
    for a in allows:
        if a.get("entry") == f.entry and a.get("version") == f.version and \
                a.get("rule") in ("*", f.rule, f.fingerprint):
            return True
    return False


def details(findings: Sequence[Finding]) -> dict[str, Any]:
    """The ``content_screened`` error details: every finding (up to MAX_FINDINGS)."""
    return {"findings": [f.to_json() for f in findings[:MAX_FINDINGS]],
            "count": len(findings),
            "entries": sorted({f.entry for f in findings})}


def message(findings: Sequence[Finding]) -> str:
    f = findings[0]
    more = f" and {len(findings) - 1} more" if len(findings) > 1 else ""
    if f.entry.startswith("provenance."):
        return (f"the batch was refused: its {f.entry} looks like a secret ({f.rule}){more}; "
                "send the batch without it (no allow covers provenance)")
    return (f"the batch was refused: {f.entry} line {f.line} looks like a secret or an "
            f"instruction injection ({f.rule}){more}; remove it, or ask an admin to allow "
            "this version (quire admin screening allow)")
