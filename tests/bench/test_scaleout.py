"""Scale-out (issue 7): three `quire hub serve` processes on one PostgreSQL database behind a
small round-robin proxy; eight publishers publish and pull through it while one hub process
is killed and restarted. Nothing may be lost or applied twice, and the chain must hold.

The publishers speak the protocol directly (bench/quire_side.Publisher), so a lost response
is recovered the way a replica does it: ask for the receipt, and replay the same batch
(same id, same digest) when there is none.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from bench.proc import Server, free_port
from bench.quire_side import Hub, Member, Publisher
from shared.digest import verify_chain
from shared.entry import make_entry
from shared.ids import new_id
from shared.wire import Op, build_batch
from tests.kit.pg import pg_database, require_pg

pytestmark = [pytest.mark.e2e, pytest.mark.pg, pytest.mark.slow]

HUBS = 3
CLIENTS = 8
PER_CLIENT = 12
KILL_AT = CLIENTS * PER_CLIENT // 4  # receipts in when the process is killed
GATED = CLIENTS // 2  # clients that wait for the kill after their first GATE_AFTER entries
GATE_AFTER = 2


class RoundRobinProxy:
    """A TCP proxy on loopback: each new connection goes to the next live backend."""

    def __init__(self, backends: list[int]):
        self.backends = backends
        self.port = free_port()
        self._next = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ready = threading.Event()
        self._writers: set[asyncio.StreamWriter] = set()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", self.port))
        self._ready.set()
        self._loop.run_forever()

    def start(self) -> None:
        self._thread.start()
        assert self._ready.wait(60), "proxy did not start"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        for w in list(self._writers):
            w.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            await self._relay(reader, writer)
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream = None
        for _ in range(len(self.backends)):
            port = self.backends[self._next % len(self.backends)]
            self._next += 1
            try:
                upstream = await asyncio.open_connection("127.0.0.1", port)
                break
            except OSError:
                continue
        if upstream is None:
            return
        up_reader, up_writer = upstream
        self._writers.add(up_writer)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                try:
                    dst.close()
                except (ConnectionError, OSError):
                    pass

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            self._writers.discard(up_writer)
            up_writer.close()


@pytest.fixture
def pg_url() -> Any:
    require_pg()
    with pg_database() as url:
        yield url


def _publish_exactly_once(pub: Publisher, entry_id: str, body: str,
                          deadline: float) -> dict[str, Any]:
    """Publish one entry; survive lost responses and dead hub processes."""
    ops = [Op(entry=make_entry({"id": entry_id, "title": entry_id, "body": body}), base=None)]
    batch_id = new_id()
    while time.monotonic() < deadline:
        batch = build_batch(pub.key, batch_id=batch_id, replica_id=pub.replica_id,
                            space=pub.space, epoch=pub.epoch, parent_seq=pub.seq,
                            parent_digest=pub.digest, ops=ops)
        try:
            r = pub.http.post(f"/v1/spaces/{pub.space}/batches", json=batch.to_wire())
        except httpx.TransportError:
            # the response is lost: was the batch accepted? (a replica asks the same)
            try:
                got = pub.http.get(f"/v1/spaces/{pub.space}/receipts/{pub.replica_id}/"
                                   f"{batch_id}")
            except httpx.TransportError:
                time.sleep(0.2)
                continue
            if got.status_code == 200:
                return got.json()["receipt"]
            continue  # not accepted: send the very same batch again
        if r.status_code in (200, 201):
            receipt = r.json()["receipt"]
            pub.seq, pub.digest = receipt["seq"], receipt["head"]
            return receipt
        err = r.json().get("error", {})
        if err.get("code") == "head_changed":
            pub.seq, pub.digest = err["details"]["seq"], err["details"]["digest"]
            batch_id = new_id()  # a different parent makes a different batch
            continue
        if r.status_code >= 500 or r.status_code == 503:
            time.sleep(0.2)
            continue
        raise AssertionError(f"{entry_id}: {r.status_code} {r.text}")
    raise AssertionError(f"{entry_id}: not published before the deadline")


def _pull_all(pub: Publisher) -> list[dict[str, Any]]:
    """Every batch of the current epoch, in order, through the proxy (paged)."""
    out: list[dict[str, Any]] = []
    after = 0
    while True:
        for _attempt in range(50):
            try:  # a hub process may die under this request: pull again, as replicas do
                r = pub.http.get(f"/v1/spaces/{pub.space}/changes",
                                 params={"epoch": pub.epoch, "after": after, "limit": 500})
            except httpx.TransportError:
                time.sleep(0.2)
                continue
            if r.status_code < 500:
                break
            time.sleep(0.2)
        assert r.status_code == 200, r.text
        lines = [json.loads(x) for x in r.text.splitlines() if x.strip()]
        assert lines and "end" in lines[-1], "changes stream without its end line"
        batches = [x for x in lines if "batch" in x]
        out += batches
        if not lines[-1]["end"]["more"] or not batches:
            return out
        after = batches[-1]["seq"]


def test_three_hubs_behind_a_proxy_survive_a_killed_process(tmp_path: Path,
                                                             pg_url: str) -> None:
    env = dict(os.environ, QUIRE_HUB_ACCESS_TTL="3600")
    env.pop("QUIRE_HOME", None)
    ports = [free_port() for _ in range(HUBS)]
    proxy = RoundRobinProxy(ports)
    proxy.start()
    public = f"http://127.0.0.1:{proxy.port}"
    first = Hub("hub0", tmp_path, env, pg_url)
    servers: list[Server | None] = [None] * HUBS
    pubs: list[Publisher] = []

    def serve(i: int) -> Server:
        s = Server(f"hub{i}-{time.monotonic_ns()}", [
            *_hub_cmd(), "serve", "--data", str(first.data), "--host", "127.0.0.1",
            "--port", str(ports[i]), "--public-url", public], log_dir=tmp_path, env=env)
        s.wait_http(f"http://127.0.0.1:{ports[i]}/healthz", timeout=60)
        return s

    try:
        # initialized for the proxy's URL, the one every process serves (a hub refuses to
        # serve another public_url than the one its database records)
        init = subprocess.run([*_hub_cmd(), "init", "--data", str(first.data), "--db", pg_url,
                               "--public-url", public, "--json"], capture_output=True,
                              text=True, env=env, timeout=120)
        assert init.returncode == 0, init.stdout + init.stderr
        first.enrollment_code = json.loads(init.stdout)["enrollment_code"]
        for i in range(HUBS):
            servers[i] = serve(i)
        owner = Member("owner", tmp_path, env)
        owner.join(public, first.enrollment_code)
        space = owner.create_space("scaleout")
        for i in range(CLIENTS):
            pub = Publisher(public, owner.invite(space), name=f"client-{i}")
            pub.attach(space)
            pubs.append(pub)

        deadline = time.monotonic() + 240
        receipts: list[list[dict[str, Any]]] = [[] for _ in range(CLIENTS)]
        failures: list[str] = []
        lock = threading.Lock()
        done_at_kill: list[int] = []
        killed = threading.Event()

        def count() -> int:
            with lock:
                return sum(len(r) for r in receipts)

        def work(i: int) -> None:
            try:
                for n in range(PER_CLIENT):
                    if i < GATED and n == GATE_AFTER:
                        # these clients hold the rest of their entries until the process is
                        # dead, so publishing goes on after the kill however fast the
                        # machine is; the others publish straight through it
                        assert killed.wait(240), "the kill never came"
                    got = _publish_exactly_once(pubs[i], f"note/c{i}/n{n}",
                                                f"client {i} entry {n}\n", deadline)
                    with lock:
                        receipts[i].append(got)
                    if n % 4 == 3:
                        _pull_all(pubs[i])  # syncing while the others publish
            except Exception as e:  # noqa: BLE001 - reported below
                failures.append(f"client {i}: {e!r}")

        threads = [threading.Thread(target=work, args=(i,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        # the fault comes on progress: once KILL_AT receipts are in
        while count() < KILL_AT and not failures and time.monotonic() < deadline:
            time.sleep(0.01)  # polling pace only
        assert count() >= KILL_AT, f"only {count()} receipts before the deadline: {failures}"
        victim = servers[1]
        assert victim is not None
        os.killpg(victim.pid, signal.SIGKILL)  # no graceful shutdown: a crash
        victim.stop()
        done_at_kill.append(count())
        killed_ms = int(time.time() * 1000)
        killed.set()
        servers[1] = serve(1)
        for t in threads:
            t.join(300)
        assert not failures, failures
        # publishing went on through the kill: at least the gated clients' later entries
        # were accepted after it
        after = [r for rs in receipts for r in rs if r["accepted_at"] >= killed_ms]
        assert done_at_kill[0] < CLIENTS * PER_CLIENT
        assert len(after) >= GATED * (PER_CLIENT - GATE_AFTER), (done_at_kill, len(after))

        changes = _pull_all(pubs[0])
        seqs = [c["seq"] for c in changes]
        assert seqs == list(range(1, len(changes) + 1)), "gap or repeat in the sequence"
        verify_chain(pubs[0].space, pubs[0].epoch,
                     [(c["seq"], c["batch"]["digest"], c["head"]) for c in changes])
        ids = [op["entry"]["id"] for c in changes for op in c["batch"]["ops"]]
        expected = {f"note/c{i}/n{n}" for i in range(CLIENTS) for n in range(PER_CLIENT)}
        assert len(ids) == len(set(ids)), "an entry was published twice"
        assert set(ids) == expected, "an acknowledged entry is missing"
        accepted = {(r["replica_id"], r["batch_id"]) for rs in receipts for r in rs}
        in_chain = {(c["batch"]["replica_id"], c["batch"]["batch_id"]) for c in changes}
        assert accepted == in_chain, "receipts and the chain disagree"
        heads = set()
        for pub in pubs:  # every client, through any process, sees the same head
            heads.add(pub.refresh_head()["digest"])
        assert len(heads) == 1
    finally:
        for pub in pubs:
            pub.close()
        for s in servers:
            if s is not None:
                s.stop()
        proxy.stop()


def _hub_cmd() -> list[str]:
    from bench.quire_side import hub_cmd

    return hub_cmd()
