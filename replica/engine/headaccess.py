"""What a head tells its caller about the rules it is judged by, as the replica keeps it
(store meta ``access``, or ``access:agent:NAME`` for an agent's session): its role, the
rules that apply to it and, when the space set one, its folder mapping (``kinds``: the
kinds the guard judges under, shared/kinds.py; decisions.md D152). The local checks
(replica/engine/push.py ``local_denial``, replica/conflicts/desk.py) read it; the hub
judges again.
"""

from __future__ import annotations

from typing import Any

from replica.store import store as st
from replica.store.db import Conn
from shared.kinds import parse_folders

ACCESS = "access"  # the store meta key of this device's access (agents: ``access:agent:N``)


def access_of(hub: dict[str, Any]) -> dict[str, Any]:
    """The access a head answer gives; a mapping that does not parse is left out (the
    local check is a preview; the hub judges again)."""
    access: dict[str, Any] = {"role": hub.get("role"), "rules": hub.get("rules") or []}
    try:
        kinds = parse_folders(hub.get("kinds") or {})
    except ValueError:
        kinds = {}
    if kinds:
        access["kinds"] = kinds
    return access


def folders_txn(conn: Conn) -> dict[str, str]:
    """The space's folder mapping as the last head gave it ({}: none, or no head yet): what
    the local tools compute kinds under (shared/kinds.py ``effective_kind``)."""
    access = st.get_meta_txn(conn, ACCESS)
    kinds = access.get("kinds") if isinstance(access, dict) else None
    return dict(kinds) if isinstance(kinds, dict) else {}
