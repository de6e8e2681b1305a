"""Every log event of the hub is structured: a name an operator can alert on (``txn_retry``,
``database_unavailable``), its facts as fields (hub/logs.py ``event`` and ``failure``, or
``extra={"quire": …}``), never a sentence with values formatted into it. On 0506cf5 the
supervisor, the LISTEN reconnects, transaction retries and several failures logged free
text ("LISTEN connection lost (%s); reconnecting in %.1fs")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"^[a-z][a-z0-9_.]*$")
LEVELS = {"debug", "info", "warning", "error", "exception", "critical", "log"}


def _offences(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        f = node.func
        owner = f.value.id if isinstance(f.value, ast.Name) else None
        if owner in ("log", "logger") and f.attr in LEVELS:
            args = node.args[1:] if f.attr == "log" else node.args
        elif owner == "logs" and f.attr in ("event", "failure"):
            args = node.args[1:]
        else:
            continue
        name = args[0] if args else None
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)
                and NAME.match(name.value)) or len(args) > (2 if owner == "logs" else 1):
            out.append(f"{path.relative_to(root)}:{node.lineno}")
    return out


def test_every_hub_log_event_is_a_name_with_fields() -> None:
    bad = [o for p in sorted((ROOT / "hub").rglob("*.py")) if p.name != "logs.py"
           for o in _offences(p)]  # hub/logs.py: the two functions themselves
    assert not bad, f"log a named event with fields (hub/logs.py): {bad}"


def test_the_check_catches_a_sentence(tmp_path: Path) -> None:
    p = tmp_path / "m.py"
    p.write_text('log.warning("lost (%s); retrying", e)\nlogs.event(log, "ok_name", x=1)\n'
                 'logs.failure(log, "Could not send")\n')
    assert _offences(p, tmp_path) == ["m.py:1", "m.py:3"]
