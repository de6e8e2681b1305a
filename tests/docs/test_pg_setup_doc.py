"""docs/operations.md, Install: the PostgreSQL role and database block, run as written on
this machine's PostgreSQL server, then a hub initialized on them by that role alone (no
superuser right) serves a publication. Before it (0506cf5) the doc never said how to make
them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

from tests.docs.test_operations_doc import blocks
from tests.kit.hubproc import init_hub, serve_hub
from tests.kit.pg import PG_ADMIN_URL, require_pg
from tests.kit.wire import put, redeem

pytestmark = pytest.mark.e2e


def _drop() -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS "quire" WITH (FORCE)')
        conn.execute('DROP ROLE IF EXISTS "quire"')


def test_the_documented_role_and_database_serve_a_hub(tmp_path: Path) -> None:
    require_pg()
    [body] = [b for lang, b in blocks()
              if lang == "sh" and b.startswith("# PostgreSQL role and database")]
    _drop()
    try:
        env = dict(os.environ, PG_ADMIN_URL=PG_ADMIN_URL,
                   PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", body], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        host = PG_ADMIN_URL.split("@", 1)[1].rsplit("/", 1)[0]
        url = f"postgresql://quire@{host}/quire"  # trust on loopback here; peer on Debian
        data = tmp_path / "hub"
        code = init_hub(data, url)
        hub = serve_hub(data, db=url)
        try:
            with httpx2.Client(base_url=hub.url, timeout=30) as c:
                owner = redeem(c, code, "owner")
                space = owner.create_space("pg-setup")
                assert owner.publish(space, [put("page/a")]).status_code == 201
        finally:
            hub.stop()
    finally:
        _drop()
