"""The in-process tier: replicas talking to the REAL hub application (``hub/app.py``) on a
temporary SQLite database, through Starlette's in-process transport (no sockets, no
processes). Tokens, DPoP proofs, roles, rules, the guard and ``?rebase=1`` are the hub's own.

    InprocHub ── create_app(settings) ── AppTransport (httpx2.ASGITransport on an event loop
       │                                               of its own, called synchronously)
       │  owner: a HubClient of the device that redeemed the enrollment code
       └── Space (a fresh space per test or per hypothesis example)
             └── Local (one replica: Store + vault + HubClient + Replica; its transport may be
                        wrapped by tests/kit/hostile.py to make the hub lie to it)

A hub costs ~0.7 s to initialize (migrations); a space costs one request. Tests share one hub
per session and take a fresh space each, so none sees another's history.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from replica.engine.sync import Replica, SyncReport
from replica.hubclient.auth import DPoPAuth
from replica.hubclient.client import HubClient
from replica.machine.credentials import Tokens
from replica.store.store import Store
from replica.vault import markdown as md
from shared.digest import genesis_digest
from shared.entry import Entry
from shared.signing import new_private_key, public_b64

BASE_URL = "http://testhub"  # what the transport is addressed as; proofs name the hub's URL
Wrap = Callable[[httpx2.BaseTransport], httpx2.BaseTransport]


def scratch_dir() -> Path:
    """A scratch folder in memory when the machine has one: the hub's SQLite runs with
    ``synchronous=FULL`` as in production, and fsyncs on a loaded disk would dominate."""
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="quire-inproc-",
                                 dir=shm if shm.is_dir() else None))


class AppTransport(httpx2.BaseTransport):
    """The hub app's ASGI interface as a synchronous transport: ``httpx2.ASGITransport``
    translates HTTP to ASGI, on an event loop running in a thread of its own (as uvicorn's
    would), with the app's lifespan entered once. One thread hop per request: Starlette's
    test client makes several, which dominated the in-process tier on a loaded machine.

    Responses are read whole before they are returned, so a stream that never ends (the
    events endpoint) cannot be served here: the watcher tests use real hub processes.
    Clients come and go with their replicas; ``close`` from a client is therefore a no-op
    and ``shutdown`` ends the app."""

    def __init__(self, app: Any):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="inproc-hub",
                                       daemon=True)
        self.thread.start()
        self.asgi = httpx2.ASGITransport(app=app)
        self._lifespan = app.router.lifespan_context(app)
        self._run(self._lifespan.__aenter__())

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        request.read()  # a ByteStream, which ASGITransport reads asynchronously

        async def call() -> tuple[int, Any, bytes]:
            resp = await self.asgi.handle_async_request(request)
            return resp.status_code, resp.headers, await resp.aread()

        status, headers, body = self._run(call())
        return httpx2.Response(status, headers=headers, content=body, request=request)

    def close(self) -> None:
        pass

    def shutdown(self) -> None:
        self._run(self._lifespan.__aexit__(None, None, None))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class InprocHub:
    """A real hub, initialized by ``quire hub init`` (in-process) and served in-process."""

    def __init__(self, root: Path | None = None):
        from hub.app import create_app
        from hub.cli import main as hub_main
        from hub.guard import GuardHooks
        from hub.ratelimit import RateLimiter
        from hub.settings import load_settings

        self._own_root = root is None
        self.root = root or scratch_dir()
        data = self.root / "hub"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert hub_main(["init", "--data", str(data), "--json"]) == 0, out.getvalue()
        code = json.loads(out.getvalue())["enrollment_code"]
        # one owner creates an invite for every device the tests join (the property test:
        # hundreds a minute); the invite-creation limit has its own test
        self.settings = load_settings(data, invites_per_min=10**6)
        self.hooks = GuardHooks()
        self.app = create_app(self.settings, hooks=self.hooks)
        self.hub = self.app.state.hub
        # tests join many devices from one address; the redemption limit has its own test
        self.hub.redeem_limiter = RateLimiter(rate_per_s=1e6, burst=10**6, clock=self.hub.now)
        self.transport = AppTransport(self.app)
        self.url = self.settings.url  # the hub's public URL: token audience, proof htu base
        self.public_key = self.hub.key.public
        self.owner = self.join(code, "owner")
        self._spaces = 0

    def join(self, code: str, name: str, key: Any = None, auth: DPoPAuth | None = None
             ) -> Device:
        """Redeem an invite as a new device (or as ``auth``'s device, joining one more
        space)."""
        key = key or new_private_key()
        with HubClient(BASE_URL, auth=auth, transport=self.transport,
                       hub_key=self.public_key) as anon:
            res = anon.redeem(code, name, public_b64(key))
        if auth is not None:
            return Device(self, key, auth, res["user_id"], res["device_id"])
        tokens = Tokens(res["access_token"], res["refresh_token"], int(res["expires_at"]),
                        self.url)
        return Device(self, key, DPoPAuth(key, tokens), res["user_id"], res["device_id"])

    def space(self, name: str | None = None) -> Space:
        self._spaces += 1
        name = name or f"s{self._spaces}"
        doc = self.owner.client().create_space(name)["space"]
        return Space(self, doc["id"], name)

    def close(self) -> None:
        self.transport.shutdown()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)


class Device:
    """A registered device: its key and its token flow (DPoP, refresh)."""

    def __init__(self, hub: InprocHub, key: Any, auth: DPoPAuth, user_id: str, device_id: str):
        self.hub, self.key, self.auth = hub, key, auth
        self.user_id, self.device_id = user_id, device_id

    def client(self) -> HubClient:
        return HubClient(BASE_URL, auth=self.auth, transport=self.hub.transport,
                         hub_key=self.hub.public_key)


class Space:
    """One space on the in-process hub, seen through its owner (an admin of it)."""

    def __init__(self, hub: InprocHub, space_id: str, name: str):
        self.hub, self.id, self.name = hub, space_id, name
        self.admin = hub.owner.client()

    def device(self, name: str, role: str = "editor", device: Device | None = None) -> Device:
        """A new device with ``role`` here (or ``device`` joining this space too)."""
        code = self.admin.create_invite(self.id, role)["code"]
        if device is not None:
            self.hub.join(code, name, device.key, device.auth)
            return device
        return self.hub.join(code, name)

    def replica(self, root: Path, name: str, role: str = "editor", *, durable: bool = True,
                wrap: Wrap | None = None, device: Device | None = None) -> Local:
        dev = self.device(name, role, device)
        with dev.client() as c:
            replica_id = c.register_replica(self.id, name)
        return Local(root, self, name, dev, replica_id, durable=durable, wrap=wrap)

    # ---------------------------------------------------------------- what the hub holds

    def head(self) -> dict[str, Any]:
        return self.admin.head(self.id)

    def changes(self) -> list[dict[str, Any]]:
        """Every changes line of the current epoch (batch, seq, head, author…), verified."""
        h = self.head()
        page = self.admin.changes(self.id, epoch=h["epoch"], after=0,
                                  after_digest=genesis_digest(self.id, h["epoch"]),
                                  limit=5000)
        assert not page.more
        return [{"batch": c.batch.to_wire(), "seq": c.seq, "head": c.head,
                 "author": c.author} for c in page.changes]

    def batches(self, replica: Local | None = None) -> list[dict[str, Any]]:
        """The batches of the current epoch (only ``replica``'s when given)."""
        out = [c["batch"] for c in self.changes()]
        if replica is not None:
            out = [b for b in out if b["replica_id"] == replica.engine.replica_id]
        return out

    def live(self) -> dict[str, Entry]:
        """The space's live entries, from a snapshot (versions checked by the client)."""
        lines = self.admin.snapshot(self.id)
        next(lines)
        return {e.id: e for e, _seq in lines}  # type: ignore[misc]

    def bump_epoch(self, reason: str = "test") -> dict[str, Any]:
        return self.admin.bump_epoch(self.id, reason)

    def close(self) -> None:
        self.admin.close()


class Local:
    """One replica of a space: its store, vault, client and sync engine."""

    def __init__(self, root: Path, space: Space, name: str, device: Device, replica_id: str,
                 *, durable: bool = True, wrap: Wrap | None = None, vault_quiet_ms: int = 0):
        self.root, self.space, self.name, self.device = root, space, name, device
        self.durable, self.wrap = durable, wrap
        # a test writes a file and syncs a millisecond later, as no person does: with the
        # quiet period (QUIRE_VAULT_QUIET_MS, replica/engine/ledger.py) every write back to
        # such a file would wait. The tests of the quiet period set it
        # (tests/replica/test_save_races.py, tests/replica/engine/test_save_race_fuzz.py)
        self.vault_quiet_ms = vault_quiet_ms
        self.vault = root / name / "vault"
        self.store = Store(root / name / "store.sqlite", durable=durable)
        # what this replica's client talks to: the hub's transport, or ``wrap`` of it
        # (``wrap=Hostile`` makes ``self.transport`` the hostile wrapper to program)
        self.transport: Any = wrap(space.hub.transport) if wrap else space.hub.transport
        self.client = HubClient(BASE_URL, auth=device.auth, transport=self.transport,
                                hub_key=space.hub.public_key)
        self.engine = Replica(space_id=space.id, replica_id=replica_id, vault=self.vault,
                              store=self.store, client=self.client, key=device.key,
                              vault_quiet_ms=vault_quiet_ms)

    def reopen(self, wrap: Wrap | None = None) -> Local:
        """The same replica in a fresh process: new store handle and client, same files,
        device and replica id (call after ``close``)."""
        return Local(self.root, self.space, self.name, self.device, self.engine.replica_id,
                     durable=self.durable, wrap=wrap or self.wrap,
                     vault_quiet_ms=self.vault_quiet_ms)

    def sync(self) -> SyncReport:
        return self.engine.sync()

    def path(self, eid: str) -> Path:
        return md.entry_path(self.vault, eid)

    def write(self, e: Entry) -> None:
        p = self.path(e.id)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(md.render(e))

    def read(self, eid: str) -> Entry | None:
        p = self.path(eid)
        if not p.exists():
            return None
        return md.read_entry(self.vault, eid, p.read_bytes())[0]

    def files(self) -> dict[str, bytes]:
        return {p.relative_to(self.vault).as_posix(): p.read_bytes()
                for p in sorted(self.vault.rglob("*.md"))}

    def held(self) -> set[str]:
        return {c.entry_id for c in self.store.conflicts()}

    def close(self) -> None:
        self.client.close()
        self.store.close()


@pytest.fixture(scope="session")
def inproc_hub() -> Iterator[InprocHub]:
    h = InprocHub()
    yield h
    h.close()


@pytest.fixture
def space(inproc_hub: InprocHub) -> Iterator[Space]:
    s = inproc_hub.space()
    yield s
    s.close()
