"""SQL for who may act: users, devices (with their user, for authentication), space
memberships and roles, replicas, and the admin listings of devices and replicas.
``_txn`` functions run inside a transaction opened by the store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import and_, func, insert, select, update
from sqlalchemy.engine import Connection

from hub.store.schema import devices, members, refresh_tokens, replicas, spaces, users
from hub.store.sql import Sql


@dataclass(frozen=True)
class DeviceRow:
    id: str
    user_id: str
    name: str
    public_key: str
    revoked_at: int | None
    user_active: bool
    is_owner: bool
    user_name: str


def device_by_token_hash_txn(conn: Connection, token_hash: str) -> DeviceRow | None:
    row = conn.execute(
        select(devices, users.c.active, users.c.is_owner, users.c.name.label("user_name"))
        .join(users, users.c.id == devices.c.user_id)
        .where(devices.c.token_hash == token_hash)).first()
    return _device(row)


DEVICE_BY_ID_SQL = ("SELECT d.id, d.user_id, d.name, d.public_key, d.revoked_at, u.active, "
                     "u.is_owner, u.name FROM devices d JOIN users u ON u.id = d.user_id "
                     "WHERE d.id = :id")


_DEVICE_BY_ID = Sql(DEVICE_BY_ID_SQL)


_DEVICE_BY_ID_LOCKED = {"sqlite": _DEVICE_BY_ID,  # BEGIN IMMEDIATE already serializes writers
                        "postgresql": Sql(DEVICE_BY_ID_SQL + " FOR SHARE OF d, u")}


def device_by_id_txn(conn: Connection, device_id: str, *, lock: bool = False
                     ) -> DeviceRow | None:
    """``lock``: hold the device and user rows until commit (PostgreSQL ``FOR SHARE``): a
    revocation or deactivation (an UPDATE of either row) then waits for this transaction."""
    stmt = _DEVICE_BY_ID_LOCKED.get(conn.dialect.name, _DEVICE_BY_ID) if lock else _DEVICE_BY_ID
    r = stmt.one(conn, {"id": device_id})
    if r is None:
        return None
    return DeviceRow(r[0], r[1], r[2], r[3], r[4], bool(r[5]), bool(r[6]), r[7])


def _device(row: Any) -> DeviceRow | None:
    if row is None:
        return None
    return DeviceRow(row.id, row.user_id, row.name, row.public_key, row.revoked_at,
                     bool(row.active), bool(row.is_owner), row.user_name)


def insert_user_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(users).values(**values))


def get_user_txn(conn: Connection, user_id: str) -> Any:
    return conn.execute(select(users).where(users.c.id == user_id)).first()


def set_owner_txn(conn: Connection, user_id: str) -> None:
    conn.execute(update(users).where(users.c.id == user_id).values(is_owner=True))


# where a user's display name came from (migration 0026; docs/decisions.md D138): member
# (chosen at join, or renamed by the member), invite (the invite's name), admin (renamed by
# an admin or owner), oidc (a first sign-in's `name` claim), guess (this machine's account or
# device name); NULL before 0026. Plain SQL: read and written only here.
_SET_SOURCE = Sql("UPDATE users SET name_source = :source WHERE id = :id")
_SOURCE = Sql("SELECT name, name_source FROM users WHERE id = :id")
_REPLACE_GUESS = Sql("UPDATE users SET name = :name, name_source = :source "
                     "WHERE id = :id AND name_source = 'guess'")


def set_user_name_txn(conn: Connection, user_id: str, name: str,
                      source: str = "member") -> None:
    """Set a user's display name, chosen by a person (``source``: member or admin)."""
    conn.execute(update(users).where(users.c.id == user_id).values(name=name))
    _SET_SOURCE.run(conn, {"id": user_id, "source": source})


def set_name_source_txn(conn: Connection, user_id: str, source: str) -> None:
    _SET_SOURCE.run(conn, {"id": user_id, "source": source})


def user_name_txn(conn: Connection, user_id: str) -> tuple[str, str | None] | None:
    """(display name, where it came from) of a user, or None."""
    row = _SOURCE.one(conn, {"id": user_id})
    return None if row is None else (str(row[0]), row[1])


def replace_guessed_name_txn(conn: Connection, user_id: str, name: str, source: str) -> bool:
    """Set the name only while it is still a guess (``name_source`` ``guess``): a name
    the member or an admin chose is never replaced. True when it was set."""
    return _REPLACE_GUESS.run(conn, {"id": user_id, "name": name, "source": source}) == 1


def deactivate_user_txn(conn: Connection, user_id: str, now: int) -> int:
    """Deactivate a user and revoke the refresh credentials of all their devices."""
    n = conn.execute(update(users).where(and_(users.c.id == user_id, users.c.active.is_(True)))
                     .values(active=False)).rowcount
    conn.execute(update(refresh_tokens).where(and_(
        refresh_tokens.c.device_id.in_(select(devices.c.id).where(devices.c.user_id == user_id)),
        refresh_tokens.c.revoked_at.is_(None))).values(revoked_at=now))
    return n


def insert_device_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(devices).values(**values))


