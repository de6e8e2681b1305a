"""What a batch may add to a space beyond its syntax: entry ids portable to every file
system a replica may run on (``shared.ids.portability_problem``).

Only entries a batch creates are judged (absent, or a tombstone being re-created): an entry
that is live already was accepted before this rule and can still be updated or deleted, so
a space holding such ids keeps working (``quire verify`` reports them). Called by the guard
while preparing; bases are re-checked under the space lock at commit, so "creates" cannot
change in between without the batch being refused anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.errors import InvalidRequest
from shared.ids import portability_problem


def check_portable(ops: Sequence[Any], current: dict[str, tuple[str, bool]]) -> None:
    """Refuse the batch when an op creates an entry whose id is not portable."""
    bad = []
    for i, op in enumerate(ops):
        cur = current.get(op.entry_id)
        if op.entry.deleted or (cur is not None and not cur[1]):
            continue  # deleting, or updating what is live: not a new file name
        problem = portability_problem(op.entry_id)
        if problem:
            bad.append({"op": i, "id": op.entry_id, "reason": problem})
    if bad:
        raise InvalidRequest(f"{len(bad)} new entry id(s) cannot be files on every replica: "
                             f"{bad[0]['id']}: {bad[0]['reason']}",
                             {"reason": "non_portable_id", "ops": bad})
