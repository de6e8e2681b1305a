"""SQL for proposals (hub/proposals.py) and for the hub-held devices that sign hub-attested
batches (hub/attested_publish.py). ``_txn`` functions run inside a transaction the store
opened.

    proposals            one row per proposal; ``state`` moves only from ``open``, by an
                         UPDATE that names ``open`` in its WHERE: of two deciders racing,
                         one changes a row and the other changes none
    attester devices     a ``devices`` row of the approving member whose key the hub holds
                         (derived from the hub key), and a ``replicas`` row of it per space
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, func, insert, select, update
from sqlalchemy.engine import Connection

from hub.store.schema import devices, proposals, replicas

OPEN = "open"


@dataclass(frozen=True)
class ProposalRow:
    id: str
    space_id: str
    entry_id: str
    base: str | None
    version: str
    deleted: bool
    content: str
    agent: str
    user_id: str
    device_id: str
    delegation_id: str | None
    reason: str
    state: str
    created_at: int
    decided_at: int | None
    decided_by: str | None
    note: str | None
    seq: int | None
    epoch: str | None


def _row(r: Any) -> ProposalRow | None:
    if r is None:
        return None
    return ProposalRow(r.id, r.space_id, r.entry_id, r.base, r.version, bool(r.deleted),
                       r.content, r.agent, r.user_id, r.device_id, r.delegation_id, r.reason,
                       r.state, r.created_at, r.decided_at, r.decided_by, r.note, r.seq,
                       r.epoch)


def insert_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(proposals).values(state=OPEN, **values))


def get_txn(conn: Connection, space_id: str, proposal_id: str) -> ProposalRow | None:
    """The proposal ``proposal_id`` of ``space_id`` (None: none, or another space's)."""
    return _row(conn.execute(select(proposals).where(
        proposals.c.id == proposal_id, proposals.c.space_id == space_id)).first())


def list_txn(conn: Connection, space_id: str, *, states: tuple[str, ...] | None,
             agent: tuple[str, str] | None = None, limit: int = 100) -> list[ProposalRow]:
    """Newest first; ``states``: only those; ``agent``: only (user, agent)'s."""
    q = select(proposals).where(proposals.c.space_id == space_id)
    if states is not None:
        q = q.where(proposals.c.state.in_(states))
    if agent is not None:
        q = q.where(proposals.c.user_id == agent[0], proposals.c.agent == agent[1])
    rows = conn.execute(q.order_by(proposals.c.created_at.desc(), proposals.c.id.desc())
                        .limit(limit)).all()
    return [r for r in (_row(x) for x in rows) if r is not None]


def count_open_txn(conn: Connection, space_id: str, user_id: str, agent: str) -> int:
    return int(conn.execute(select(func.count()).select_from(proposals).where(
        proposals.c.space_id == space_id, proposals.c.user_id == user_id,
        proposals.c.agent == agent, proposals.c.state == OPEN)).scalar_one())


def close_txn(conn: Connection, proposal_id: str, state: str, *, at: int,
              by: str | None, note: str | None = None, seq: int | None = None,
              epoch: str | None = None) -> bool:
    """Move an open proposal to ``state``; False when it was no longer open."""
    n = conn.execute(update(proposals).where(and_(
        proposals.c.id == proposal_id, proposals.c.state == OPEN)).values(
        state=state, decided_at=at, decided_by=by, note=note, seq=seq,
        epoch=epoch)).rowcount
    return bool(n)


# ---------------------------------------------------------------- attester devices

ATTESTER_NAME = "hub (attested)"
ATTESTER_REPLICA = "hub"


def attester_device_txn(conn: Connection, user_id: str, public_key: str) -> Any:
    """The member's device with this (hub-derived) key, revoked or not; None if none."""
    return conn.execute(select(devices.c.id, devices.c.revoked_at).where(
        devices.c.user_id == user_id, devices.c.public_key == public_key)
        .order_by(devices.c.created_at).limit(1)).first()


def attester_replica_txn(conn: Connection, space_id: str, device_id: str) -> Any:
    return conn.execute(select(replicas.c.id, replicas.c.revoked_at).where(
        replicas.c.space_id == space_id, replicas.c.device_id == device_id)
        .order_by(replicas.c.created_at).limit(1)).first()


def insert_attester_device_txn(conn: Connection, *, id: str, user_id: str, public_key: str,
                               now: int) -> None:
    conn.execute(insert(devices).values(id=id, user_id=user_id, name=ATTESTER_NAME,
                                        public_key=public_key, created_at=now))


def insert_attester_replica_txn(conn: Connection, *, id: str, space_id: str, device_id: str,
                                now: int) -> None:
    conn.execute(insert(replicas).values(id=id, space_id=space_id, device_id=device_id,
                                         name=ATTESTER_REPLICA, created_at=now))
