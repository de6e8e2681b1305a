"""Migrations form one line: two revisions landed side by side (same id, or two heads) would
make `alembic upgrade head` fail on every fresh hub."""

from __future__ import annotations

import re

from hub.store.migrate import MIGRATIONS


def test_migrations_have_unique_ids_and_one_head() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    ids = []
    for f in sorted((MIGRATIONS / "versions").glob("*.py")):
        m = re.search(r"^revision = ['\"](\w+)['\"]", f.read_text(), re.M)
        assert m, f
        ids.append(m.group(1))
    assert len(ids) == len(set(ids)), f"duplicate revision ids: {sorted(ids)}"
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    heads = ScriptDirectory.from_config(cfg).get_heads()
    assert len(heads) == 1, f"more than one head: {heads}"


def test_the_head_read_without_alembic_is_alembics_head() -> None:
    """``quire hub serve`` checks the database against ``alembic_head()``, read from the
    files without importing Alembic; it must be the revision Alembic would upgrade to."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from hub.store.migrate import alembic_head

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    assert alembic_head() == ScriptDirectory.from_config(cfg).get_current_head()


def test_serve_refuses_a_database_behind_the_newest_revision(tmp_path) -> None:
    """The check ``serve`` makes without Alembic still refuses an old schema: a database one
    revision behind gets ``migration_required`` and no server starts."""
    import json
    import sqlite3
    import subprocess

    from hub.store.migrate import _revisions, alembic_head
    from tests.kit.hubproc import hub_cmd, init_hub

    data = tmp_path / "hub"
    init_hub(data)
    older = _revisions()[alembic_head()][0]
    with sqlite3.connect(data / "hub.db") as db:
        db.execute("UPDATE alembic_version SET version_num = ?", (older,))
    out = subprocess.run(hub_cmd("serve", "--data", str(data), "--port", "1", "--json"),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["error"]["code"] == "migration_required", doc


def _down_to_base_and_up(url: str) -> None:
    from alembic import command

    from hub.store.migrate import alembic_config

    cfg = alembic_config(url)
    command.upgrade(cfg, "head")
    command.downgrade(cfg, "base")  # every downgrade runs, newest first
    command.upgrade(cfg, "head")


def test_every_migration_downgrades_and_upgrades_again_on_sqlite(tmp_path) -> None:
    """An operator who rolls a hub back runs the downgrades: each must work on SQLite, where
    ``batch_alter_table`` rebuilds a table that other tables point at."""
    _down_to_base_and_up(f"sqlite:///{tmp_path / 'hub.db'}")


def test_every_migration_downgrades_and_upgrades_again_on_postgresql() -> None:
    from tests.kit.pg import pg_database, require_pg

    require_pg()
    with pg_database() as url:
        _down_to_base_and_up(url.replace("postgresql://", "postgresql+psycopg://", 1))
