"""Which database errors mean "unavailable, retry" (503) and which are bugs (500):
``hub/store/db.py``'s ``outage``. The outage itself, with PostgreSQL stopped under a
running hub, is tests/e2e/test_database_outage.py."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy.exc import (
    DataError,
    DisconnectionError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    ProgrammingError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout

from hub.store.db import OUTAGE_ERRORS, outage


class _Orig(Exception):
    sqlstate = "57P01"  # admin_shutdown: the server is going down


@pytest.mark.parametrize("exc,want", [
    (OperationalError("SELECT 1", {}, _Orig()), "_Orig (57P01)"),
    (OperationalError("SELECT 1", {}, Exception("connection refused")), "Exception"),
    (InterfaceError("SELECT 1", {}, Exception("connection already closed")), "Exception"),
    (DisconnectionError("ping failed"), "DisconnectionError"),
    (PoolTimeout("QueuePool limit reached"), "TimeoutError"),
    # SQLite: busy or the disk is an outage; "no such table" is a bug (same class)
    (OperationalError("SELECT 1", {}, sqlite3.OperationalError("database is locked")),
     "OperationalError"),
    (OperationalError("SELECT 1", {}, sqlite3.OperationalError("no such table: x")), None),
    # PostgreSQL: an error class of the statement, not the server
    (OperationalError("SELECT 1", {}, type("_E", (Exception,), {"sqlstate": "42P01"})()),
     None),
    # bugs in a statement stay 500 internal, with their traceback
    (ProgrammingError("SELEC 1", {}, Exception("syntax error")), None),
    (IntegrityError("INSERT", {}, Exception("duplicate key")), None),
    (DataError("INSERT", {}, Exception("value too long")), None),
    (ValueError("not a database error"), None),
])
def test_outage_names_what_a_retry_may_cure(exc: BaseException, want: str | None) -> None:
    assert outage(exc) == want
    if want is not None:
        assert isinstance(exc, OUTAGE_ERRORS)  # the app's handler sees every one of them


def test_a_stream_cut_by_an_outage_ends_without_its_end_line_and_without_a_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    """The database goes away after the first line of an NDJSON stream (a snapshot, say):
    the response ends there (the client sees a cut stream and retries) and the log has one
    ``stream_cut`` warning, no exception."""
    from starlette.applications import Starlette
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from hub.api.http import ndjson

    def lines() -> object:
        yield b'{"n":1}\n'
        yield b'{"n":2}\n'
        raise OperationalError("SELECT", {}, _Orig())

    async def stream(request: object) -> object:
        return await ndjson(lines())  # type: ignore[arg-type]

    app = Starlette(routes=[Route("/s", stream)])
    with TestClient(app, raise_server_exceptions=True) as c:
        r = c.get("/s")
    assert r.status_code == 200 and r.text == '{"n":1}\n{"n":2}\n'
    assert [rec.msg for rec in caplog.records] == ["stream_cut"]
    assert all(rec.exc_info is None for rec in caplog.records)
