"""The Quire side of the benchmarks: a real ``quire hub serve`` subprocess, the real replica
CLI (``quire join``, ``quire sync``) and, for publishing load, a protocol-level client that
builds and signs batches with ``shared.wire.build_batch`` (docs/protocol.md).

Anything the CLI or the hub does not offer yet raises ``Unavailable`` with the reason, so
the scenario shows up in the table as unavailable instead of stopping the run.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx2 as httpx

from bench.proc import Server, Timed, Unavailable, free_port, run_timed
from shared.entry import make_entry
from shared.ids import new_id
from shared.signing import new_private_key, public_b64
from shared.wire import Op, build_batch

PY = sys.executable


def quire_cmd() -> list[str]:
    """The ``quire`` console script of this interpreter's environment (replica.cli.entry:main),
    as people and agents run it: a command a running watcher can serve asks it first."""
    if importlib.util.find_spec("replica.cli.entry") is None:
        raise Unavailable("the quire CLI (replica/cli/entry.py) is not there yet")
    script = Path(PY).parent / "quire"
    if script.exists():
        return [str(script)]
    return [PY, "-c", "import sys; from replica.cli.entry import main; sys.exit(main())"]


def hub_cmd() -> list[str]:
    try:
        return [*quire_cmd(), "hub"]
    except Unavailable:
        if importlib.util.find_spec("hub.cli") is None:
            raise Unavailable("the hub CLI (hub/cli.py) is not there yet") from None
        return [PY, "-m", "hub.cli"]


def _json_out(t: Timed, what: str) -> dict[str, Any]:
    lines = [ln for ln in t.stdout.strip().splitlines() if ln.strip()]
    doc: Any = None
    if lines:
        try:
            doc = json.loads(lines[-1])
        except ValueError:
            doc = None
    # exit 3: the command ran and lists something left over (docs/cli.md, Exit codes)
    if t.returncode not in (0, 3) or not isinstance(doc, dict) or "error" in doc:
        detail = doc.get("error") if isinstance(doc, dict) else None
        tail = detail or (t.stderr or t.stdout).strip().splitlines()[-2:]
        raise Unavailable(f"{what} failed (exit {t.returncode}): {str(tail)[:300]}")
    return doc


class Hub:
    """One hub: its data folder, database and ``quire hub serve`` process."""

    def __init__(self, name: str, root: Path, env: dict[str, str], db_url: str | None = None,
                 workers: int = 1):
        self.name = name
        self.root = root
        self.data = root / f"{name}-data"
        # the publish-rate load is 16 clients of ONE device: lift the per-device limit
        self.env = {"QUIRE_HUB_PUBLICATIONS_PER_MIN": "10000000", **env}
        self.db_url = db_url
        self.workers = workers
        self.server: Server | None = None
        self.port = 0
        self.enrollment_code = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def init(self) -> None:
        cmd = [*hub_cmd(), "init", "--data", str(self.data), "--json"]
        if self.db_url:
            cmd += ["--db", self.db_url]
        self.port = free_port()
        cmd += ["--public-url", self.url]
        doc = _json_out(run_timed(cmd, env=self.env, timeout=120), "quire hub init")
        self.enrollment_code = doc["enrollment_code"]

    def start(self) -> None:
        self.server = Server(self.name, [
            *hub_cmd(), "serve", "--data", str(self.data), "--host", "127.0.0.1",
            "--port", str(self.port), "--public-url", self.url,
            *(["--workers", str(self.workers)] if self.workers > 1 else []),
        ], log_dir=self.root, env=self.env)
        self.server.wait_http(self.url + "/healthz", timeout=60)

    def stop(self) -> None:
        if self.server:
            self.server.stop()


class Member:
    """A person's machine: its own ``QUIRE_HOME``, driven through the real CLI."""

    def __init__(self, name: str, root: Path, env: dict[str, str]):
        self.name = name
        self.home = root / f"home-{name}"
        self.home.mkdir(parents=True, exist_ok=True)
        self.env = dict(env, QUIRE_HOME=str(self.home))

    def run(self, *args: str, timeout: float = 1800) -> tuple[Timed, dict[str, Any]]:
        t = run_timed([*quire_cmd(), *args, "--json"], env=self.env, timeout=timeout)
        return t, _json_out(t, "quire " + " ".join(args[:2]))

    def join(self, url: str, code: str, vault: Path | None = None,
             only: Sequence[str] = ()) -> Timed:
        """``quire join``; ``only``: the globs of a partial replica (``--only``)."""
        args = ["join", url, "--invite", code, "--device", self.name]
        if vault is not None:
            args += ["--vault", str(vault)]
        if only:
            args += ["--only", *only]
        return self.run(*args)[0]

    def sync(self, space: str | None = None) -> Timed:
        return self.run("sync", *([space] if space else []))[0]

    def status(self, space: str | None = None) -> dict[str, Any]:
        return self.run("status", *([space] if space else []))[1]

    def create_space(self, name: str) -> str:
        doc = self.run("admin", "space", "create", name)[1]
        return str(doc["space"]["id"])

    def invite(self, space: str, role: str = "editor") -> str:
        return str(self.run("admin", "invite", "create", space, "--role", role)[1]["code"])


