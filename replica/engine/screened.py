"""The replica's pre-screen (docs/security.md, Screening): the same screening the hub's guard
runs (shared/screening.py), before anything is sent, so a secret never leaves the machine
by mistake.

    push (replica/engine/push.py, _build_ops)
      ops ─> hold_back(client, space, ops)
               screen each op's entry ─ no finding ─────────────> pushed
               findings ─> the space's allows (GET …/screening/allows, once)
                           all allowed (this exact version) ───> pushed
                           else: kept dirty in the store and the vault, not pushed,
                                 reported as ``content_screened`` (sync, status, MCP)
    status (replica/app/service.py)
      vault_findings(vault, unpublished ids): the findings of the edits the next sync
      would publish, read from the vault files, nothing sent
    every batch's provenance (replica/engine/resolutions.py, plan_batch)
      withhold_secrets(provenance): a field with a finding (QUIRE_SESSION holding a token,
      a note quoting a key) goes out as WITHHELD; the edits still publish

The hub still screens (its own injection markers may be more): a refusal it answers keeps
the edit too (a permanent refusal: the batch is dropped, the edit stays dirty).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shared.entry import Entry, EntryError
from shared.errors import QuireError

if TYPE_CHECKING:
    from replica.hubclient.client import HubClient


def report_of(entry: Entry, findings: Sequence[Any]) -> dict[str, Any]:
    f = findings[0]
    more = f" and {len(findings) - 1} more" if len(findings) > 1 else ""
    return {"id": entry.id, "version": entry.version,
            "findings": [x.to_json() for x in findings],
            "message": f"{entry.id} line {f.line}: looks like a secret or an instruction "
                       f"injection ({f.rule}){more}; kept locally, not published (remove it, "
                       f"or an admin allows it: quire admin screening allow SPACE {entry.id} "
                       f"{entry.version})"}


def hold_back(ops: list[Any], allows: Callable[[], list[dict[str, Any]]]
              ) -> tuple[list[Any], list[dict[str, Any]]]:
    """(the ops to push, a report for each op kept back). ``allows`` is called at most
    once, only when something was found."""
    if not ops:
        return [], []  # (a no-op sync does not load the screening rules: ~20-40 ms)
    from shared import screening

    keep, screened = [], []
    known: list[dict[str, Any]] | None = None
    for op in ops:
        found = screening.screen_entry(op.entry)
        if found:
            if known is None:
                known = allows()
            left = [f for f in found if not screening.allowed(f, known)]
            if left:
                screened.append(report_of(op.entry, left))
                continue
        keep.append(op)
    return keep, screened


def allows_from(client: HubClient, space_id: str) -> Callable[[], list[dict[str, Any]]]:
    def get() -> list[dict[str, Any]]:
        try:
            return client.screening_allows(space_id)
        except QuireError:  # unreachable or an older hub: nothing counts as allowed
            return []
    return get


WITHHELD = "(withheld: looked like a secret)"


def withhold_secrets(provenance: dict[str, str] | None) -> dict[str, str] | None:
    """``provenance`` with each field screening finds a secret in replaced by WITHHELD (the
    hub refuses a batch whose provenance holds one: content_screened)."""
    if not provenance:
        return provenance
    from shared import screening

    found = {f.entry.removeprefix("provenance.") for f in
             screening.screen_provenance(provenance)}
    return {k: WITHHELD if k in found else v for k, v in provenance.items()}


def vault_findings(vault: Path, entry_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Findings in the vault files of ``entry_ids`` (the unpublished edits), without
    allows (status does not ask the hub): what the next sync checks."""
    from replica.vault import markdown as md
    from shared import screening

    out = []
    for entry_id in entry_ids:
        try:
            data = md.entry_path(vault, entry_id).read_bytes()
            entry, _ = md.read_entry(vault, entry_id, data)
        except (OSError, EntryError):
            continue  # deleted, or a problem status reports already
        found = screening.screen_entry(entry)
        if found:
            out.append(report_of(entry, found))
    return out
