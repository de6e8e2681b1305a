"""Run Alembic migrations from code (no alembic.ini needed on a user's machine).

``quire hub serve`` only checks that the database is at the newest revision; it reads the
revision (one row of ``alembic_version``) and the newest one (from the migration files'
``revision`` / ``down_revision`` lines) without importing Alembic, which cost every hub
start about 0.3 s. ``upgrade`` (init, migrate) runs Alembic itself. A test compares the
head read here with Alembic's (tests/hub/store/test_migration_heads.py).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from hub.store.db import normalize_url

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(url: str) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def current(url: str) -> str | None:
    """The database's revision (None for a database Alembic never ran on)."""
    from sqlalchemy import inspect, text

    from hub.store.db import make_engine

    engine = make_engine(url, pool_size=1)
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table("alembic_version"):
                return None
            rows = conn.execute(text("SELECT version_num FROM alembic_version")).all()
            return rows[0][0] if len(rows) == 1 else None
    finally:
        engine.dispose()


def _revisions() -> dict[str, tuple[str, ...]]:
    """revision -> the revisions it comes after, from each migration file's assignments."""
    out: dict[str, tuple[str, ...]] = {}
    for f in sorted((MIGRATIONS / "versions").glob("*.py")):
        values: dict[str, Any] = {}
        for node in ast.parse(f.read_text(encoding="utf-8"), str(f)).body:
            target: ast.expr
            if isinstance(node, ast.AnnAssign):
                target, value = node.target, node.value
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            else:
                continue
            if isinstance(target, ast.Name) and target.id in ("revision", "down_revision") \
                    and value is not None:
                values[target.id] = ast.literal_eval(value)
        down = values.get("down_revision")
        out[values["revision"]] = () if down is None else (
            (down,) if isinstance(down, str) else tuple(down))
    return out


def known_revisions() -> set[str]:
    """Every schema revision this release has a migration for."""
    return set(_revisions())


def alembic_head() -> str | None:
    """The newest revision: the one no other revision comes after (Alembic's own answer
    when the files do not form one line)."""
    revs = _revisions()
    later = {d for downs in revs.values() for d in downs}
    heads = [r for r in revs if r not in later]
    if len(heads) == 1:
        return heads[0]
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
