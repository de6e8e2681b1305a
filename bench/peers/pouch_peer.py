"""The CouchDB-protocol peer: ``pouchdb-server`` (npm) on loopback, replicated into a fresh
local PouchDB (LevelDB) database by ``pouch_replicate.js``.

This is what a team would do with CouchDB-style sync. Documents carry the same fields as
Quire entries; the server runs in memory so its disk does not count against it.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx

from bench.corpus import pouch_docs
from bench.proc import Server, Timed, Unavailable, free_port, run_timed

HERE = Path(__file__).resolve().parent
NODE_DIR = HERE.parent / ".node"
SERVER_BIN = NODE_DIR / "node_modules" / ".bin" / "pouchdb-server"
CLIENT_MOD = NODE_DIR / "node_modules" / "pouchdb-node"
REPLICATE_JS = HERE / "pouch_replicate.js"


def ensure_installed(timeout: float = 600) -> None:
    """Install pouchdb-server and pouchdb-node into bench/.node (from its package.json)."""
    if SERVER_BIN.exists() and CLIENT_MOD.exists():
        return
    if shutil.which("npm") is None or shutil.which("node") is None:
        raise Unavailable("node/npm not installed")
    t = run_timed(["npm", "ci", "--prefix", str(NODE_DIR), "--no-audit", "--no-fund",
                   "--ignore-scripts"],
                  timeout=timeout)
    if t.returncode != 0 or not SERVER_BIN.exists():
        raise Unavailable(f"npm install failed: {t.stderr.strip()[-200:]}")


class PouchPeer:
    def __init__(self, root: Path, env: dict[str, str]):
        ensure_installed()
        self.root = root
        self.env = env
        self.port = 0
        self.server: Server | None = None
        self.revs: dict[str, dict[str, str]] = {}
        self.version = ""
        self.http: httpx.Client | None = None

    def start(self) -> None:
        self.port = free_port()
        work = self.root / "pouchdb-server"
        work.mkdir(parents=True, exist_ok=True)
        self.server = Server("pouchdb-server", [
            str(SERVER_BIN), "--in-memory", "--host", "127.0.0.1", "--port", str(self.port),
            "--no-stdout-logs",
        ], log_dir=self.root, cwd=work, env=self.env)
        self.server.wait_http(self.base_url + "/", timeout=60)
        self.http = httpx.Client(base_url=self.base_url, timeout=120)
        self.version = self.http.get("/").json().get("version", "")

    def stop(self) -> None:
        if self.http:
            self.http.close()
        if self.server:
            self.server.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def bulk_load(self, db: str, entries: list[dict[str, Any]], batch: int = 500) -> float:
        """Create ``db`` and store the entries with ``_bulk_docs`` in chunks; seconds."""
        assert self.http is not None
        r = self.http.put(f"/{db}")
        if r.status_code not in (201, 412):
            raise Unavailable(f"create db: HTTP {r.status_code} {r.text[:200]}")
        revs = self.revs.setdefault(db, {})
        docs = list(pouch_docs(entries))
        start = time.perf_counter()
        for i in range(0, len(docs), batch):
            chunk = docs[i:i + batch]
            for d in chunk:
                if d["_id"] in revs:
                    d["_rev"] = revs[d["_id"]]
            r = self.http.post(f"/{db}/_bulk_docs", json={"docs": chunk})
            if r.status_code != 201:
                raise Unavailable(f"_bulk_docs: HTTP {r.status_code} {r.text[:200]}")
            for row in r.json():
                if "rev" not in row:
                    raise Unavailable(f"_bulk_docs refused {row}")
                revs[row["id"]] = row["rev"]
        return time.perf_counter() - start

    def replicate(self, db: str, target: Path) -> Timed:
        t = run_timed(["node", str(REPLICATE_JS), f"{self.base_url}/{db}", str(target)],
                      env=self.env).check("pouch_replicate.js")
        try:
            t.details = json.loads(t.stdout.strip().splitlines()[-1])  # type: ignore[attr-defined]
        except (ValueError, IndexError):
            t.details = {}  # type: ignore[attr-defined]
        return t
