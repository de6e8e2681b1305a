"""docs/operations.md, "Restoring" and "If the data folder is lost", run as written on
SQLite and on PostgreSQL: real hub processes, the real CLI, members who published after the
backup.

Before ``--lost-data`` and ``quire accept-restore`` (main at 0506cf5) the documented steps
were prose (the backup as ``hub.db``, then an epoch bump) and every member who synced after
the backup refused the hub for good (``snapshot_rollback``, exit 6): what was published
after the backup then existed only in their vaults. Now: the restored hub is refused until
the member accepts that restore (a hub cannot roll replicas back by itself), then every
change made after the backup comes back, exactly once, and every vault is as it was."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shared.digest import genesis_digest
from shared.entry import make_entry
from tests.docs.test_operations_doc import blocks
from tests.kit.cli import CliMember, CliTeam, FreshHub, qjson, quire
from tests.kit.hubproc import init_hub, serve_hub
from tests.kit.pg import pg_database, require_pg

pytestmark = pytest.mark.e2e
DAY = "2026-11-30"  # the date the doc's blocks name


def _block(first: str) -> str:
    [body] = [b for lang, b in blocks() if lang == "sh" and b.startswith(first)]
    return body


def _page(eid: str, body: str):  # noqa: ANN202 - an Entry
    return make_entry({"id": eid, "title": eid.rsplit("/", 1)[-1], "body": body})


def _sync_all(members: list[CliMember]) -> None:
    for _ in range(2):
        for m in members:
            p = quire(m.home, "sync", "--json", check=False)
            assert p.returncode == 0, (m.name, p.stdout, p.stderr)


def _bash(body: str, cwd: Path, env: dict[str, str]) -> None:
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{body}\n---\n{r.stdout}\n{r.stderr}"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_lost_data_folder_procedure_brings_every_change_back_once(
        tmp_path: Path, backend: str) -> None:
    with contextlib.ExitStack() as stack:
        db = None
        if backend == "postgresql":
            require_pg()
            db = stack.enter_context(pg_database())
        env = dict(os.environ, DATA=str(tmp_path / "hub"),
                   PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
        env.pop("QUIRE_HUB_DB_URL", None)
        if db:
            env["QUIRE_HUB_DB_URL"] = db
        data = tmp_path / "hub"
        code = init_hub(data, db=db)
        hub = serve_hub(data, db=db)
        stack.callback(lambda: hub.stop())
        owner = tmp_path / "owner"
        qjson(owner, "join", hub.url, "--invite", code, "--device", "owner")
        team = CliTeam(FreshHub(hub.url, data, "", hub.proc), owner, tmp_path, "lost")
        ann, ben = members = team.members("ann", "ben")
        ann.write(_page("page/plan", "before the backup\n"))
        ben.write(_page("page/notes", "before the backup\n"))
        _sync_all(members)

        # the backup, as the doc's Backups blocks take it
        bk = tmp_path / "backups"
        bk.mkdir()
        if db:
            subprocess.run(["pg_dump", "--format=custom", f"--file=quire-{DAY}.dump", db],
                           cwd=bk, check=True)
        else:
            qjson(None, "hub", "backup", "--data", str(data), str(bk / f"hub-{DAY}.db"))
        shutil.copyfile(data / "hub_key.pem", bk / f"hub_key-{DAY}.pem")

        # after the backup: an edit, a create, a delete
        ann.write(_page("page/plan", "ann's edit after the backup\n"))
        ann.write(_page("page/new", "made after the backup\n"))
        ben.path("page/notes").unlink()
        _sync_all(members)
        files = {m.name: m.files() for m in members}
        assert files["ann"] == files["ben"] and set(files["ann"]) == {"page/plan.md",
                                                                      "page/new.md"}

        # the data folder (or the database) is lost, with the hub stopped
        hub.stop()
        shutil.rmtree(data)
        if db:
            import psycopg

            with psycopg.connect(db, autocommit=True) as conn:
                conn.execute("DROP SCHEMA public CASCADE")
                conn.execute("CREATE SCHEMA public")
        which = "PostgreSQL" if db else "SQLite"
        _bash(_block(f"# Data folder lost ({which})"), bk, env)
        hub = serve_hub(data, port=hub.port, db=db)

        # the restored hub is older than both replicas: refused, nothing applied
        for m in members:
            p = quire(m.home, "sync", "--json", check=False)
            assert p.returncode == 6, (p.stdout, p.stderr)
            err = json.loads(p.stdout)["error"]
            assert err["details"]["reason"] == "restore_behind", err
            assert "quire accept-restore" in err["message"]
            assert m.files() == files[m.name]
        # the member's step, as written, on each machine
        for m in members:
            _bash(_block("# On each member's machine"), tmp_path,
                  dict(env, QUIRE_HOME=str(m.home)))
        _sync_all(members)
        assert {m.name: m.files() for m in members} == files
        with ann.client() as c:
            head = c.head(team.space["id"])
            page = c.changes(head["space"], epoch=head["epoch"], after=0,
                             after_digest=genesis_digest(head["space"], head["epoch"]),
                             limit=5000)
        ops = [op.entry_id for ch in page.changes for op in ch.batch.ops]
        assert sorted(ops) == sorted({"page/plan", "page/new", "page/notes"}), ops
        cat = team.member("cat")  # a new member's clone: what the hub holds now
        assert cat.files() == files["ann"]
        # nothing left to accept: a clear refusal
        p = quire(ann.home, "accept-restore", "--json", check=False)
        assert p.returncode == 1
        assert json.loads(p.stdout)["error"]["details"]["reason"] == "no_restore_refused"

        # "Restoring": a backup put back into a hub that kept its data folder (the
        # authorization of today, the content of the backup); nothing for members to accept
        for f in bk.iterdir():
            f.unlink()
        if db:
            subprocess.run(["pg_dump", "--format=custom", f"--file=quire-{DAY}.dump", db],
                           cwd=bk, check=True)
            env["QUIRE_SCRATCH_DB_URL"] = stack.enter_context(pg_database())
        else:
            qjson(None, "hub", "backup", "--data", str(data), str(bk / f"hub-{DAY}.db"))
        ann.write(_page("page/plan", "second edit, after the second backup\n"))
        ben.write(_page("page/late", "made after the second backup\n"))
        _sync_all([ann, ben, cat])
        files = {m.name: m.files() for m in (ann, ben, cat)}
        hub.stop()
        _bash(_block(f"# Restoring ({which})"), bk, env)
        hub = serve_hub(data, port=hub.port, db=db)
        _sync_all([ann, ben, cat])
        assert {m.name: m.files() for m in (ann, ben, cat)} == files
        with ann.client() as c:
            head = c.head(team.space["id"])
            page = c.changes(head["space"], epoch=head["epoch"], after=0,
                             after_digest=genesis_digest(head["space"], head["epoch"]),
                             limit=5000)
        ops = [op.entry_id for ch in page.changes for op in ch.batch.ops]
        assert sorted(ops) == ["page/late", "page/plan"], ops  # each once
        dan = team.member("dan")
        assert dan.files() == files["ann"]
