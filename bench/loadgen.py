"""Publish-rate load: N concurrent clients each publishing single-entry batches for a fixed
window, against the hub or the bare endpoint with the very same client loop.

Every client builds and signs a real batch on the last head it knows and publishes it with
``?rebase=1``, as replicas do: the hub chains a batch made on an earlier head on its current
head when none of its entries changed since (each client writes its own entries, so none
does). A parent the hub never had is still ``head_changed``: the client retries on the head
the refusal names; those retries and every other refusal are counted. Client-side work is
identical for both targets (the bare endpoint ignores the query and parses the same body),
so the difference in rate is the server's.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from shared.entry import make_entry
from shared.ids import new_id
from shared.wire import Op, build_batch


@dataclass
class LoadResult:
    seconds: float
    accepted: int = 0
    retried: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    first_error: str = ""

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies)

        def pct(p: float) -> float | None:
            return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 2) if lat else None

        return {"accepted": self.accepted, "head_changed_retries": self.retried,
                "errors": self.errors, "seconds": round(self.seconds, 2),
                "batches_per_s": round(self.accepted / self.seconds, 1) if self.seconds else 0,
                # every answered request, accepted or refused with head_changed: the
                # server's request rate, apart from compare-and-swap contention
                "requests_per_s": round((self.accepted + self.retried) / self.seconds, 1)
                if self.seconds else 0,
                "p50_ms": pct(0.5), "p99_ms": pct(0.99),
                "mean_ms": round(statistics.fmean(lat) * 1000, 2) if lat else None,
                "first_error": self.first_error}


@dataclass
class Target:
    url: str
    space: str
    token: str
    replica_ids: list[str]
    key: Ed25519PrivateKey
    epoch: str
    seq: int
    digest: str
    scheme: str = "Bearer"  # or "DPoP": a fresh proof per request, as replicas send
    public_url: str = ""
    publish_query: str = "?rebase=1"  # "" measures the strict compare-and-swap mode

    def auth_lines(self, method: str, path: str) -> str:
        from bench.quire_side import auth_headers

        headers = auth_headers(self.scheme, self.token, self.key, method,
                               (self.public_url or self.url).rstrip("/") + path)
        return "".join(f"{k}: {v}\r\n" for k, v in headers.items())


class _Conn:
    """One keep-alive HTTP/1.1 connection (Content-Length or chunked responses)."""

    def __init__(self, target: Target):
        u = urlsplit(target.url)
        self.target = target
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 80
        self.headers = f"Host: {self.host}:{self.port}\r\nAccept: application/json\r\n"
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes | None = None
                      ) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = f"{method} {path} HTTP/1.1\r\n{self.headers}{self.target.auth_lines(method, path)}"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self.writer.write(head.encode("latin-1") + b"\r\n" + (body or b""))
        try:
            status_line = await self.reader.readuntil(b"\r\n")
            status = int(status_line.split(b" ", 2)[1])
            length, chunked, close = 0, False, False
            while True:
                line = await self.reader.readuntil(b"\r\n")
                if line == b"\r\n":
                    break
                name, _, value = line.decode("latin-1").partition(":")
                name, value = name.strip().lower(), value.strip().lower()
                if name == "content-length":
                    length = int(value)
                elif name == "transfer-encoding" and "chunked" in value:
                    chunked = True
                elif name == "connection" and value == "close":
                    close = True
            if chunked:
                parts = []
                while True:
                    size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                    data = await self.reader.readexactly(size + 2)
                    if size == 0:
                        break
                    parts.append(data[:-2])
                payload = b"".join(parts)
            else:
                payload = await self.reader.readexactly(length)
        except (asyncio.IncompleteReadError, ConnectionError):
            await self.close()
            raise
        if close:
            await self.close()
        return status, payload

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except ConnectionError:
                pass
        self.reader = self.writer = None


async def _client(i: int, t: Target, http: _Conn, state: dict[str, Any],
                  deadline: float, res: LoadResult) -> None:
    n = 0
    replica = t.replica_ids[i % len(t.replica_ids)]
    run = state["run"]  # entry ids unique per run: a second run on one space creates too
    while time.perf_counter() < deadline:
        n += 1
        entry = make_entry({"id": f"note/load/{run}/c{i}/n{n}", "title": f"load {i}.{n}",
                            "body": f"Published by client {i}, number {n}.\n"})
        ops = [Op(entry=entry, base=None)]
        batch_id = new_id()
        while time.perf_counter() < deadline:
            seq, digest = state["seq"], state["digest"]
            batch = build_batch(t.key, batch_id=batch_id, replica_id=replica, space=t.space,
                                epoch=t.epoch, parent_seq=seq, parent_digest=digest, ops=ops)
            start = time.perf_counter()
            try:
                status, payload = await http.request(
                    "POST", f"/v1/spaces/{t.space}/batches{t.publish_query}",
                    json.dumps(batch.to_wire()).encode("utf-8"))
                doc = json.loads(payload) if payload else {}
            except (OSError, asyncio.IncompleteReadError, ValueError) as e:
                res.errors += 1
                res.first_error = res.first_error or repr(e)
                if res.errors > 50 and res.accepted == 0:
                    return
                continue
            res.latencies.append(time.perf_counter() - start)
            if status in (200, 201):
                rec = doc["receipt"]
                res.accepted += 1
                if rec["seq"] > state["seq"]:
                    state["seq"], state["digest"] = rec["seq"], rec["head"]
                break
            code = doc.get("error", {}).get("code") if isinstance(doc, dict) else None
            if status == 409 and code == "head_changed":
                res.retried += 1
                head = doc["error"].get("details") or {}
                if "seq" not in head:  # older hubs: ask for the head
                    _, payload = await http.request("GET", f"/v1/spaces/{t.space}/head")
                    head = json.loads(payload)
                if head["seq"] > state["seq"]:
                    state["seq"], state["digest"] = head["seq"], head["digest"]
                batch_id = new_id()
                continue
            res.errors += 1
            res.first_error = res.first_error or f"HTTP {status} {payload[:200]!r}"
            if res.errors > 50 and res.accepted == 0:
                return
            break


async def _run(t: Target, clients: int, seconds: float, first: int = 0) -> LoadResult:
    conns = [_Conn(t) for _ in range(clients)]
    state: dict[str, Any] = {"seq": t.seq, "digest": t.digest, "run": new_id()[-8:].lower()}
    start = time.perf_counter()
    res = LoadResult(seconds=seconds)
    deadline = start + seconds
    try:
        await asyncio.gather(*(_client(first + i, t, conns[i], state, deadline, res)
                               for i in range(clients)))
    finally:
        res.seconds = time.perf_counter() - start
        for c in conns:
            await c.close()
    return res


def publish_rate(t: Target, clients: int = 16, seconds: float = 20,
                 procs: int | None = None) -> LoadResult:
    """``clients`` publishers for ``seconds``; ``procs`` load-generator processes share them
    (default: ``QUIRE_BENCH_LOADGEN_PROCS``, else 1). One Python process signing a batch
    and a DPoP proof per request spends ~0.2 ms of CPU on it, so a single process caps a
    fast server near 1 / 0.2 ms; several processes lift that cap (forked: the key is not
    picklable), each running its share of the clients with its own view of the head."""
    n = procs or int(os.environ.get("QUIRE_BENCH_LOADGEN_PROCS", "1") or 1)
    n = max(1, min(n, clients))
    if n == 1:
        return asyncio.run(_run(t, clients, seconds))
    ctx = multiprocessing.get_context("fork")
    out: Any = ctx.Queue()
    shares = [clients // n + (1 if i < clients % n else 0) for i in range(n)]
    workers = [ctx.Process(target=_child, args=(t, i, share, seconds, out))
               for i, share in enumerate(shares)]
    for w in workers:
        w.start()
    parts = [out.get(timeout=seconds + 120) for _ in workers]
    for w in workers:
        w.join(30)
    res = LoadResult(seconds=max(p.seconds for p in parts))
    for p in parts:
        res.accepted += p.accepted
        res.retried += p.retried
        res.errors += p.errors
        res.latencies += p.latencies
        res.first_error = res.first_error or p.first_error
    return res


def _child(t: Target, index: int, clients: int, seconds: float, out: Any) -> None:
    # distinct client numbers per process: entry ids stay unique across them
    out.put(asyncio.run(_run(t, clients, seconds, first=index * 1000)))
