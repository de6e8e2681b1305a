"""SQL of the hub's OAuth authorization server (hub/oauth/): registered clients, pending
authorization requests, consents, codes and tokens. ``_txn`` functions run inside a
transaction the caller opened.

    oauth_clients    a registered client (RFC 7591): its id, name, redirect URIs, scope
    oauth_requests   an authorization request waiting for a member's consent (the console)
    oauth_consents   a member's yes: client, space, agent name, scopes, the delegation and
                     device it runs under; revoked_at stops every token of it
    oauth_codes      authorization codes, by SHA-256 only; used_at: a second use is refused
    oauth_tokens     access and refresh tokens, by SHA-256 only; never the token itself
    oauth_space_settings  per space: whether remote agents may write without a proposal

Tables live on the schema's one ``metadata`` (hub/store/schema.py), created by migration
0025; their rows reference users, devices, spaces and delegations.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    String,
    Table,
    Text,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection

from hub.store.schema import DIGEST, ID, metadata, spaces

oauth_clients = Table(
    "oauth_clients", metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("info", Text, nullable=False),  # the registered metadata (JSON), as answered
    Column("created_at", BigInteger, nullable=False),
)

oauth_requests = Table(
    "oauth_requests", metadata,
    Column("id", String(64), primary_key=True),  # the handle in the consent page's URL
    Column("client_id", String(64), ForeignKey("oauth_clients.id"), nullable=False),
    Column("redirect_uri", String(2000), nullable=False),
    Column("redirect_explicit", Boolean, nullable=False),
    Column("code_challenge", String(128), nullable=False),
    Column("state", String(500), nullable=True),
    Column("scopes", String(500), nullable=False),
    Column("resource", String(2000), nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Column("done_at", BigInteger, nullable=True),  # consented or denied: once
)

oauth_consents = Table(
    "oauth_consents", metadata,
    Column("id", ID, primary_key=True),
    Column("client_id", String(64), ForeignKey("oauth_clients.id"), nullable=False),
    Column("user_id", ID, ForeignKey("users.id"), nullable=False, index=True),
    Column("device_id", ID, ForeignKey("devices.id"), nullable=False),
    Column("delegation_id", ID, ForeignKey("delegations.id"), nullable=False),
    Column("space_id", ID, ForeignKey("spaces.id"), nullable=False),
    Column("agent", String(64), nullable=False),
    Column("scopes", String(200), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Column("revoked_at", BigInteger, nullable=True),
)

oauth_codes = Table(
    "oauth_codes", metadata,
    Column("code_hash", DIGEST, primary_key=True),
    Column("consent_id", ID, ForeignKey("oauth_consents.id"), nullable=False),
    Column("client_id", String(64), nullable=False),
    Column("redirect_uri", String(2000), nullable=False),
    Column("redirect_explicit", Boolean, nullable=False),
    Column("code_challenge", String(128), nullable=False),
    Column("scopes", String(200), nullable=False),
    Column("resource", String(2000), nullable=True),
    Column("expires_at", BigInteger, nullable=False),
    Column("used_at", BigInteger, nullable=True),
)

oauth_tokens = Table(
    "oauth_tokens", metadata,
    Column("token_hash", DIGEST, primary_key=True),
    Column("kind", String(8), nullable=False),  # access | refresh
    Column("consent_id", ID, ForeignKey("oauth_consents.id"), nullable=False, index=True),
    Column("client_id", String(64), nullable=False),
    Column("scopes", String(200), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Column("used_at", BigInteger, nullable=True),  # a refresh token rotated: a second use
    Column("revoked_at", BigInteger, nullable=True),
)

oauth_space_settings = Table(
    "oauth_space_settings", metadata,
    Column("space_id", ID, ForeignKey("spaces.id"), primary_key=True),
    Column("remote_writes", Boolean, nullable=False),  # agents with `write` publish directly
    Column("set_by", ID, nullable=False),
    Column("set_at", BigInteger, nullable=False),
)

TABLES = (oauth_clients, oauth_requests, oauth_consents, oauth_codes, oauth_tokens,
          oauth_space_settings)


def insert_txn(conn: Connection, table: Table, **values: Any) -> None:
    conn.execute(insert(table).values(**values))


def client_txn(conn: Connection, client_id: str) -> Any:
    return conn.execute(select(oauth_clients).where(oauth_clients.c.id == client_id)).first()


def request_txn(conn: Connection, request_id: str) -> Any:
    return conn.execute(select(oauth_requests).where(oauth_requests.c.id == request_id)).first()


def finish_request_txn(conn: Connection, request_id: str, now: int) -> bool:
    """Mark a pending request done; False when it was done already (a second submit)."""
    return conn.execute(update(oauth_requests).where(
        oauth_requests.c.id == request_id, oauth_requests.c.done_at.is_(None))
        .values(done_at=now)).rowcount == 1


def consent_txn(conn: Connection, consent_id: str) -> Any:
    q = (select(oauth_consents, spaces.c.name.label("space_name"),
                oauth_clients.c.name.label("client_name"))
         .join(spaces, spaces.c.id == oauth_consents.c.space_id)
         .join(oauth_clients, oauth_clients.c.id == oauth_consents.c.client_id)
         .where(oauth_consents.c.id == consent_id))
    return conn.execute(q).first()


def consents_of_txn(conn: Connection, user_id: str) -> list[Any]:
    q = (select(oauth_consents, spaces.c.name.label("space_name"),
                oauth_clients.c.name.label("client_name"))
         .join(spaces, spaces.c.id == oauth_consents.c.space_id)
         .join(oauth_clients, oauth_clients.c.id == oauth_consents.c.client_id)
         .where(oauth_consents.c.user_id == user_id)
         .order_by(oauth_consents.c.created_at.desc(), oauth_consents.c.id))
    return list(conn.execute(q).all())


def revoke_consent_txn(conn: Connection, consent_id: str, now: int) -> int:
    """Revoke a consent and every token issued under it (rows changed: consent)."""
    n = conn.execute(update(oauth_consents).where(
        oauth_consents.c.id == consent_id, oauth_consents.c.revoked_at.is_(None))
        .values(revoked_at=now)).rowcount
    conn.execute(update(oauth_tokens).where(
        oauth_tokens.c.consent_id == consent_id, oauth_tokens.c.revoked_at.is_(None))
        .values(revoked_at=now))
    return int(n)


def code_txn(conn: Connection, code_hash: str) -> Any:
    return conn.execute(select(oauth_codes).where(oauth_codes.c.code_hash == code_hash)).first()


def use_code_txn(conn: Connection, code_hash: str, now: int) -> bool:
    """Spend a code; False when it was spent already (the caller treats that as theft)."""
    return conn.execute(update(oauth_codes).where(
        oauth_codes.c.code_hash == code_hash, oauth_codes.c.used_at.is_(None))
        .values(used_at=now)).rowcount == 1


def token_txn(conn: Connection, token_hash: str) -> Any:
    return conn.execute(select(oauth_tokens).where(oauth_tokens.c.token_hash == token_hash)
                        ).first()


def use_refresh_txn(conn: Connection, token_hash: str, now: int) -> bool:
    return conn.execute(update(oauth_tokens).where(
        oauth_tokens.c.token_hash == token_hash, oauth_tokens.c.used_at.is_(None))
        .values(used_at=now)).rowcount == 1


def revoke_token_txn(conn: Connection, token_hash: str, now: int) -> None:
    conn.execute(update(oauth_tokens).where(oauth_tokens.c.token_hash == token_hash,
                                            oauth_tokens.c.revoked_at.is_(None))
                 .values(revoked_at=now))


def remote_writes_txn(conn: Connection, space_id: str) -> bool:
    r = conn.execute(select(oauth_space_settings.c.remote_writes).where(
        oauth_space_settings.c.space_id == space_id)).first()
    return bool(r and r[0])


def set_remote_writes_txn(conn: Connection, space_id: str, on: bool, by: str, now: int
                          ) -> None:
    done = conn.execute(update(oauth_space_settings).where(
        oauth_space_settings.c.space_id == space_id).values(
        remote_writes=on, set_by=by, set_at=now)).rowcount
    if not done:
        insert_txn(conn, oauth_space_settings, space_id=space_id, remote_writes=on,
                   set_by=by, set_at=now)
