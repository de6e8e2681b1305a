"""Content screening (docs/security.md, "Screening"): find secrets, and
instruction-injection markers in guardrails and skills, in the entries a batch writes.

    screen_ops(ops)                       the guard (hub/guard.py, before anything is written)
      └─ screen_entry(entry)              and the replica's push path (replica/engine/push.py,
           ├─ to_markdown(entry) lines      replica/engine/screened.py: kept locally, reported)
           ├─ secret_patterns()            detect-secrets' format detectors, in-process
           ├─ high_entropy_assignment      ``name = value`` with a random-looking value
           └─ injection markers            guardrail/* and skill/* only (INJECTION_RULES)

A finding names the entry, the line of its vault file (front matter included, as the
person sees it), the rule, and a fingerprint: the SHA-256 of rule and matched text, cut
to 16 hex digits. The matched text itself is never in a finding: findings travel in error
details, logs and status files. Only the entries a batch writes are screened (tombstones
have no content), so the cost of a publication grows with what it changes, not with the
space.

detect-secrets is used as a library of detectors: each plugin's patterns (``denylist``, what
its ``analyze_string`` runs) over the entry's text, in-process; its global settings,
filters, baselines, files and network verifiers are not used.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from shared.entry import Entry, to_markdown

# rule name -> detect-secrets plugin (format detectors; no keyword or bare-entropy plugins:
# they flag ordinary prose and digests): module, class
_PLUGINS = (
    ("private_key", "private_key", "PrivateKeyDetector"),
    ("aws_access_key", "aws", "AWSKeyDetector"),
    ("azure_storage_key", "azure_storage_key", "AzureStorageKeyDetector"),
    ("basic_auth_url", "basic_auth", "BasicAuthDetector"),
    ("discord_token", "discord", "DiscordBotTokenDetector"),
    ("github_token", "github_token", "GitHubTokenDetector"),
    ("gitlab_token", "gitlab_token", "GitLabTokenDetector"),
    ("jwt", "jwt", "JwtTokenDetector"),
    ("mailchimp_key", "mailchimp", "MailchimpDetector"),
    ("npm_token", "npm", "NpmDetector"),
    ("openai_key", "openai", "OpenAIDetector"),
    ("pypi_token", "pypi_token", "PypiTokenDetector"),
    ("sendgrid_key", "sendgrid", "SendGridDetector"),
    ("slack_token", "slack", "SlackDetector"),
    ("square_oauth", "square_oauth", "SquareOAuthDetector"),
    ("stripe_key", "stripe", "StripeDetector"),
    ("telegram_token", "telegram_token", "TelegramBotTokenDetector"),
    ("twilio_key", "twilio", "TwilioKeyDetector"),
)


@functools.cache
def secret_patterns() -> tuple[tuple[str, tuple[re.Pattern[str], ...]], ...]:
    """(rule, the plugin's ``denylist`` patterns) per detector. detect-secrets is imported
    on the first screening, not with this module: importing it costs a ``quire`` process
    about 0.2 s (it pulls in requests and yaml), which a command that screens nothing (a
    status, a no-op sync, a hub that has not published yet) should not pay."""
    out = []
    for rule, module, cls in _PLUGINS:
        plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), cls)()
        out.append((rule, tuple(plugin.denylist)))
    return tuple(out)


# ``name = value`` / ``name: value`` (quoted or not), value at least 20 token characters
# ``name = value`` / ``name: value`` (quoted or not), value at least 20 token characters;
# found from the operator (rare) and the value, then the name is read just before it: a scan
# starting from every name-like word costs half of all screening
_ASSIGN_VALUE = re.compile(r"(?::=|=>|:|=)[ \t]*[\"'`]?(?P<value>[A-Za-z0-9+/=_\-.~]{20,})")
_ASSIGN_NAME = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,63})[\"']?[ \t]*$")
_SECRETISH = re.compile(r"(?i)(secret|token|passw|pwd|api[_-]?key|apikey|access[_-]?key|"
                        r"private[_-]?key|auth|credential|session|cookie|bearer|signing)")
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-.~"
B64_LIMIT = 4.5  # bits per character: what detect-secrets' Base64HighEntropyString uses
SECRETISH_LIMIT = 3.5  # a secret-named assignment (hex keys top out at 4.0)

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


def entropy(s: str) -> float:
    """Shannon entropy in bits per character (detect-secrets' measure)."""
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def compile_injection(extra: Iterable[str] = ()) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """The default markers plus a hub's own (``injection_custom_N``)."""
    rules = [(name, re.compile(rx)) for name, rx in INJECTION_RULES]
    rules += [(f"injection_custom_{i}", re.compile(rx, re.IGNORECASE))
              for i, rx in enumerate(x for x in extra if x.strip())]
    return tuple(rules)


DEFAULT_INJECTION = compile_injection()


def _assignments(text: str) -> Iterable[tuple[int, str, str]]:
    """(offset, name, value) of each ``name = value`` in ``text``."""
    for m in _ASSIGN_VALUE.finditer(text):
        head = text[max(0, m.start() - 80):m.start()]
        n = _ASSIGN_NAME.search(head)
        if n is not None:
            yield m.start() - len(head) + n.start(), n.group("name"), m.group("value")


def _high_entropy(name: str, value: str) -> bool:
    if value.startswith(("http", "www.", "/", "./", "../", "~/")) or \
            "/" in value.strip("/") and "." in value:
        return False  # a URL or a path
    if all(c.isalpha() or c in "-_./" for c in value):
        return False  # words joined by separators (a slug, a relative path)
    limit = SECRETISH_LIMIT if _SECRETISH.search(name) else B64_LIMIT
    return entropy(value) > limit


def _matched(m: re.Match[str]) -> str:
    """What a detect-secrets pattern found: its first non-empty group, else the match
    (their ``analyze_string`` yields the same)."""
    return next((g for g in m.groups() if g), m.group(0))


def screen_text(text: str, *, injection: Sequence[tuple[str, re.Pattern[str]]] = ()
                ) -> list[tuple[int, str, str]]:
    """(line, rule, fingerprint) for each finding in ``text``, in line order.

    Each pattern runs once over the whole text (C speed) and a match is placed on the line
    it starts on (lines end at a newline); none of the detectors' patterns crosses one."""
    found: set[tuple[int, str, str]] = set()

    def line(pos: int) -> int:  # matches are rare: count only for them
        return text.count("\n", 0, pos) + 1

    for rule, patterns in secret_patterns():
        for rx in patterns:
            for m in rx.finditer(text):
                found.add((line(m.start()), rule, _matched(m)))
    formats = {n for n, _, _ in found}
    for pos, name, value in _assignments(text):
        if _high_entropy(name, value) and (n := line(pos)) not in formats:
            found.add((n, "high_entropy_assignment", value))
    for rule, rx in injection:
        for m in rx.finditer(text):
            found.add((line(m.start()), rule, m.group(0).lower()))
    return sorted((line, rule, fingerprint(rule, txt)) for line, rule, txt in found)


def _strings(v: Any) -> Iterable[str]:
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield str(k)
            yield from _strings(x)
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _strings(x)


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
    raw = "\n".join([entry.title, *entry.tags, *entry.links, *_strings(entry.meta),
                     entry.body])
    quick = screen_text(raw, injection=rules)
    if not quick:
        return []
    placed = screen_text(to_markdown(entry), injection=rules)
    seen = {(rule, fp) for _, rule, fp in placed}
    # what only the raw strings show (a value YAML escaped): reported on line 1
    placed += sorted({(1, rule, fp) for _, rule, fp in quick if (rule, fp) not in seen})
    return [Finding(entry.id, line, rule, fp, entry.version) for line, rule, fp in placed]


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
    return (f"the batch was refused: {f.entry} line {f.line} looks like a secret or an "
            f"instruction injection ({f.rule}){more}; remove it, or ask an admin to allow "
            "this version (quire admin screening allow)")
