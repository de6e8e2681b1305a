"""Holding the hub to the whole of a partial replica's scope: the entries the store holds
are all the entries of its folders at the signed head (shared/folderproof.py;
docs/security.md, "Read rules"; decisions.md D143).

    the replica's globs (``only``) ──folderproof.provable_part──▶ its folder globs as a
      │  scope (None: no folder glob, nothing to prove); what its other globs (single
      │  entries, globs inside names) hold is served, not proved, and left out of the check
      ▼
    the answer's signed head: its ``tree`` (signed only on a head that was current)
      │  none, on the answer's last page                        → incomplete
      ▼
    the proof (the answer's end line, or GET …/proof at the same head)
      │  missing                                                → incomplete
      ▼
    the store's synced live entries, as this transaction leaves them
      ──folderproof.verify──▶ must add up to ``tree``           → incomplete, out_of_scope,
                                                                  stale_proof, bad_proof

Every refusal is ``HubUnverified`` raised inside the transaction that applies the answer,
so it rolls back and no vault write is journaled.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase
from typing import Any

from replica.store import store as st
from replica.store.db import Conn
from shared import folderproof
from shared.errors import HubUnverified
from shared.signed import SignedHead


def held_txn(conn: Conn) -> list[tuple[str, str]]:
    """The synced live entries ``(id, version)`` the store holds."""
    return [(i, sv) for i, sv, _lv, _h in st.live_versions_txn(conn) if sv is not None]


def check(signed: SignedHead, only: Iterable[str], held: list[tuple[str, str]],
          proof: Any, what: str, *, last: bool = True, required: bool = True) -> None:
    """``held`` are all the entries of the folder scope ``only`` at ``signed`` (the proof
    checked against its ``tree``). ``last``: the answer ends where the sync ends (an
    earlier page, ending before the head, carries no tree and proves nothing yet).
    ``required``: False when read rules narrow the replica, so part of its folders may be
    hidden from it and the hub sends no proof (one it sends is still checked)."""
    scope, rest = folderproof.provable_part(only)
    if scope is None:
        return
    # what the other globs (single entries…) hold is served, not proved: left out here
    held = [h for h in held if scope.holds(h[0]) or not any(fnmatchcase(h[0], g) for g in rest)]
    if signed.tree is None or proof is None:
        if not last or not required:
            return
        raise HubUnverified(f"{what}: the hub sent no proof that the entries of the replica's "
                            "folders are all there; nothing was applied",
                            {"reason": "incomplete", "seq": signed.seq})
    try:
        folderproof.verify(signed.tree, scope, held, proof)
    except HubUnverified as e:
        raise HubUnverified(f"{what}: {e.message}; nothing was applied",
                            dict(e.details, seq=signed.seq)) from None


def check_txn(conn: Conn, signed: SignedHead, only: Iterable[str], proof: Any, what: str,
              *, last: bool = True, required: bool = True) -> None:
    """``check`` against the store as this transaction leaves it."""
    globs = list(only)
    if folderproof.provable_part(globs)[0] is not None:
        check(signed, globs, held_txn(conn), proof, what, last=last, required=required)
