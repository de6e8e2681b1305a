"""The git peer: the vault committed to a bare repository served by ``git daemon``.

This is what a team would do without Quire: keep the memory folder in git. Clone, pull and
push go over the git protocol on loopback, so the server packs objects per request just as
a real remote does.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from bench.corpus import vault_path, write_vault
from bench.files_side import write as write_files
from bench.proc import Server, Timed, Unavailable, free_port, run_timed

GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
}


class GitPeer:
    def __init__(self, root: Path, env: dict[str, str]):
        if shutil.which("git") is None:
            raise Unavailable("git is not installed")
        self.root = root
        self.env = dict(env, **GIT_ENV, HOME=str(root))
        self.base = root / "served"
        self.base.mkdir(parents=True)
        self.server: Server | None = None
        self.port = 0
        self.version = self.git("--version").stdout.strip()

    def git(self, *args: str, cwd: Path | None = None) -> Timed:
        return run_timed(["git", *args], cwd=cwd, env=self.env).check(f"git {args[0]}")

    def start(self) -> None:
        self.port = free_port()
        self.server = Server("git-daemon", [
            "git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
            f"--base-path={self.base}", "--listen=127.0.0.1", f"--port={self.port}",
            "--informative-errors", str(self.base),
        ], log_dir=self.root, env=self.env)
        self.server.wait_tcp(self.port)

    def stop(self) -> None:
        if self.server:
            self.server.stop()

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}.git"

    def create(self, name: str, entries: list[dict[str, Any]]) -> Path:
        """A bare repo ``name`` holding the entries as vault files in one commit, pushed over
        the daemon; returns the author's working tree."""
        work = self.root / f"{name}-author"
        write_vault(entries, work)
        return self.create_tree(name, work, f"{len(entries)} entries")

    def create_files(self, name: str, files: dict[str, bytes]) -> Path:
        """The same with any files (path -> bytes): notes and attachments."""
        work = self.root / f"{name}-author"
        write_files(work, files)
        return self.create_tree(name, work, f"{len(files)} files")

    def create_tree(self, name: str, work: Path, message: str) -> Path:
        """Commit the working tree ``work`` as bare repo ``name``, pushed over the daemon."""
        self.git("init", "-q", "-b", "main", str(work))
        self.git("add", "-A", cwd=work)
        self.git("commit", "-q", "-m", message, cwd=work)
        self.git("init", "-q", "--bare", "-b", "main", str(self.base / f"{name}.git"))
        self.git("remote", "add", "origin", self.url(name), cwd=work)
        self.git("push", "-q", "origin", "main", cwd=work)
        return work

    def clone(self, name: str, dest: Path) -> Timed:
        return self.git("clone", "-q", self.url(name), str(dest))

    def change_and_push(self, work: Path, changed: list[dict[str, Any]]) -> Timed:
        """Write changed entries, commit, and push (the push is timed)."""
        write_vault(changed, work)
        return self.commit_push(work, f"{len(changed)} changed")

    def change_files_and_push(self, work: Path, changed: dict[str, bytes]) -> Timed:
        """The same with any files (path -> new bytes)."""
        write_files(work, changed)
        return self.commit_push(work, f"{len(changed)} changed")

    def commit_push(self, work: Path, message: str) -> Timed:
        self.git("add", "-A", cwd=work)
        self.git("commit", "-q", "-m", message, cwd=work)
        return self.git("push", "-q", "origin", "main", cwd=work)

    def pull(self, clone: Path) -> Timed:
        return self.git("pull", "-q", "--ff-only", cwd=clone)

    def noop_pull(self, clone: Path) -> Timed:
        return self.pull(clone)

    def status(self, clone: Path) -> Timed:
        """``git status`` of the work tree (a cold process: it stats every tracked file)."""
        return self.git("status", "--porcelain", cwd=clone)

    def bulk_push(self, name: str, entries: list[dict[str, Any]], batch: int) -> float:
        """Publish entries in commits of ``batch`` files, each pushed; total seconds."""
        work = self.root / f"{name}-bulk"
        self.git("init", "-q", "--bare", "-b", "main", str(self.base / f"{name}.git"))
        self.git("init", "-q", "-b", "main", str(work))
        self.git("remote", "add", "origin", self.url(name), cwd=work)
        total = 0.0
        for i in range(0, len(entries), batch):
            chunk = entries[i:i + batch]
            start = time.perf_counter()
            write_vault(chunk, work)
            self.git("add", "-A", cwd=work)
            self.git("commit", "-q", "-m", f"batch {i // batch}", cwd=work)
            self.git("push", "-q", "origin", "main", cwd=work)
            total += time.perf_counter() - start
        return total

    def files_present(self, clone: Path, entries: list[dict[str, Any]]) -> bool:
        return all(vault_path(clone, e["id"]).exists() for e in entries[:50])
