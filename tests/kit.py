"""Test helpers shared by the hub tests: databases, hub processes, and a small client that
speaks the wire protocol directly (the replica has its own client; these tests exercise the
hub without it)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pty
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

from shared.dpop import make_proof
from shared.entry import make_entry
from shared.ids import new_id
from shared.signing import new_private_key, public_b64
from shared.wire import Op, build_batch

PG_ADMIN_URL = os.environ.get("QUIRE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REPO = Path(__file__).resolve().parent.parent


def pg_available() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3):
            return True
    except Exception:
        return False


def unavailable(why: str) -> None:
    """Something a test needs is missing: skip it on a developer's machine; with ``CI`` set,
    fail it (.ci/run starts or installs everything the suite needs, so a test that skips
    there is a check that never runs)."""
    import pytest

    if os.environ.get("CI"):
        pytest.fail(why + "; CI is set, so this fails instead of skipping")
    pytest.skip(why)


def require_pg() -> None:
    """Every PostgreSQL fixture and test calls this, nothing else decides."""
    if not pg_available():
        unavailable(f"PostgreSQL is not reachable at {PG_ADMIN_URL} (set QUIRE_TEST_PG)")


@contextlib.contextmanager
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for one test (dropped afterwards)."""
    import psycopg

    name = "quire_t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> int:
    """The first of ``n`` consecutive free ports (a hub with ``--workers n`` serves worker
    i's /metrics on METRICS_PORT + i: a taken neighbour left that worker without one)."""
    while True:
        first = free_port()
        if first + n > 65536:
            continue
        socks = []
        try:
            for port in range(first, first + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()


def hub_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "hub.cli", *args]


def init_hub(data: Path, db: str | None = None) -> str:
    """``quire hub init --data DATA [--db DB] --json``, run in this process by the real
    command's ``main`` (hub/cli.py): a subprocess paid ~1 s of imports per hub, most of a
    hub test's setup (tests/hub/test_publish.py: 3.5 s a test on a loaded machine). The
    command line itself is tested as a process by the docs and operations tests."""
    from hub import cli as hub_cli

    argv = ["init", "--data", str(data), "--json", *(["--db", db] if db else [])]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = hub_cli.main(argv)
    if code != 0:
        raise RuntimeError(f"quire hub init failed ({code}):\n{out.getvalue()}\n"
                           f"{err.getvalue()}")
    return json.loads(out.getvalue())["enrollment_code"]


@dataclass
class HubProcess:
    data: Path
    port: int
    proc: subprocess.Popen[bytes]
    log: Path
    logfile: Any = None
    metrics_port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        """The process's separate metrics listener (never the public port)."""
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def stop(self, sig: int = 15) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.logfile is not None and not self.logfile.closed:
            self.logfile.close()


def start_hub(data: Path, port: int | None = None, db: str | None = None,
              env: dict[str, str] | None = None, workers: int = 1) -> HubProcess:
    port = port or free_port()
    cmd = hub_cmd("serve", "--data", str(data), "--port", str(port), "--workers", str(workers))
    if db:
        cmd += ["--db", db]
    log = data / f"serve-{port}.log"
    f = open(log, "ab")  # noqa: SIM115 (kept open for the child's life)
    env = {"QUIRE_HUB_METRICS_PORT": str(free_ports(workers)), **(env or {})}
    proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=REPO,
                            env={**os.environ, **env})
    hp = HubProcess(data, port, proc, log, f, int(env["QUIRE_HUB_METRICS_PORT"]))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            f.close()
            raise RuntimeError(f"hub exited: {log.read_text()}")
        try:
            if httpx2.get(hp.url + "/healthz", timeout=1).status_code == 200:
                return hp
        except httpx2.HTTPError:
            pass
        time.sleep(0.05)
    hp.stop(9)
    raise RuntimeError(f"hub did not start: {log.read_text()}")


class KitSigner(httpx2.Auth):
    """Signs a DPoP proof for every request that carries ``Authorization: DPoP <token>`` of a
    known member and no proof of its own, so tests can pass ``member.auth`` as plain headers
    (the replica does the same in ``replica/hubclient/auth.py``). Installed as the client's auth."""

    def __init__(self, base_url: str):
        self.base_url = base_url.rstrip("/")
        self.keys: dict[str, Any] = {}

    def auth_flow(self, request: httpx2.Request) -> Any:
        auth = request.headers.get("authorization", "")
        if auth.startswith("DPoP ") and "dpop" not in request.headers:
            token = auth[5:]
            key = self.keys.get(token)
            if key is not None:
                request.headers["DPoP"] = make_proof(key, request.method,
                                                     self.base_url + request.url.path,
                                                     access_token=token)
        yield request


