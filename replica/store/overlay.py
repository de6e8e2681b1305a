"""The agent overlay of a space's store: what an MCP session (an agent principal) wrote and
has not yet published, kept apart from the replica's entries, outbox and vault
(docs/agents.md, "What a write does"; docs/decisions.md, "An agent's writes stay out of the
vault").

    write (replica/mcp/server.py) ──► agent_changes row (agent, entry): the entry, the
                                      synced entry it was written against (base), the
                                      session and tool, a state
    the agent's sync (replica/engine/agent_push.py)
        ├─ rows whose base moved: merged onto the pulled state, or state ``conflict``
        ├─ rows its rules refuse: state ``denied`` with the refusal (kept, judged again)
        └─ the rest in a batch signed by the device, saved in agent_outbox (never in the
           device's ``outbox``) and sent under the agent's delegation only
    receipt ──► the rows and the outbox row dropped; the pull brings the landed version
                into ``entries`` like any teammate's change

Nothing here touches ``entries``, the device's ``outbox`` or the vault, so the person's
``quire sync`` and ``quire watch`` never see these rows: an agent's write is published
under its own delegation or not at all. The tables are this module's (created on first
use, ``ensure``); functions ending in ``_txn`` run in a transaction the caller opened.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from replica.store.db import Conn
from replica.store.records import entry_json, stored_entry
from replica.store.store import Store
from shared.entry import Entry
from shared.wire import op_entry_id

STATES = ("pending", "denied", "conflict")

AGENT_CHANGES_DDL = """CREATE TABLE IF NOT EXISTS agent_changes (
	agent VARCHAR(64) NOT NULL,
	entry_id VARCHAR(300) NOT NULL,
	entry TEXT NOT NULL,
	version VARCHAR(64) NOT NULL,
	base TEXT,
	base_version VARCHAR(64),
	session VARCHAR(64),
	tool VARCHAR(64),
	written_at BIGINT NOT NULL,
	state VARCHAR(16) NOT NULL,
	refusal TEXT,
	PRIMARY KEY (agent, entry_id)
)"""
# one agent's batch on its way: resent only by a session of that agent, under its own
# delegation (the device's outbox is resent by the device's syncs)
AGENT_OUTBOX_DDL = """CREATE TABLE IF NOT EXISTS agent_outbox (
	batch_id VARCHAR(26) NOT NULL,
	agent VARCHAR(64) NOT NULL,
	body TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (batch_id)
)"""


@dataclass
class AgentChange:
    """One entry an agent wrote: ``base`` is the synced entry it was written against (None:
    absent, or a tombstone), ``refusal`` why its last sync kept it back."""

    agent: str
    entry_id: str
    entry: Entry
    base: Entry | None
    written_at: int
    session: str | None = None
    tool: str | None = None
    state: str = "pending"
    refusal: dict[str, Any] | None = None

    @property
    def base_version(self) -> str | None:
        return None if self.base is None or self.base.deleted else self.base.version

    def to_json(self) -> dict[str, Any]:
        return {"id": self.entry_id, "version": self.entry.version, "state": self.state,
                "base_version": self.base_version, "written_at": self.written_at,
                "session": self.session, "tool": self.tool, "refusal": self.refusal}


def ensure(store: Store) -> None:
    """Create the overlay's tables in ``store`` (idempotent)."""
    with store.tx() as conn:
        conn.execute(AGENT_CHANGES_DDL)
        conn.execute(AGENT_OUTBOX_DDL)


def present_txn(conn: Conn) -> bool:
    """Has any session written to this store's overlay (its tables exist)? Readers ask
    first, so reading never takes the write lock."""
    return bool(conn.scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                            " AND name = 'agent_changes'"))


def _change(r: Any) -> AgentChange:
    entry = stored_entry(r.entry, r.version)
    assert entry is not None
    return AgentChange(r.agent, r.entry_id, entry, stored_entry(r.base, r.base_version),
                       r.written_at, r.session, r.tool, r.state,
                       json.loads(r.refusal) if r.refusal else None)


def changes_txn(conn: Conn, agent: str) -> dict[str, AgentChange]:
    """Every change of ``agent``, by entry id."""
    return {r.entry_id: _change(r) for r in conn.execute(
        "SELECT * FROM agent_changes WHERE agent = ? ORDER BY entry_id", (agent,))}


def change_txn(conn: Conn, agent: str, entry_id: str) -> AgentChange | None:
    r = conn.execute("SELECT * FROM agent_changes WHERE agent = ? AND entry_id = ?",
                     (agent, entry_id)).fetchone()
    return None if r is None else _change(r)


def put_change_txn(conn: Conn, c: AgentChange) -> None:
    assert c.state in STATES, c.state
    conn.execute(
        "INSERT OR REPLACE INTO agent_changes (agent, entry_id, entry, version, base,"
        " base_version, session, tool, written_at, state, refusal)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (c.agent, c.entry_id, entry_json(c.entry), c.entry.version, entry_json(c.base),
         None if c.base is None else c.base.version, c.session, c.tool, c.written_at,
         c.state, None if c.refusal is None else json.dumps(c.refusal, sort_keys=True)))


def drop_change_txn(conn: Conn, agent: str, entry_id: str) -> None:
    conn.execute("DELETE FROM agent_changes WHERE agent = ? AND entry_id = ?",
                 (agent, entry_id))


def drop_purged_txn(conn: Conn, entry_ids: set[str]) -> None:
    """Every agent's changes of ``entry_ids``, and every agent batch with an op on one: a
    purge removes their content everywhere (replica/engine/purge.py). Unlike a person's
    edit, an agent's unpublished write of a purged entry is not kept."""
    conn.execute(AGENT_CHANGES_DDL)  # a store no session ever wrote to: nothing to drop
    conn.execute(AGENT_OUTBOX_DDL)
    for eid in sorted(entry_ids):
        conn.execute("DELETE FROM agent_changes WHERE entry_id = ?", (eid,))
    for r in conn.execute("SELECT batch_id, body FROM agent_outbox").fetchall():
        if any(op_entry_id(op) in entry_ids for op in json.loads(r.body).get("ops", [])):
            conn.execute("DELETE FROM agent_outbox WHERE batch_id = ?", (r.batch_id,))


def outbox_txn(conn: Conn, agent: str) -> list[dict[str, Any]]:
    """``agent``'s saved batches, oldest first (``body``: the batch's wire form)."""
    return [{"batch_id": r.batch_id, "body": json.loads(r.body), "created_at": r.created_at}
            for r in conn.execute("SELECT * FROM agent_outbox WHERE agent = ?"
                                  " ORDER BY created_at, batch_id", (agent,))]


def add_outbox_txn(conn: Conn, batch_id: str, agent: str, body: dict[str, Any],
                   now: int) -> None:
    conn.execute("INSERT INTO agent_outbox (batch_id, agent, body, created_at)"
                 " VALUES (?, ?, ?, ?)", (batch_id, agent, json.dumps(body), now))


def drop_outbox_txn(conn: Conn, batch_id: str) -> None:
    conn.execute("DELETE FROM agent_outbox WHERE batch_id = ?", (batch_id,))
