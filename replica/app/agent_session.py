"""An agent principal on this machine: who an MCP session acts as, and its own changes
(replica/mcp/server.py is the front end; docs/agents.md, "Set up once" and "What a write
does").

    principal_of(--agent, $QUIRE_AGENT, $QUIRE_DELEGATION_TOKEN)
        no name anywhere ─────────────────► AgentRequired (``quire mcp`` exits 2)
        an exported token ────────────────► its ``act.sub`` is the agent; another name
                                            given is refused (AgentMismatch)
    write_change()   the entry goes into the agent overlay (replica/store/overlay.py), never
                     into the vault or the replica's entries
    view_txn()       what the agent reads: its own unpublished writes over the replica
    run_agent_sync() the replica's pull, then only this agent's changes published under its
                     delegation (replica/engine/agent_push.py); the device's outbox and
                     dirty entries are left to the device's own syncs

No function here opens a client with the device's own credential: the caller hands in the
delegated token (replica/app/agent_grant.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from replica.machine.home import Home, SpaceConfig, space_lock
from shared.errors import InvalidRequest, NotJoined
from shared.ids import is_agent_name

if TYPE_CHECKING:
    from replica.engine.report import SyncReport
    from replica.store.db import Conn
    from replica.store.overlay import AgentChange
    from replica.store.store import EntryState
    from shared.entry import Entry

AGENT_REQUIRED = ("quire mcp needs an agent name: pass --agent NAME or set QUIRE_AGENT "
                  "(an MCP session always acts as an agent under its own delegation, never "
                  "with this device's own credential)")


class AgentRequired(InvalidRequest):
    """``quire mcp`` started with no agent name: a usage error (``quire`` exits 2)."""

    code = "usage"


class AgentMismatch(InvalidRequest):
    """The exported delegation acts for another agent (or space) than the one named: a
    usage error."""

    code = "usage"


class SpaceRequired(InvalidRequest):
    """Several spaces are joined and none was named: a usage error."""

    code = "usage"


@dataclass(frozen=True)
class AgentName:
    """Who a session acts as: ``agent``, and the exported delegated ``token`` (with what it
    says of itself) when one is set, else None (the session mints its own)."""

    agent: str
    token: str | None = None
    claims: Mapping[str, Any] | None = None


def principal_of(agent: str | None, env: Mapping[str, str] | None = None) -> AgentName:
    """The agent a session acts as, from ``--agent``, ``QUIRE_AGENT`` and an exported
    ``QUIRE_DELEGATION_TOKEN`` (module docstring)."""
    from replica.hubclient.auth import token_agent, token_claims

    env = os.environ if env is None else env
    token = env.get("QUIRE_DELEGATION_TOKEN") or None
    named = [n for n in (agent, env.get("QUIRE_AGENT")) if n]
    if token is not None:
        acting = token_agent(token)
        if acting is None:
            raise AgentMismatch("QUIRE_DELEGATION_TOKEN is not a delegated token (quire "
                                "delegate create prints one); unset it or export one")
        wrong = [n for n in named if n != acting]
        if wrong:
            raise AgentMismatch(f"the exported QUIRE_DELEGATION_TOKEN acts for agent "
                                f"{acting!r}, not {wrong[0]!r}: name that agent (--agent "
                                f"{acting}) or unset the token")
        return AgentName(acting, token, token_claims(token))
    if not named:
        raise AgentRequired(AGENT_REQUIRED)
    if not is_agent_name(named[0]):
        raise InvalidRequest(f"invalid agent name {named[0]!r}: letters, digits, '-', '_', "
                             "'.' (at most 64)")
    return AgentName(named[0])


def space_of(home: Home, space_ref: str | None, name: AgentName) -> SpaceConfig:
    """The one space a session answers for, fixed when it starts: ``--space``, else the
    exported delegation's, else the only joined one."""
    token_space = (name.claims or {}).get("space") if name.token else None
    if space_ref is None and isinstance(token_space, str):
        space_ref = token_space
    joined = home.spaces()
    if space_ref is None and len(joined) > 1:
        raise SpaceRequired("several spaces are joined here ("
                            + ", ".join(sorted(s.name for s in joined))
                            + "): name the one this session serves with --space SPACE")
    space = home.space(space_ref)
    if token_space is not None and token_space != space.space_id:
        raise AgentMismatch(f"the exported QUIRE_DELEGATION_TOKEN is for another space than "
                            f"{space.name}: name its space or unset the token")
    return space


# ---------------------------------------------------------------- the agent's changes


def view_txn(conn: Conn, agent: str, entry_id: str
             ) -> tuple[EntryState, AgentChange | None]:
    """The replica's state of ``entry_id`` and ``agent``'s own unpublished change of it."""
    from replica.store import overlay
    from replica.store import store as st

    mine = overlay.change_txn(conn, agent, entry_id) if overlay.present_txn(conn) else None
    return st.get_state_txn(conn, entry_id), mine


