"""Which database a hub's data folder belongs to, so that a ``quire hub`` command run
without the settings that name it refuses instead of making an empty one.

    quire hub init ──► DATA/database.json {"backend", "url" (password hidden)}
    any other quire hub command, before anything opens a database:
        settings name a database (QUIRE_HUB_DB_URL, --db, hub.toml) ──► go on
        none (the SQLite default, DATA/hub.db):
            database.json says PostgreSQL ──► refuse ``database_not_configured``: the
                                               command names the database and how to set it
            no hub.db, and DATA holds a hub ──► refuse ``database_missing`` (never create one)
            else                            ──► go on

Without it (before this module), a PostgreSQL hub's command run from a shell that had not
sourced ``/etc/quire/hub.env`` created an empty ``hub.db`` next to the key, migrated it and
failed with tracebacks, or worse, answered from that empty database.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from hub.settings import Settings

RECORD = "database.json"


def note(s: Settings) -> None:
    """Write the data folder's record of its database (``quire hub init``)."""
    url = s.database_url
    backend = url.split(":", 1)[0].split("+", 1)[0]
    doc = {"backend": "postgresql" if backend.startswith("postgres") else backend,
           "url": hide_password(url)}
    path = s.data_dir / RECORD
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f)
        f.write("\n")


def hide_password(url: str) -> str:
    return re.sub(r"://([^:/@]+):[^@]+@", r"://\1:***@", url)


def refusal(s: Settings) -> tuple[str, str] | None:
    """(code, message) when this command must not open ``s.database_url`` (see the module
    docstring), else None."""
    if s.db_url:  # the settings name the database: theirs is the one of record
        return None
    record: dict[str, Any] = {}
    try:
        record = json.loads((s.data_dir / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    if isinstance(record, dict) and record.get("backend") not in (None, "sqlite"):
        return ("database_not_configured",
                f"the hub in {s.data_dir} keeps its data in {record.get('backend')} "
                f"({record.get('url')}), and no database is set here: set QUIRE_HUB_DB_URL "
                "first, e.g. 'set -a; . /etc/quire/hub.env; set +a' (see "
                "docs/operations.md, \"Install\"); nothing was changed")
    if s.key_path.exists() and not (s.data_dir / "hub.db").exists():
        return ("database_missing",
                f"the hub in {s.data_dir} has no hub.db and no database is set: if its data "
                "is in PostgreSQL, set QUIRE_HUB_DB_URL (e.g. 'set -a; . /etc/quire/hub.env; "
                "set +a'); if hub.db was lost, see "
                "docs/operations.md, \"If the data folder is lost\"; nothing was created")
    return None
