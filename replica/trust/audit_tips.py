"""Holding the hub to its audit log: the signed audit tips a replica keeps (docs/security.md,
"The audit log").

Every signed head carries the tips ``(n, digest)`` of the space's audit chain and of the
hub chain as the hub read them (shared/signed.py). The hub's database alone can be cut
short or rewritten by whoever can write it; a tip the hub key signed and a replica kept
cannot be taken back.

    sync: a verified head ──keep()──▶ store meta ``audit_tips`` (the newest tips seen)
          the next sync's fresh head (asked for after reading the kept tips), same epoch
              ──check_fresh()──▶ behind, or another digest at the same n: HubUnverified
                                  ``audit_rollback`` (nothing is applied)
    quire admin audit --verify:
          tips kept by this home's replicas of the hub + the tips of earlier --verify runs
          (``<home>/hubs/<hub>/audit_tips.json``) + fresh signed heads, each re-verified
          with the pinned key ──check_events()──▶ every tip's event is in the export with
          that digest, else ``audit_truncated`` / ``audit_rewritten``; when all hold, the
          newest tips are saved for the next run

What a kept tip proves: the log up to it. Events after the newest tip any replica or
verifier kept are only as safe as the hub's database (docs/security.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.errors import AuditRewritten, AuditTruncated, HubUnverified
from shared.signed import Keys, SignedHead, parse_head

AUDIT_TIPS = "audit_tips"  # store meta: {"epoch", "space": [n, d], "hub": [n, d], "head"}
TIPS_FILE = "audit_tips.json"  # in the hub's directory of a home: the verifier's tips


@dataclass(frozen=True)
class Tip:
    chain: str  # a space id, or "hub"
    n: int
    digest: str
    source: str  # where the signed head came from (for the message)


def tips_of(head: SignedHead, source: str) -> list[Tip]:
    out = []
    if head.audit is not None:
        out.append(Tip(head.space, head.audit[0], head.audit[1], source))
    if head.hub_audit is not None:
        out.append(Tip("hub", head.hub_audit[0], head.hub_audit[1], source))
    return out


# ---------------------------------------------------------------- a replica's store


def keep(kept: Any, head: SignedHead) -> dict[str, Any] | None:
    """The meta value to store after ``head`` verified, or None to keep ``kept``: the
    newest head whose tips are both at or past the kept ones (any head of a new epoch)."""
    if head.audit is None or head.hub_audit is None:
        return None
    if isinstance(kept, dict) and kept.get("epoch") == head.epoch:
        if head.audit[0] < kept["space"][0] or head.hub_audit[0] < kept["hub"][0]:
            return None
        if [*head.audit] == kept["space"] and [*head.hub_audit] == kept["hub"]:
            return None
    return {"epoch": head.epoch, "space": [*head.audit], "hub": [*head.hub_audit],
            "head": head.wire}


def check_fresh(kept: Any, fresh: SignedHead) -> None:
    """A head the hub signed after ``kept`` was stored may not carry an older audit log.
    A new epoch (which needs a statement the hub key signed: an admin's bump, e.g. the
    documented restore from a backup) starts over from its own tips."""
    if not isinstance(kept, dict) or fresh.audit is None or fresh.hub_audit is None:
        return
    if kept.get("epoch") != fresh.epoch:
        return
    for chain, mine, now in (("space", kept["space"], fresh.audit),
                             ("hub", kept["hub"], fresh.hub_audit)):
        if now[0] < mine[0] or (now[0] == mine[0] and now[1] != mine[1]):
            raise HubUnverified(
                f"the hub's {chain} audit chain is behind or differs from the one it signed "
                f"before (n={now[0]}, this replica saw n={mine[0]}): its audit log was cut "
                "short or rewritten", {"reason": "audit_rollback", "chain": chain,
                                       "hub_n": now[0], "kept_n": mine[0]})


# ---------------------------------------------------------------- quire admin audit --verify


def kept_tips(hub_dir: Path, hub_key: Keys, stores: Iterable[tuple[str, Any]]
              ) -> list[Tip]:
    """Every signed tip this home holds for the hub: ``stores`` yields ``(space_id,
    meta value)`` of its replicas; the verifier's own file adds the rest. Each head is
    verified again with the pinned key (a tip is only as good as its signature)."""
    out: list[Tip] = []
    heads: list[tuple[Any, str, str]] = [(v.get("head"), sid, f"replica of {sid}")
                                         for sid, v in stores if isinstance(v, dict)]
    try:
        saved = json.loads((hub_dir / TIPS_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        saved = []
    heads += [(w, (w or {}).get("space", ""), "an earlier --verify") for w in saved]
    for wire, space, source in heads:
        out += tips_of(parse_head(hub_key, wire, space=space), source)
    return out


def newest(tips: Iterable[Tip]) -> dict[str, Tip]:
    best: dict[str, Tip] = {}
    for t in tips:
        if t.chain not in best or t.n > best[t.chain].n:
            best[t.chain] = t
    return best


def check_events(events: list[dict[str, Any]], tips: Iterable[Tip],
                 chains: set[str] | None) -> int:
    """Each tip (of a chain in ``chains``; None: all) names an event the export holds with
    that digest. Returns how many tips were checked."""
    by_key = {(e["chain"], e["n"]): e["digest"] for e in events}
    last: dict[str, int] = {}
    for e in events:
        last[e["chain"]] = max(last.get(e["chain"], 0), e["n"])
    checked = 0
    for t in tips:
        if chains is not None and t.chain not in chains:
            continue
        checked += 1
        got = by_key.get((t.chain, t.n))
        details = {"chain": t.chain, "n": t.n, "signed_digest": t.digest,
                   "last_n": last.get(t.chain, 0), "source": t.source}
        if got is None:
            raise AuditTruncated(
                f"the audit chain {t.chain} ends at n={last.get(t.chain, 0)}, but the hub "
                f"signed it at n={t.n} (kept by {t.source}): events were deleted", details)
        if got != t.digest:
            raise AuditRewritten(
                f"the audit chain {t.chain} at n={t.n} is not the one the hub signed (kept "
                f"by {t.source}): events were edited and the chain rehashed",
                dict(details, digest=got))
    return checked


def save(hub_dir: Path, heads: Iterable[SignedHead]) -> None:
    """The verifier's newest signed heads, one per space (written after a clean run)."""
    from replica.machine.home import write_json

    by_space: dict[str, SignedHead] = {}
    for h in heads:
        if h.audit is None:
            continue
        cur = by_space.get(h.space)
        if cur is None or (cur.audit is not None and h.audit[0] >= cur.audit[0]):
            by_space[h.space] = h
    try:
        old = json.loads((hub_dir / TIPS_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        old = []
    keep_old = [w for w in old if isinstance(w, dict) and w.get("space") not in by_space]
    write_json(hub_dir / TIPS_FILE, keep_old + [h.wire for h in by_space.values()])
