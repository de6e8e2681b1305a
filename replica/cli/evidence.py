"""``quire verify --evidence FILE``: check, offline, that two signed checkpoints prove a hub
showed two histories of a space (docs/cli.md, "Witness"; replica/trust/logcheck.py); an
option of ``quire verify`` (replica/cli/main.py ``cmd_verify``).

FILE is JSON: ``{"checkpoints": [NOTE, NOTE], "consistency"?: {"root", "proof"}}`` (the
proof when the two are of different sizes: tlog.equivocation), or the error ``quire sync
--json`` printed
(``{"error": {"details": {"evidence": …}}}``), or what a witness answers for a log
(``{"equivocation": {"kept", "other"}}``). Exit 0 when the pair proves it, 1 when not, 2 for
a file that is none of these. Nothing is read but the file: the keys are in the notes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shared import tlog
from shared.errors import InvalidRequest


def evidence_of(doc: Any) -> tuple[Any, Any, Any] | None:
    """(note, note, consistency proof or None) in any of the forms above."""
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
        doc = (doc["error"].get("details") or {}).get("evidence")
    if isinstance(doc, dict) and isinstance(doc.get("equivocation"), dict):
        eq = doc["equivocation"]
        return eq.get("kept"), eq.get("other"), None
    if isinstance(doc, dict) and isinstance(doc.get("checkpoints"), list) \
            and len(doc["checkpoints"]) == 2:
        return doc["checkpoints"][0], doc["checkpoints"][1], doc.get("consistency")
    return None


def check(path: str) -> tuple[int, dict[str, Any], str]:
    """(exit code, the JSON document, the human line) for the evidence in ``path``."""
    try:
        found = evidence_of(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError) as e:
        found, why = None, str(e)
    else:
        why = "no pair of checkpoints in it"
    if found is None:
        return 2, {"ok": False, "error": why}, f"error: {path}: {why}"
    try:
        proven = tlog.equivocation(*found)
    except (ValueError, TypeError) as e:
        return 1, {"ok": False, "reason": str(e)}, f"not proven: {e}"
    return 0, {"ok": True, "proven": proven}, f"proven: {proven}"


def read_pair(path: str) -> list[Any]:
    """The pair of checkpoints in the evidence file, and the consistency proof when they
    are of different sizes (``InvalidRequest`` when none)."""
    try:
        found = evidence_of(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError) as e:
        raise InvalidRequest(f"{path}: {e}", {"reason": "fork"}) from None
    if found is None or not all(isinstance(n, str) for n in found[:2]):
        raise InvalidRequest(f"{path}: no pair of checkpoints in it", {"reason": "fork"})
    return [found[0], found[1]] + ([] if found[2] is None else [found[2]])


def recovery_text(space: str, res: dict[str, Any]) -> str:
    """What ``quire admin epoch bump --fork`` printed: the new epoch, each witness."""
    lines = [f"{space}: recovered from two histories; a new epoch began, this hub's history "
             "survives and replicas republish what they hold from the other at their next "
             "sync"]
    for w in res.get("witnesses") or []:
        lines.append(f"  witness {w['name']}: " + ("released" if w["released"] else
                                                  f"not released ({w.get('error')})"))
    return "\n".join(lines)
