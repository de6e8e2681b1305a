"""``quire hub`` commands find the hub's database of record or refuse clearly
(hub/database_of_record.py), and ``migrate --json`` answers in JSON on any schema.

On 0506cf5 each of these made a database or printed a traceback: a PostgreSQL hub's
``enroll`` run without QUIRE_HUB_DB_URL created an empty ``hub.db`` beside the key and
failed with a traceback; a lost ``hub.db`` was silently made again, empty; ``migrate
--json`` on a database from a newer release printed Alembic's traceback."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

from tests.kit.host import REPO
from tests.kit.hubproc import hub_cmd, init_hub
from tests.kit.pg import pg_database, require_pg


def _hub(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("QUIRE_HUB_")}
    e.update(env or {})
    return subprocess.run(hub_cmd(*args), cwd=REPO, env=e, capture_output=True, text=True,
                          timeout=120)


def _error(p: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    return json.loads(p.stdout)["error"]


def test_a_postgresql_hub_without_its_url_refuses_and_creates_nothing(tmp_path: Path) -> None:
    require_pg()
    data = tmp_path / "hub"
    with pg_database() as url:
        p = _hub("init", "--data", str(data), "--json", env={"QUIRE_HUB_DB_URL": url})
        assert p.returncode == 0, p.stderr
        for args in (["enroll"], ["record"], ["migrate"], ["serve", "--port", "1"]):
            err = _error(_hub(*args, "--data", str(data), "--json"))
            assert err["code"] == "database_not_configured"
            assert "QUIRE_HUB_DB_URL" in err["message"] and "postgresql" in err["message"]
            assert not (data / "hub.db").exists()
        p = _hub("enroll", "--data", str(data), "--json", env={"QUIRE_HUB_DB_URL": url})
        assert p.returncode == 0, p.stderr
    record = json.loads((data / "database.json").read_text())
    assert record["backend"] == "postgresql" and "***" not in url  # no password here anyway


def test_a_lost_hub_db_is_not_made_again(tmp_path: Path) -> None:
    data = tmp_path / "hub"
    init_hub(data)
    (data / "hub.db").unlink()
    err = _error(_hub("enroll", "--data", str(data), "--json"))
    assert err["code"] == "database_missing" and "If the data folder is lost" in err["message"]
    assert not (data / "hub.db").exists()


def test_migrate_json_on_a_newer_schema_answers_in_json(tmp_path: Path) -> None:
    data = tmp_path / "hub"
    init_hub(data)
    with sqlite3.connect(data / "hub.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999_from_the_future'")
    err = _error(_hub("migrate", "--data", str(data), "--json"))
    assert err["code"] == "schema_newer" and "9999_from_the_future" in err["message"]
    with sqlite3.connect(data / "hub.db") as conn:  # nothing changed
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] \
            == "9999_from_the_future"
