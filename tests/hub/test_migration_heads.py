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
