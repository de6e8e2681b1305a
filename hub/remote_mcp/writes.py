"""Direct writes from the remote endpoint: off unless a space admin allows them, then
published hub-attested (hub/attested_publish.py, D135) for the member who consented.

    the space setting   ``oauth_space_settings.remote_writes``; a space admin sets it in the
                        console (``/console/spaces/{space}/remote``); audited
                        ``oauth.remote_writes``
    write(grant, op)    1. the token has the ``write`` scope (else ``insufficient_scope``)
                        2. the space allows remote writes (else ``forbidden``,
                           ``remote_writes_off``: use ``propose``)
                        3. the consenting member may edit the space (editor or admin); the
                           attested path judges the agent with the member's role capped at
                           editor (hub/access.py ``effective_role``), so an admin's rights
                           (weakening a guardrail) never reach an agent (D136)
                        4. ``publish_attested(rights="agent")``: one batch signed by the
                           member's hub-held device, judged by the guard as the agent acting
                           for the member (rules for agents and ``agent:NAME``), the audit
                           naming both (``attested``: agent, proposer, approver)
"""

from __future__ import annotations

from typing import Any

from hub import audit
from hub.access import Principal, effective_role_txn, space_access_txn
from hub.oauth.tokens import RemoteGrant
from hub.store import oauth_sql as sql
from hub.store.db import Store
from shared.entry import make_entry, tombstone
from shared.errors import Forbidden
from shared.wire import Op


def allowed(store: Store, space_id: str) -> bool:
    with store.read() as conn:
        return sql.remote_writes_txn(conn, space_id)


def set_allowed(store: Store, p: Principal, space_ref: str, on: bool, now: int
                ) -> dict[str, Any]:
    """A space admin turns remote writes on or off."""

    def txn(conn: Any) -> dict[str, Any]:
        space, _ = space_access_txn(conn, p, space_ref, "admin", lock=True)
        sql.set_remote_writes_txn(conn, space.id, on, p.user_id, now)
        audit.record_space_txn(conn, space, at=now, action="oauth.remote_writes",
                               actor=p.actor(), details={"remote_writes": on})
        return {"space": space.id, "remote_writes": on}

    return store.run_write(txn)


def write(hub: Any, g: RemoteGrant, entry: dict[str, Any] | None, entry_id: str,
          base: str | None) -> dict[str, Any]:
    """Publish one put (``entry``) or delete (``entry`` None) for the grant's agent."""
    from hub.access import HubAttested
    from hub.attested_publish import publish_attested

    if not g.allows("write"):
        raise Forbidden("this token has no 'write' scope; file a proposal (propose)",
                        {"reason": "insufficient_scope", "scope": "write"})
    member = Principal(g.principal.user_id, g.principal.device_id, g.principal.user_name,
                       g.principal.is_owner)
    with hub.store.read() as conn:
        on = sql.remote_writes_txn(conn, g.space_id)
        role = effective_role_txn(conn, member, g.space_id)
    if not on:
        raise Forbidden("this space does not allow remote writes; file a proposal "
                        "(propose) a member accepts", {"reason": "remote_writes_off"})
    if role not in ("editor", "admin"):
        raise Forbidden("remote writes act for a member who may edit this space",
                        {"reason": "member_not_editor", "role": role})
    op = Op(tombstone(entry_id) if entry is None else make_entry(
        entry, max_body=hub.settings.max_entry_body), base)
    agent = g.principal.agent or ""
    out = publish_attested(hub.store, hub.key, hub.settings, member=member,
                           space_id=g.space_id, ops=[op],
                           attested=HubAttested(agent, member.user_id, member.user_id),
                           now=hub.now, rights="agent", client="quire-hub-mcp",
                           tool="mcp:write")
    hub.published(out)
    return {"published": True, "id": entry_id, "version": op.entry.version,
            "seq": out.seq, "head": {"epoch": out.epoch, "seq": out.seq}}
