"""The end-to-end tier: real ``quire hub serve`` processes on loopback and the real ``quire``
CLI in subprocesses, one ``QUIRE_HOME`` per member.

- ``init_and_serve_hub``: a fresh hub (``quire hub init``, then served on a free port): a
  ``FreshHub`` with its URL and enrollment code;
- ``CliTeam``: a fresh space on it; ``CliMember``: a machine joined to it with the CLI;
- fixtures ``hub`` (one per session; each test makes its own space), ``owner`` (the
  machine that redeemed the enrollment code) and ``team`` (a fresh space per test). A
  folder's ``conftest.py`` imports the ones its tests use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from replica.app.service import status_doc
from replica.hubclient.auth import DPoPAuth, auth_for
from replica.hubclient.client import HubClient
from replica.machine.credentials import CredentialFile
from replica.machine.home import Home, HubConfig
from replica.vault import markdown as md
from shared.digest import genesis_digest
from shared.entry import Entry
from tests.kit.host import REPO, free_port

QUIRE = [sys.executable, "-c", "import sys; from replica.cli.main import main; sys.exit(main())"]


def device_auth(h: HubConfig) -> DPoPAuth:
    """The DPoP flow of the machine that holds ``h`` (its device key and tokens)."""
    auth = auth_for(h.key_path, CredentialFile(h.credential_path, h.key_path))
    assert auth is not None, "this machine holds no tokens for the hub"
    return auth


def quire(home: Path | None, *args: str, env: dict[str, str] | None = None, check: bool = True,
          timeout: float = 60) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ)
    e.pop("QUIRE_TEST_CRASH_AT", None)
    if home is not None:
        e["QUIRE_HOME"] = str(home)
    e.update(env or {})
    p = subprocess.run([*QUIRE, *args], capture_output=True, text=True, env=e, cwd=REPO,
                       timeout=timeout)
    # exit 3 (docs/cli.md, Exit codes): the command ran and lists what is left (held,
    # refused by the rules, unpublishable); tests that care check the code themselves
    if check and p.returncode not in (0, 3):
        raise AssertionError(f"quire {' '.join(args)} failed ({p.returncode}):\n"
                             f"{p.stdout}\n{p.stderr}")
    return p


def qjson(home: Path | None, *args: str, **kw: Any) -> dict[str, Any]:
    p = quire(home, *args, "--json", **kw)
    return json.loads(p.stdout)


@dataclass
class FreshHub:
    url: str
    data: Path
    enrollment_code: str
    proc: subprocess.Popen[bytes]


def init_and_serve_hub(data: Path, env: dict[str, str] | None = None) -> FreshHub:
    """A real ``quire hub serve`` on a free port; ``env``: hub settings (QUIRE_HUB_*)."""
    init = qjson(None, "hub", "init", "--data", str(data))
    port = free_port()
    log = open(data / "serve.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([*QUIRE, "hub", "serve", "--data", str(data), "--host",
                             "127.0.0.1", "--port", str(port)], stdout=log, stderr=log,
                            cwd=REPO, env={**os.environ, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    with HubClient(url) as c:
        while True:
            try:
                c._request("GET", "/healthz")
                break
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    proc.kill()
                    raise AssertionError((data / "serve.log").read_text()) from None
                time.sleep(0.1)
    log.close()
    return FreshHub(url, data, init["enrollment_code"], proc)


@pytest.fixture(scope="session")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FreshHub]:
    h = init_and_serve_hub(tmp_path_factory.mktemp("hub"))
    yield h
    h.proc.terminate()
    try:
        h.proc.wait(10)
    except subprocess.TimeoutExpired:
        h.proc.kill()
        h.proc.wait()


@pytest.fixture(scope="session")
def owner(hub: FreshHub, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("owner")
    qjson(home, "join", hub.url, "--invite", hub.enrollment_code, "--device", "owner")
    return home


class CliMember:
    def __init__(self, team: CliTeam, name: str, home: Path, vault: Path):
        self.team, self.name, self.home, self.vault = team, name, home, vault

    def run(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return quire(self.home, *args, **kw)

    def sync(self, **kw: Any) -> dict[str, Any]:
        return qjson(self.home, "sync", **kw)

    def status(self) -> dict[str, Any]:
        return qjson(self.home, "status")

    def local_status(self) -> dict[str, Any]:
        """The same document as ``quire status --json``, computed in-process (faster)."""
        return status_doc(Home(self.home).spaces()[0])

    def path(self, eid: str) -> Path:
        return md.entry_path(self.vault, eid)

    def write(self, e: Entry) -> None:
        p = self.path(e.id)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(md.render(e))

    def read(self, eid: str) -> Entry | None:
        p = self.path(eid)
        return md.read_entry(self.vault, eid, p.read_bytes())[0] if p.exists() else None

    def files(self) -> dict[str, bytes]:
        return {p.relative_to(self.vault).as_posix(): p.read_bytes()
                for p in sorted(self.vault.rglob("*.md"))}

    def replica_id(self) -> str:
        return Home(self.home).spaces()[0].replica_id

    def client(self) -> HubClient:
        h = Home(self.home).hubs()[0]
        return HubClient(h.url, auth=device_auth(h), hub_key=h.public_key)


class CliTeam:
    def __init__(self, hub: FreshHub, owner: Path, root: Path, name: str):
        self.hub, self.owner, self.root, self.name = hub, owner, root, name
        self.space = qjson(owner, "admin", "space", "create", name)["space"]

    def invite(self, role: str = "editor") -> str:
        # in-process with the owner's credential: the CLI verb is covered elsewhere, and each
        # CLI start costs ~0.5 s of imports
        h = Home(self.owner).hubs()[0]
        with HubClient(h.url, auth=device_auth(h),
                       hub_key=h.public_key) as c:
            return c.create_invite(self.space["id"], role)["code"]

    def member(self, name: str, role: str = "editor") -> CliMember:
        return self.members(name, role=role)[0]

    def members(self, *names: str, role: str = "editor") -> list[CliMember]:
        """Join several machines at once (the joins run in parallel processes)."""
        procs, out = [], []
        for name in names:
            home, vault = self.root / name / "home", self.root / name / "vault"
            env = dict(os.environ, QUIRE_HOME=str(home))
            env.pop("QUIRE_TEST_CRASH_AT", None)
            procs.append(subprocess.Popen(
                [*QUIRE, "join", self.hub.url, "--invite", self.invite(role), "--vault",
                 str(vault), "--device", name, "--json"], cwd=REPO, env=env,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            out.append(CliMember(self, name, home, vault))
        for p in procs:
            stdout, stderr = p.communicate(timeout=60)
            assert p.returncode == 0, (stdout, stderr)
        return out

    def batches(self, via: CliMember) -> list[dict[str, Any]]:
        """Every batch the hub holds in the current epoch (read through ``via``)."""
        with via.client() as c:
            head = c.head(self.space["id"])
            page = c.changes(head["space"], epoch=head["epoch"], after=0,
                             after_digest=genesis_digest(head["space"], head["epoch"]),
                             limit=5000)
        return [ch.batch.to_wire() for ch in page.changes]

    def batches_by(self, via: CliMember, m: CliMember) -> list[dict[str, Any]]:
        rid = m.replica_id()
        return [b for b in self.batches(via) if b["replica_id"] == rid]


_team_counter = 0


@pytest.fixture
def team(hub: FreshHub, owner: Path, tmp_path: Path) -> CliTeam:
    global _team_counter
    _team_counter += 1
    return CliTeam(hub, owner, tmp_path, f"t{os.getpid() % 10000}-{_team_counter}")