def signer(client: Any) -> KitSigner:
    """The client's signer, installed on first use (the hub's public URL is its htu base)."""
    auth = getattr(client, "_auth", None)
    if isinstance(auth, KitSigner):
        return auth
    url = client.get("/v1/hub").json()["url"]
    s = KitSigner(url)
    client.auth = s
    return s


@dataclass
class Member:
    """A device on the hub, speaking the protocol with a real key and device-bound tokens."""

    client: Any  # httpx2.Client or starlette TestClient
    token: str  # access token (DPoP-bound)
    key: Any
    user_id: str
    device_id: str
    replicas: dict[str, str] = field(default_factory=dict)
    refresh_token: str | None = None

    def __post_init__(self) -> None:
        signer(self.client).keys[self.token] = self.key

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"DPoP {self.token}"}

    def use_token(self, token: str) -> None:
        """Switch to another access token (refreshed or delegated) bound to this key."""
        self.token = token
        signer(self.client).keys[token] = self.key

    def proof(self, method: str, path: str, **kw: Any) -> str:
        return make_proof(self.key, method, signer(self.client).base_url + path, **kw)

    def get(self, path: str, **kw: Any) -> Any:
        return self.client.get(path, headers=self.auth, **kw)

    def post(self, path: str, body: Any, **kw: Any) -> Any:
        return self.client.post(path, json=body, headers=self.auth, **kw)

    def head(self, space: str) -> dict[str, Any]:
        r = self.get(f"/v1/spaces/{space}/head")
        assert r.status_code == 200, r.text
        return r.json()

    def replica(self, space: str) -> str:
        if space not in self.replicas:
            r = self.post(f"/v1/spaces/{space}/replicas", {"name": "test"})
            assert r.status_code == 201, r.text
            self.replicas[space] = r.json()["replica_id"]
        return self.replicas[space]

    def batch(self, space: str, ops: list[Op], *, head: dict[str, Any] | None = None,
              batch_id: str | None = None) -> dict[str, Any]:
        h = head or self.head(space)
        b = build_batch(self.key, batch_id=batch_id or new_id(), replica_id=self.replica(space),
                        space=h["space"], epoch=h["epoch"], parent_seq=h["seq"],
                        parent_digest=h["digest"], ops=ops)
        return b.to_wire()

    def publish(self, space: str, ops: list[Op], **kw: Any) -> Any:
        return self.post(f"/v1/spaces/{space}/batches", self.batch(space, ops, **kw))

    def create_space(self, name: str) -> str:
        r = self.post("/v1/spaces", {"name": name})
        assert r.status_code == 201, r.text
        return r.json()["space"]["id"]

    def invite(self, space: str, role: str, ttl: int = 3600) -> str:
        r = self.post(f"/v1/spaces/{space}/invites", {"role": role, "ttl_seconds": ttl})
        assert r.status_code == 201, r.text
        return r.json()["code"]


def redeem(client: Any, code: str, name: str = "dev") -> Member:
    key = new_private_key()
    r = client.post("/v1/invites/redeem", json={"code": code, "device_name": name,
                                                "device_key": public_b64(key)})
    assert r.status_code == 201, r.text
    d = r.json()
    return Member(client, d["access_token"], key, d["user_id"], d["device_id"],
                  refresh_token=d["refresh_token"])


def put(entry_id: str, body: str = "text\n", base: str | None = None, **fields: Any) -> Op:
    return Op(make_entry({"id": entry_id, "title": fields.pop("title", entry_id),
                          "body": body, **fields}), base)


def delete(entry_id: str, base: str) -> Op:
    from shared.entry import tombstone

    return Op(tombstone(entry_id), base)


def ndjson(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@contextlib.contextmanager
def tempdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="quire-test-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_on_pty(cmd: list[str], env: dict[str, str], *, stream: str = "stdout",
               cwd: Path = REPO, timeout: float = 60) -> tuple[int, bytes]:
    """Run ``cmd`` with ``stream`` (stdout or stderr) on a pseudo-terminal and the other
    discarded: its exit code and every byte it wrote there (a terminal's output: colours,
    progress bars)."""
    master, slave = pty.openpty()
    streams = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, stream: slave}
    p = subprocess.Popen(cmd, stdout=streams["stdout"], stderr=streams["stderr"], env=env,
                         cwd=cwd)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout)
    os.close(master)
    return p.returncode, b"".join(chunks)
