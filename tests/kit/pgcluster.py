"""A throwaway PostgreSQL server of a test's own (``initdb`` + ``pg_ctl`` from Debian's
``/usr/lib/postgresql/*/bin``), on a free port, so a test can stop and start the database
under a hub without touching the machine's shared server at 5432 (tests/kit/pg.py).

As root (PostgreSQL refuses to run as root) the server runs as the ``postgres`` user; its
folder is a fresh one under /tmp that user can enter. No fsync: nothing here must survive a
power cut.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.kit.host import free_port, unavailable


def _bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


class PgCluster:
    """``start()``, ``stop()`` (fast shutdown: connections are cut, as in an outage),
    ``url(db)``, ``remove()``."""

    def __init__(self) -> None:
        bindir = _bin()
        if bindir is None:
            unavailable("PostgreSQL's server programs are not installed "
                        "(Debian: apt-get install postgresql)")
        self.bin = bindir
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="quire-pg-", dir="/tmp"))
        self.data = self.root / "data"
        self._user: Any = None
        if os.geteuid() == 0:
            try:
                self._user = pwd.getpwnam("postgres")
            except KeyError:
                unavailable("running as root and there is no postgres user to run a server")
            os.chown(self.root, self._user.pw_uid, self._user.pw_gid)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres",
                  "--no-sync", "-E", "UTF8")

    def _run(self, prog: str, *args: str) -> None:
        def as_owner() -> None:
            if self._user is not None:
                os.setgid(self._user.pw_gid)
                os.setuid(self._user.pw_uid)

        out = subprocess.run([str(self.bin / prog), *args], capture_output=True, text=True,
                             preexec_fn=as_owner, cwd=self.root, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"{prog} failed: {out.stdout}\n{out.stderr}")

    def start(self) -> None:
        opts = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"),
                  "-o", opts, "-w", "-t", "60", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def remove(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except RuntimeError:
            pass  # not running
        shutil.rmtree(self.root, ignore_errors=True)