def _raise_for(r: httpx.Response, what: str) -> dict[str, Any]:
    try:
        doc = r.json()
    except ValueError:
        doc = {}
    if r.status_code >= 400:
        err = doc.get("error", {}) if isinstance(doc, dict) else {}
        raise Unavailable(f"{what}: HTTP {r.status_code} {err.get('code', '')} "
                          f"{str(err.get('message', r.text))[:200]}")
    return doc


def auth_headers(scheme: str, token: str, key: Any, method: str, url: str) -> dict[str, str]:
    """Headers that authenticate one request: a bearer credential, or a DPoP-bound access
    token with a fresh proof signed by the device key (docs/protocol.md)."""
    headers = {"Authorization": f"{scheme} {token}"}
    if scheme == "DPoP":
        from shared.dpop import make_proof

        headers["DPoP"] = make_proof(key, method, url, access_token=token)
    return headers


class DeviceAuth(httpx.Auth):
    def __init__(self, scheme: str, token: str, key: Any, public_url: str):
        self.scheme, self.token, self.key = scheme, token, key
        self.public_url = public_url.rstrip("/")

    def auth_flow(self, request: httpx.Request) -> Any:
        request.headers.update(auth_headers(self.scheme, self.token, self.key, request.method,
                                            self.public_url + request.url.path))
        yield request


class Publisher:
    """A protocol-level publisher: redeems an invite for a device credential, registers a
    replica and publishes signed batches (the load generator and the bulk loader use it).

    Speaks both credential schemes the hub has had: a bearer device credential (``token``
    in the redeem answer) and DPoP-bound access tokens (``access_token``); the bench runs
    hubs with a long ``access_ttl`` so no refresh is needed during a run."""

    def __init__(self, hub_url: str, code: str, name: str = "bench-publisher"):
        self.hub_url = hub_url
        self.key = new_private_key()
        self.http = httpx.Client(base_url=hub_url, timeout=300)
        info = _raise_for(self.http.get("/v1/hub"), "hub info")
        self.public_url = str(info.get("url") or hub_url)
        r = self.http.post("/v1/invites/redeem", json={
            "code": code, "device_name": name, "device_key": public_b64(self.key)})
        doc = _raise_for(r, "redeem invite")
        if doc.get("access_token"):
            self.scheme, self.token = "DPoP", str(doc["access_token"])
        else:
            self.scheme, self.token = "Bearer", str(doc["token"])
        self.space = (doc.get("space") or {}).get("id") if isinstance(doc.get("space"), dict) \
            else doc.get("space")
        self.http.auth = DeviceAuth(self.scheme, self.token, self.key, self.public_url)
        self.replica_id = ""
        self.versions: dict[str, str] = {}
        self.epoch = ""
        self.seq = 0
        self.digest = ""

    def close(self) -> None:
        self.http.close()

    def attach(self, space: str) -> None:
        self.space = space
        r = self.http.post(f"/v1/spaces/{space}/replicas", json={"name": "bench"})
        self.replica_id = _raise_for(r, "register replica")["replica_id"]
        self.refresh_head()

    def refresh_head(self) -> dict[str, Any]:
        head = _raise_for(self.http.get(f"/v1/spaces/{self.space}/head"), "head")
        self.space = head.get("space", self.space)
        self.epoch, self.seq, self.digest = head["epoch"], head["seq"], head["digest"]
        return head

    def ops_for(self, entries: list[dict[str, Any]]) -> list[Op]:
        ops = []
        for e in entries:
            entry = make_entry(e)
            ops.append(Op(entry=entry, base=self.versions.get(entry.id)))
        return ops

    def publish(self, entries: list[dict[str, Any]], attempts: int = 20) -> dict[str, Any]:
        """Publish one batch of puts; refreshes the head and retries on ``head_changed``."""
        ops = self.ops_for(entries)
        batch_id = new_id()
        for _ in range(attempts):
            batch = build_batch(self.key, batch_id=batch_id, replica_id=self.replica_id,
                                space=self.space, epoch=self.epoch, parent_seq=self.seq,
                                parent_digest=self.digest, ops=ops)
            r = self.http.post(f"/v1/spaces/{self.space}/batches", json=batch.to_wire())
            if r.status_code == 409 and r.json().get("error", {}).get("code") == "head_changed":
                details = r.json()["error"].get("details") or {}
                if "seq" in details:
                    self.seq, self.digest = details["seq"], details["digest"]
                else:
                    self.refresh_head()
                batch_id = new_id()
                continue
            receipt = _raise_for(r, "publish batch")["receipt"]
            self.seq, self.digest = receipt["seq"], receipt["head"]
            for op in ops:
                self.versions[op.entry.id] = op.entry.version
            return receipt
        raise Unavailable("publish: head kept changing")

    def snapshot_lines(self) -> int:
        """Stream the whole snapshot, discarding it; returns the number of lines."""
        n = 0
        with self.http.stream("GET", f"/v1/spaces/{self.space}/snapshot") as r:
            if r.status_code >= 400:
                r.read()
                _raise_for(r, "snapshot")
            for _line in r.iter_lines():
                n += 1
        return n