def changes(space: SpaceConfig, agent: str) -> dict[str, AgentChange]:
    """Every unpublished change of ``agent`` in ``space``, by entry id."""
    from replica.store import overlay
    from replica.store.store import Store

    store = Store(space.store_path)
    try:
        with store.engine.connect() as conn:
            return overlay.changes_txn(conn, agent) if overlay.present_txn(conn) else {}
    finally:
        store.close()


def write_change(space: SpaceConfig, agent: str, entry: Entry, *, expected: str | None,
                 session: str | None, tool: str | None, now: int
                 ) -> tuple[bool, AgentChange]:
    """Record ``entry`` as ``agent``'s change, against the replica's synced version of it
    (the version it will be published on, unless the pull moves it first). Refused while
    the entry is held in conflict, and, given ``expected``, when the version the agent
    sees is another. (created, the change)."""
    from replica.conflicts.desk import packet_digest, packet_id_of, with_current_ours
    from replica.store import overlay
    from replica.store import store as st
    from replica.store.overlay import AgentChange
    from replica.store.store import Store
    from shared.errors import LocalError

    store = Store(space.store_path)
    try:
        overlay.ensure(store)
        with store.tx() as conn:
            s, mine = view_txn(conn, agent, entry.id)
            c = st.get_conflict_txn(conn, entry.id)
            if s.held or c is not None:
                raise LocalError(
                    f"{entry.id} is in conflict; resolve its packet first (conflict_show)",
                    {"packet_id": packet_id_of(packet_digest(with_current_ours(c, s.local)))
                     if c else None})
            seen = mine.entry if mine is not None else (
                s.local if s.local is not None and not s.local.deleted else None)
            current = None if seen is None else seen.version
            if expected is not None and expected != current:
                raise InvalidRequest(
                    f"{entry.id} changed since you read it (expected_version does not match)",
                    {"current_version": current})
            synced = s.synced if s.synced is not None and not s.synced.deleted else None
            # a change written again keeps its base (what it was written against) unless
            # its earlier write was in conflict: writing after reading the hub's version
            # takes that version as the new base
            base = mine.base if mine is not None and mine.state != "conflict" else synced
            change = AgentChange(agent, entry.id, entry, base, now, session, tool)
            overlay.put_change_txn(conn, change)
        return seen is None, change
    finally:
        store.close()


# ---------------------------------------------------------------- sync


def run_agent_sync(home: Home, space: SpaceConfig, *, agent: str, client: Any,
                   provenance: dict[str, str]) -> tuple[SyncReport, dict[str, Any]]:
    """One locked sync of ``space`` as ``agent``: ``client`` carries its delegation
    (replica/app/agent_grant.py ``delegated_client``; closed here). The replica's
    ``status.json`` is the device's and is left as it is; the report says what this sync
    did."""
    from replica.app import service
    from replica.engine.agent_push import AgentPublisher, access_key, sync_agent
    from replica.engine.sync import Replica
    from replica.store.store import Store
    from shared.signing import load_private

    hub = home.hub(space.hub_id)
    if hub is None:
        raise NotJoined(f"space {space.name} belongs to a hub this machine no longer knows")
    with space_lock(space, wait=True):
        store = Store(space.store_path)
        try:
            key = load_private(hub.key_path)
            rep = Replica(space_id=space.space_id, replica_id=space.replica_id,
                          vault=space.vault, store=store, client=client, key=key,
                          provenance=provenance)
            rep.puller.access_key = access_key(agent)  # this agent's rules, not the device's
            publisher = AgentPublisher(rep.ledger, client, rep.puller, rep.snapshots,
                                       space_id=space.space_id, replica_id=space.replica_id,
                                       key=key, agent=agent, provenance=provenance)
            report = sync_agent(rep, publisher)
        finally:
            client.close()
            store.close()
    doc = service.status_doc(space, scan=False)
    return report, doc


def pending_resolutions_txn(conn: Conn, agent: str) -> list[str]:
    """Entries whose resolution ``agent``'s sessions made and its sync has not published
    (replica/engine/resolutions.py ``agent_owned``)."""
    from replica.store import store as st
    from shared.entry import tombstone

    res = st.get_meta_txn(conn, "resolutions", {}) or {}
    out = []
    for eid, r in res.items():
        if r.get("principal") != "agent" or r.get("agent") != agent:
            continue
        s = st.get_state_txn(conn, eid)
        local = s.local if s.local is not None else tombstone(eid)
        if not s.held and s.dirty and local.version == r.get("version"):
            out.append(eid)
    return sorted(out)


def pending_resolutions(space: SpaceConfig, agent: str) -> list[str]:
    """``pending_resolutions_txn`` in a read of its own."""
    from replica.store.store import Store

    store = Store(space.store_path)
    try:
        with store.engine.connect() as conn:
            return pending_resolutions_txn(conn, agent)
    finally:
        store.close()