def list_devices_txn(conn: Connection, user_id: str | None) -> list[dict[str, Any]]:
    q = (select(devices.c.id, devices.c.name, devices.c.user_id, devices.c.created_at,
                devices.c.revoked_at, users.c.name.label("user_name"))
         .join(users, users.c.id == devices.c.user_id))
    if user_id is not None:
        q = q.where(devices.c.user_id == user_id)
    rows = conn.execute(q.order_by(devices.c.created_at, devices.c.id)).all()
    return [{"id": r.id, "name": r.name, "user_id": r.user_id, "user_name": r.user_name,
             "created_at": r.created_at, "revoked_at": r.revoked_at} for r in rows]


def revoke_device_txn(conn: Connection, device_id: str, now: int) -> int:
    return conn.execute(update(devices).where(and_(devices.c.id == device_id,
                                                   devices.c.revoked_at.is_(None)))
                        .values(revoked_at=now)).rowcount


_ADMIN_OVER = Sql("SELECT 1 FROM members a JOIN members m ON m.space_id = a.space_id "
                  "WHERE a.user_id = :a AND a.role = 'admin' AND m.user_id = :u LIMIT 1")


def admin_over_txn(conn: Connection, admin_id: str, user_id: str) -> bool:
    """Is ``admin_id`` an admin of a space ``user_id`` is a member of?"""
    return _ADMIN_OVER.one(conn, {"a": admin_id, "u": user_id}) is not None


_ROLE = Sql("SELECT role FROM members WHERE space_id = :s AND user_id = :u")


def role_txn(conn: Connection, space_id: str, user_id: str) -> str | None:
    r = _ROLE.one(conn, {"s": space_id, "u": user_id})
    return None if r is None else r[0]


def set_member_txn(conn: Connection, space_id: str, user_id: str, role: str, now: int) -> None:
    current = role_txn(conn, space_id, user_id)
    if current is None:
        conn.execute(insert(members).values(space_id=space_id, user_id=user_id, role=role,
                                            created_at=now))
    else:
        conn.execute(update(members).where(and_(members.c.space_id == space_id,
                                                members.c.user_id == user_id)).values(role=role))


def remove_member_txn(conn: Connection, space_id: str, user_id: str) -> int:
    return conn.execute(members.delete().where(and_(members.c.space_id == space_id,
                                                    members.c.user_id == user_id))).rowcount


def list_members_txn(conn: Connection, space_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        select(members.c.user_id, members.c.role, users.c.name, users.c.active)
        .join(users, users.c.id == members.c.user_id)
        .where(members.c.space_id == space_id).order_by(users.c.name)).all()
    return [{"user_id": r.user_id, "name": r.name, "role": r.role, "active": bool(r.active)}
            for r in rows]


def names_txn(conn: Connection, ids: set[str]) -> dict[str, str]:
    """Display names of the users, devices, replicas and spaces among ``ids`` (ids it does
    not know are left out), for pages that show names instead of ids."""
    out: dict[str, str] = {}
    wanted = sorted(ids)
    for at in range(0, len(wanted), 500):
        chunk = wanted[at:at + 500]
        for table in (users, devices, replicas, spaces):
            for r in conn.execute(select(table.c.id, table.c.name)
                                  .where(table.c.id.in_(chunk))).all():
                out[r.id] = r.name
    return out


class ReplicaRow(NamedTuple):
    id: str
    space_id: str
    device_id: str
    name: str
    created_at: int
    revoked_at: int | None


_REPLICA = Sql("SELECT id, space_id, device_id, name, created_at, revoked_at FROM replicas "
               "WHERE id = :id")


def get_replica_txn(conn: Connection, replica_id: str) -> ReplicaRow | None:
    r = _REPLICA.one(conn, {"id": replica_id})
    return None if r is None else ReplicaRow(*r)


def insert_replica_txn(conn: Connection, **values: Any) -> None:
    conn.execute(insert(replicas).values(**values))


def count_live_replicas_txn(conn: Connection, space_id: str, device_id: str) -> int:
    """Replicas ``device_id`` registered in the space and no admin revoked."""
    return int(conn.execute(
        select(func.count()).select_from(replicas)
        .where(replicas.c.space_id == space_id, replicas.c.device_id == device_id,
               replicas.c.revoked_at.is_(None))).scalar_one())


def list_replicas_txn(conn: Connection, space_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        select(replicas.c.id, replicas.c.name, replicas.c.device_id, replicas.c.created_at,
               replicas.c.revoked_at, devices.c.name.label("device_name"), devices.c.user_id)
        .join(devices, devices.c.id == replicas.c.device_id)
        .where(replicas.c.space_id == space_id)
        .order_by(replicas.c.created_at, replicas.c.id)).all()
    return [{"id": r.id, "name": r.name, "device_id": r.device_id,
             "device_name": r.device_name, "user_id": r.user_id, "created_at": r.created_at,
             "revoked_at": r.revoked_at} for r in rows]


def revoke_replica_txn(conn: Connection, replica_id: str, now: int) -> int:
    return conn.execute(update(replicas).where(and_(replicas.c.id == replica_id,
                                                    replicas.c.revoked_at.is_(None)))
                        .values(revoked_at=now)).rowcount
