"""Which database errors mean "unavailable, retry" (503) and which are bugs (500):
``hub/store/db.py``'s ``outage``. The outage itself, with PostgreSQL stopped under a
running hub, is tests/e2e/test_database_outage.py."""

from __future__ import annotations

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
