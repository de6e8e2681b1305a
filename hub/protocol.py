"""Protocol versions (docs/protocol.md, "Protocol versions"): a replica names the wire
version it speaks in the ``Quire-Protocol`` header (none: version 1, every replica before
it existed). A space records the lowest version its replicas must speak
(``spaces.protocol``, raised by the guard's commit when it accepts an entry with ``raw``,
never lowered). A replica below it is refused ``upgrade_required`` on the endpoints that
exchange entries with it (publish, changes, snapshot), rather than failing later on a field
it does not know.

    client_protocol(header)        the request's version (bad header: invalid_request)
    require_txn(conn, space, v)    upgrade_required when the space needs more than v

A current replica pays nothing: the space is read only for a request below the current
version."""

from __future__ import annotations

from typing import Any

from hub.store.spaces_sql import space_protocol_txn
from shared import PROTOCOL_HEADER, PROTOCOL_VERSION
from shared.errors import InvalidRequest, UpgradeRequired


def client_protocol(header: str | None) -> int:
    """The version a request's ``Quire-Protocol`` header names (absent: 1)."""
    if header is None:
        return 1
    if not header.isascii() or not header.isdigit() or len(header) > 6:
        raise InvalidRequest(f"{PROTOCOL_HEADER} must be a protocol version number")
    return int(header)


def is_current(version: int) -> bool:
    return version >= PROTOCOL_VERSION


def require_txn(conn: Any, space_ref: str, version: int) -> None:
    """Refuse a client speaking ``version`` when the space needs a later one (an unknown
    space is left to the endpoint, which answers not_found as it does today)."""
    required = space_protocol_txn(conn, space_ref)
    if required is not None and version < required:
        raise UpgradeRequired(
            f"this space holds entries that Quire protocol {version} cannot read (files kept "
            f"as their authors wrote them): upgrade quire to a version that speaks "
            f"protocol {required}", {"protocol": version, "required": required})
