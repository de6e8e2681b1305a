"""Exit codes of the ``quire`` command: one stable scheme for every command (docs/cli.md,
"Exit codes"), so a script or an agent loop can tell "all done" from "done, but look" from
"try again later" from "you are shut out".

    0  OK           all done: nothing held, refused or left unpublished
    1  ERROR        the command failed (local error, bad input, a hub answer it cannot use)
    2  USAGE        the command line is wrong (code ``usage``)
    3  ATTENTION    the command ran (the sync went through), but something is left for a
                    person or agent: an entry held in conflict, an edit the space rules deny,
                    a file that cannot be published, an edit content screening keeps
                    back (a secret), changes not yet published; the output
                    lists them (``quire status --strict`` for every state but ``ok``)
    4  UNREACHABLE  the hub could not be reached or is unavailable (``transfer_failed``,
                    ``unavailable``, ``rate_limited``): retry later, nothing was lost
    5  REFUSED      the hub refuses this device or replica (``unauthorized``, ``forbidden``,
                    ``not_found``: revoked, removed); local edits are kept
    6  UNVERIFIED   the hub sent something that does not verify with the pinned key and the
                    hash chain (``hub_unverified``), or no fresh signed head (``stale_head``),
                    or ``quire verify`` found a difference, or ``quire admin audit
                    --verify`` found the audit log cut or rewritten (``audit_*``): an
                    alarm, not a retry

The codes are part of the command's contract: new situations map onto these, the numbers
never change meaning. ``--json`` output is the same document whatever the code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OK = 0
ERROR = 1
USAGE = 2
ATTENTION = 3
UNREACHABLE = 4
REFUSED = 5
UNVERIFIED = 6

UNREACHABLE_CODES = frozenset({"transfer_failed", "unavailable", "rate_limited"})
REFUSED_CODES = frozenset({"unauthorized", "forbidden", "not_found", "space_deleted"})
UNVERIFIED_CODES = frozenset({"hub_unverified", "hub_key_unchained", "stale_head", "audit_unverified",
                              "audit_truncated", "audit_rewritten"})

# what a person is told with exit 4: nothing is lost, nothing to do but wait
KEPT = ("nothing local is lost: your edits are kept in the vault and publish at the next "
        "sync; retry later (exit 4)")

# status ``state`` values that are not "all done" but not a failure either
ATTENTION_STATES = frozenset({"conflicts", "problems", "pending", "never_synced"})


def for_error_code(code: str | None, details: Mapping[str, Any] | None = None) -> int:
    """The exit code of a command that failed with the error ``code``: a ``not_found``
    this machine found by itself (``details.where: "local"``: a page its vault does not
    have) or a page the space does not have at the hub (``details.reason: "no_entry"``,
    a remote read) is an error (1), not the hub refusing (5)."""
    if code == "not_found" and ((details or {}).get("where") == "local"
                                or (details or {}).get("reason") == "no_entry"):
        return ERROR
    if code == "usage":
        return USAGE
    if code in UNREACHABLE_CODES:
        return UNREACHABLE
    if code in REFUSED_CODES:
        return REFUSED
    if code in UNVERIFIED_CODES:
        return UNVERIFIED
    return ERROR


def left_over(doc: Mapping[str, Any]) -> bool:
    """Does a status or sync document list anything held, refused or unpublishable?"""
    raw = doc.get("sync")
    sync: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    return any(doc.get(k) or sync.get(k) for k in ("conflicts", "held", "problems",
                                                   "policy_denied", "content_screened"))


def for_status(doc: Mapping[str, Any]) -> int:
    """``quire status --strict`` (and ``quire sync`` after a successful run): 0 only for
    ``ok`` with nothing left over; the failure's own code for ``error`` and ``suspended``."""
    state = doc.get("state")
    if state == "suspended":
        return REFUSED
    if state == "error":
        if doc.get("vault_missing"):
            return ERROR
        err = doc.get("last_error") or {}
        return for_error_code(err.get("code") if isinstance(err, Mapping) else None)
    if state in ATTENTION_STATES or left_over(doc):
        return ATTENTION
    return OK if state == "ok" else ERROR


def describe() -> list[tuple[int, str, str]]:
    """(code, name, meaning) rows, for ``--help`` epilogues and the docs test."""
    return [
        (OK, "ok", "all done"),
        (ERROR, "error", "the command failed"),
        (USAGE, "usage", "wrong command line"),
        (ATTENTION, "attention", "done, but something is held, refused by policy, "
                                 "unpublishable or pending (listed in the output)"),
        (UNREACHABLE, "unreachable", "the hub could not be reached: retry later"),
        (REFUSED, "refused", "the hub refuses this device or replica (revoked, removed)"),
        (UNVERIFIED, "unverified", "the hub's answer does not verify with the pinned key"),
    ]
