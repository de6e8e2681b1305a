"""The hub's configuration of record: what every process serving one database must agree on.

    quire hub init --public-url URL ──► hub_state.public_url, hub_state.key_id  (the record)
    quire hub serve ──► startup(): the process's URL is the recorded one; a configured URL
                        (flag, QUIRE_HUB_PUBLIC_URL, hub.toml) that differs, or a key whose
                        id differs, refuses the start (logged, exit 1)
    GET /readyz     ──► mismatches(): 503 while this process's URL, key id or schema
                        revision differs from the database's (another process changed the
                        record, or a newer release migrated the schema)

Why: the public URL is the audience of every access token and the base of every DPoP
proof; a process with another URL answers ``unauthorized`` to requests other processes
accept. A hub made before the record existed records its URL and key at its next start
(the first configured URL wins; later ones must match). Without any configured URL nothing
is recorded and each process uses ``http://HOST:PORT`` (one process, local use).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from hub.logs import event
from hub.store.hub_state import hub_state_txn, schema_revision_txn, set_hub_record_txn
from shared.errors import InvalidRequest

log = logging.getLogger("quire.hub.record")


class RecordMismatch(Exception):
    """This process's configuration differs from the database's record."""

    def __init__(self, fields: list[dict[str, Any]]):
        self.fields = fields
        names = ", ".join(f["field"] for f in fields)
        super().__init__(f"this process's {names} differs from the hub database's record")


@dataclass(frozen=True)
class Record:
    public_url: str | None
    key_id: str | None
    schema: str | None


def normalize_url(url: str) -> str:
    """``http(s)://host[:port]`` with no path, query or fragment; no trailing slash."""
    raw = url.strip()
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequest(f"public URL must be http(s)://HOST[:PORT], not {url!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise InvalidRequest("public URL must have no path, query, fragment or user "
                             f"(the hub serves from the root): {url!r}")
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as e:
        raise InvalidRequest(f"public URL has a bad port: {url!r}") from e
    return f"{parts.scheme}://{parts.netloc.lower()}"


def mismatches(rec: Record, *, public_url: str, key_id: str, schema: str | None
               ) -> list[dict[str, Any]]:
    """What differs between this process and the record (pure). Unrecorded: no check."""
    out: list[dict[str, Any]] = []
    if rec.public_url is not None and rec.public_url != public_url:
        out.append({"field": "public_url", "recorded": rec.public_url, "process": public_url})
    if rec.key_id is not None and rec.key_id != key_id:
        out.append({"field": "key_id", "recorded": rec.key_id, "process": key_id})
    if rec.schema != schema:
        out.append({"field": "schema", "recorded": rec.schema, "process": schema})
    return out


def read_txn(conn: Any) -> Record | None:
    state = hub_state_txn(conn)
    if state is None:
        return None
    return Record(state.public_url, state.key_id, schema_revision_txn(conn))


def store_txn(conn: Any, *, public_url: str | None = None, key_id: str | None = None,
              only_unset: bool = False) -> dict[str, str]:
    """Record the given values (``only_unset``: those not recorded yet, under the hub
    state lock, so two processes starting at once cannot both adopt theirs)."""
    state = hub_state_txn(conn, lock=True)
    values = {k: v for k, v in (("public_url", public_url), ("key_id", key_id))
              if v and not (only_unset and getattr(state, k) is not None)}
    if values:
        set_hub_record_txn(conn, **values)
    return values


def read(store: Any) -> Record | None:
    with store.read() as conn:
        return read_txn(conn)


def startup(store: Any, *, configured_url: str, default_url: str, key_id: str) -> str:
    """The URL this process serves as (raises ``RecordMismatch``); records what is unset."""
    configured = normalize_url(configured_url) if configured_url else None
    rec = read(store)
    if rec is None:
        raise RecordMismatch([{"field": "hub_state", "recorded": None,
                               "process": "initialized"}])
    if rec.key_id is None or (rec.public_url is None and configured):
        adopted = store.run_write(lambda conn: store_txn(
            conn, public_url=configured, key_id=key_id, only_unset=True))
        if adopted:
            event(log, "record_adopted", **adopted)
        rec = read(store)
        assert rec is not None
    bad = mismatches(Record(rec.public_url, rec.key_id, None),
                     public_url=configured or rec.public_url or default_url, key_id=key_id,
                     schema=None)
    if bad:
        raise RecordMismatch(bad)
    return rec.public_url or default_url
