"""The machine's PostgreSQL server: whether it answers, and a fresh database per test."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

from tests.kit.host import unavailable

PG_ADMIN_URL = os.environ.get("QUIRE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def pg_available() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3):
            return True
    except Exception:
        return False


def require_pg() -> None:
    """Every PostgreSQL fixture and test calls this, nothing else decides."""
    if not pg_available():
        unavailable(f"PostgreSQL is not reachable at {PG_ADMIN_URL} (set QUIRE_TEST_PG)")


@contextlib.contextmanager
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for one test (dropped afterwards)."""
    import psycopg

    name = "quire_t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
