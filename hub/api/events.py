"""Live endpoints: the server-sent event stream of a space and the long-poll form of
``head``. Handlers only: the broker (``hub/events.py``) decides who hears what.

Event stream (``GET /v1/spaces/{space}/events``, ``text/event-stream``)::

    retry: 1000

    id: <epoch>:<seq>
    event: head
    data: {"space", "epoch", "seq", "digest", "state", "at", "signature",
           "changes"?: [<changes line>, …]}   (the head signed with its state root)

    event: epoch
    data: {"space", "epoch", "previous"}

    event: revoked
    data: {"code", "message"}          (then the hub closes the stream)

    event: unavailable
    data: {"code": "unavailable", "message"}   (a re-check could not reach the database;
                                       once per outage; the stream stays open)

    : keepalive                        (a comment, every ``events_keepalive_ms``)

The first event is the current head, unless ``Last-Event-ID`` already names it (a resumed
stream then gets nothing until the head moves). Heads are state, not a log: intermediate
heads may be skipped, and a client pulls every batch after its own head anyway. Head
events are hints; clients verify what they pull (hub-signed heads, hash chain).

``changes``: when this stream already sent a head of the same epoch and the new head is at
most ``CHANGES_MAX_COUNT`` batches further, the event carries every batch in between, each
exactly as a line of ``GET …/changes`` (``batch``, ``seq``, ``head``, ``accepted_at``,
``author``), as long as they total at most ``CHANGES_MAX_BYTES``; otherwise the head is
bare and the client pulls. A watcher verifies them as it verifies pulled changes and
applies them without a request. The lines are read once per head per hub process
(``hub.events.ChangeCache``), whichever process committed it.

A caller whose read rules narrow its scope (hub/scope.py) gets bare heads, never
``changes``: it pulls, and its pull leaves out what it may not read. Its events name no
entry; they tell it only that the head moved (and when, and by how many batches).

The caller's access (device, user, membership) is re-read every ``events_recheck_ms``, and
at once when an ``access`` event arrives; when it is gone, the stream ends with
``revoked``. When the process stops, every stream ends at once (the client reconnects,
to another process behind the proxy) and every long-poll answers with the head it has.
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from hub import feed, signed_state, spaces
from hub.access import Principal, recheck_principal_txn, space_access_txn
from hub.api.http import hub_of, principal
from hub.events import Event
from hub.scope import scope_txn
from shared.errors import (
    Forbidden,
    InvalidRequest,
    NotFound,
    RateLimited,
    SpaceDeleted,
    Unauthorized,
)

REFUSED = (Unauthorized, Forbidden, NotFound, SpaceDeleted)
UNAVAILABLE = {"code": "unavailable",
               "message": "the hub's database is unavailable; syncs fail until it is back"}
CHANGES_MAX_COUNT = 16  # batches a head event may carry (more: a bare head, the client pulls)
CHANGES_MAX_BYTES = 64 * 1024  # their total size
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _sse(event: str | None, data: dict[str, Any] | None = None, id: str | None = None) -> str:
    lines = []
    if id is not None:
        lines.append(f"id: {id}")
    if event is not None:
        lines.append(f"event: {event}")
    lines.append("data: " + json.dumps(data or {}, separators=(",", ":"), sort_keys=True))
    return "\n".join(lines) + "\n\n"


def _head_of(space: Any) -> dict[str, Any]:
    return {"space": space.id, "epoch": space.epoch, "seq": int(space.head_seq),
            "digest": space.head_digest}


def _check_txn(conn: Any, hub: Any, p: Principal, space_ref: str) -> dict[str, Any]:
    """The head, and ``scoped``: whether read rules narrow the caller's scope (read with the
    head: its head events then carry no changes, hub/scope.py)."""
    p = recheck_principal_txn(conn, p, hub.now())  # a delegation may expire mid-stream
    space, role = space_access_txn(conn, p, space_ref, "viewer")
    return dict(_head_of(space), state=signed_state.current_root_txn(
        conn, space.id, hub.settings.state_root),
        scoped=not scope_txn(conn, p, space, role).unrestricted)


def _check(hub: Any, p: Principal, space_ref: str) -> dict[str, Any]:
    """Re-read the caller and their membership; the space's head (with its state root) if
    access holds."""
    with hub.store.read() as conn:
        return _check_txn(conn, hub, p, space_ref)


def _check_many(hub: Any, asks: list[tuple[Principal, str]]) -> list[Any]:
    """``_check`` of each ask, in one read transaction: each result, or the exception its
    own check raised. After an error that is not a refusal (the database), the rest are
    checked one read each, as before (a failed statement may end a PostgreSQL
    transaction)."""
    out: list[Any] = []
    with hub.store.read() as conn:
        for p, ref in asks:
            try:
                out.append(_check_txn(conn, hub, p, ref))
            except REFUSED as e:
                out.append(e)
            except Exception as e:  # noqa: BLE001 - this one's answer; the rest read anew
                out.append(e)
                break
    for p, ref in asks[len(out):]:
        try:
            out.append(_check(hub, p, ref))
        except Exception as e:  # noqa: BLE001 - handed to the stream that asked
            out.append(e)
    return out


SIGNED_KEPT = 64  # head events kept signed and encoded, per hub process


class FanOut:
    """What the streams of one hub process share for a head they all send (event loop
    thread only):

    - ``check``: the access re-checks of the streams one publication woke, asked in the
      same turn of the event loop, are run in one read transaction on one worker thread
      instead of one each (20 streams: ~0.36 ms of CPU and a thread hop each). Each
      stream still gets the answer of a read that began after it woke, for its own caller;
    - ``head_chunk``: the head event's text (the head signed with its state root, as
      JSON), signed and encoded once per head, not once per stream."""

    def __init__(self, hub: Any):
        self.hub = hub
        self._asks: list[tuple[Principal, str, asyncio.Future[dict[str, Any]]]] = []
        self._chunks: OrderedDict[tuple[Any, ...], str] = OrderedDict()
        self.reads = 0  # read transactions run for checks (tests check the sharing)

    async def check(self, p: Principal, space_ref: str) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[dict[str, Any]] = loop.create_future()
        if not self._asks:
            loop.call_soon(self._run)  # after the streams woken with this one asked too
        self._asks.append((p, space_ref, fut))
        return await fut

    def _run(self) -> None:
        asks, self._asks = self._asks, []
        asyncio.ensure_future(self._read(asks))

    async def _read(self, asks: list[tuple[Principal, str, asyncio.Future[Any]]]) -> None:
        self.reads += 1
        try:
            got = await run_in_threadpool(_check_many, self.hub,
                                          [(p, ref) for p, ref, _ in asks])
        except BaseException as e:  # noqa: BLE001 - every stream that asked hears of it
            got = [e] * len(asks)
        for (_, _, fut), r in zip(asks, got, strict=True):
            if fut.done():  # that stream went away meanwhile
                continue
            if isinstance(r, BaseException):
                fut.set_exception(r)
            else:
                fut.set_result(r)

    def head_chunk(self, h: dict[str, Any], event_id: str) -> str:
        """``_sse("head", _signed(hub, h), id=event_id)``, made once per head and key."""
        key = self.hub.key
        at = h.get("at")
        if not at:  # a head this process heard of only from the database: signed now
            return _sse("head", _signed(key, dict(h, at=self.hub.now())), id=event_id)
        memo = (key.kid, event_id, h["space"], h["epoch"], int(h["seq"]), h["digest"],
                h.get("state"), at)
        chunk = self._chunks.get(memo)
        if chunk is None:
            chunk = self._chunks[memo] = _sse("head", _signed(key, dict(h, at=at)),
                                              id=event_id)
            while len(self._chunks) > SIGNED_KEPT:
                self._chunks.popitem(last=False)
        return chunk


_FANOUTS: weakref.WeakKeyDictionary[Any, FanOut] = weakref.WeakKeyDictionary()


def fanout(hub: Any) -> FanOut:
    """The hub's ``FanOut`` (made at its first stream)."""
    f = _FANOUTS.get(hub)
    if f is None:
        f = _FANOUTS[hub] = FanOut(hub)
    return f


def _signed(key: Any, h: dict[str, Any]) -> dict[str, Any]:
    """A head event's data: the head signed with its state root (a replica verifies the
    changes the event carries up to it), or bare when the root is not known here."""
    if not h.get("state"):
        return h
    return signed_state.signed_head(key, space=h["space"], epoch=h["epoch"],
                                    seq=int(h["seq"]), digest=h["digest"], root=h["state"],
                                    at=h["at"])


async def _change_lines(hub: Any, p: Principal, space_id: str, epoch: str, after: int,
                        upto: int, prefetch: bool = False) -> list[str] | None:
    """The ``changes`` lines after ``after`` up to ``upto`` (None: send a bare head).
    ``prefetch``: only to fill the cache (no second try)."""
    if not 0 < upto - after <= CHANGES_MAX_COUNT:
        return None

    def read(lo: int, hi: int) -> dict[int, str]:
        out: dict[int, str] = {}
        # the very lines GET …/changes sends, access checked as it checks it; whole batches
        # only (these lines are shared with every stream of the process): a caller with
        # read rules is refused, and nothing is cached
        for chunk in feed.changes(hub.store, p, space_id, epoch, lo, hi - lo, whole=True):
            for line in chunk.decode("utf-8").split("\n"):  # not splitlines: U+2028…
                if not line:
                    continue
                obj = json.loads(line)
                if "batch" in obj and isinstance(obj.get("seq"), int):
                    # the characters a line reader also splits at (httpx's iter_lines
                    # splits like str.splitlines); JSON text only has them inside strings,
                    # where the escape means the same character
                    out[obj["seq"]] = line.translate(_LINE_BREAKS)
        return out

    async def load(lo: int, hi: int) -> dict[int, str]:
        return await run_in_threadpool(read, lo, hi)

    lines = await hub.broker.changes.get(space_id, epoch, after, upto, load)
    if lines is None and not prefetch:
        # the read this stream waited for may have been another stream's, refused for its
        # own caller (a prefetch runs before that stream's check): read them as this one
        lines = await hub.broker.changes.get(space_id, epoch, after, upto, load)
    if lines is None or sum(len(line) for line in lines) > CHANGES_MAX_BYTES:
        return None
    return lines


_PREFETCHING: set[asyncio.Task[Any]] = set()  # kept referenced until done


def _prefetch(coro: Any) -> None:
    """Start reading change lines into the process's ``ChangeCache`` now; the stream's own
    ``_change_lines`` after its check then finds them there (or waits for this read). Never
    cancelled: other streams may be waiting for the same read."""
    task = asyncio.ensure_future(coro)
    _PREFETCHING.add(task)
    task.add_done_callback(_PREFETCHING.discard)


def _parse_last_id(value: str | None) -> tuple[str, int] | None:
    if not value:
        return None
    epoch, _, seq = value.strip().partition(":")
    try:
        return epoch, int(seq)
    except ValueError:
        return None


async def events(request: Request) -> Response:
    p = await principal(request)
    hub = hub_of(request)
    space_ref = request.path_params["space"]
    # a partial replica's globs (``only``, repeated): its stream is scoped too (bare heads)
    partial = bool(feed.parse_only(request.query_params.getlist("only")))
    s = hub.settings
    release = hub.stream_slots.acquire(p.device_id)
    if release is None:
        raise RateLimited(f"this device has {s.streams_per_device} event streams open here; "
                          "close one", {"retry_after": 5, "limit": s.streams_per_device})
    sub = hub.broker.subscribe(None)  # before reading the head: nothing slips in between
    try:
        head = await run_in_threadpool(_check, hub, p, space_ref)
    except BaseException:
        sub.close()
        release()
        raise
    space_id = head["space"]
    scoped = bool(head.pop("scoped", False)) or partial
    sub.space = space_id
    resume = _parse_last_id(request.headers.get("last-event-id"))
    metrics = hub.metrics
    shared = fanout(hub)

    async def stream() -> AsyncIterator[str]:
        nonlocal head, scoped
        metrics.streams_open.inc()
        sent: tuple[str, int] | None = resume
        ended = "client"  # why the stream ended (quire_event_stream_disconnects_total)
        told_unavailable = False  # an ``unavailable`` event went out since the last check
        try:
            yield "retry: 1000\n\n"

            def head_events(h: dict[str, Any], lines: list[str] | None = None) -> list[str]:
                nonlocal sent
                key = (h["epoch"], h["seq"])
                if sent == key:
                    return []
                out = []
                if sent is not None and sent[0] != h["epoch"]:
                    out.append(_sse("epoch", {"space": space_id, "epoch": h["epoch"],
                                              "previous": sent[0]}))
                    metrics.events_sent.labels(type="epoch").inc()
                elif sent is not None and sent[1] > h["seq"]:
                    return []  # an older head arriving late
                sent = key
                # at: the commit time when this process heard of the commit, else now
                chunk = shared.head_chunk(h, f"{key[0]}:{key[1]}")
                if lines:  # spliced in as they are: no re-encoding per stream
                    cut = chunk.rindex("}")
                    chunk = chunk[:cut] + ',"changes":[' + ",".join(lines) + "]" + chunk[cut:]
                out.append(chunk)
                metrics.events_sent.labels(type="head").inc()
                return out

            for chunk in head_events(head):
                yield chunk
            keepalive = s.events_keepalive_ms / 1000
            recheck = s.events_recheck_ms / 1000
            next_check = time.monotonic() + recheck
            last_write = time.monotonic()
            while True:
                now = time.monotonic()
                timeout = max(0.0, min(last_write + keepalive, next_check) - now)
                evs = await sub.next(timeout)
                check_now = time.monotonic() >= next_check
                chunks: list[str] = []
                heads: list[dict[str, Any]] = []
                if any(ev.kind == "shutdown" for ev in evs):
                    ended = "shutdown"  # the client reconnects (to another process)
                    return
                for ev in evs:
                    if ev.kind == "head" and ev.data.get("space") == space_id:
                        heads.append({k: ev.data.get(k)
                                      for k in ("space", "epoch", "seq", "digest", "at",
                                                "state")})
                    elif ev.kind in ("epoch", "access", "poke"):
                        check_now = True  # re-read: the head moved or access may be gone
                # a head event carries entry content: it goes only to a caller whose access
                # was checked after the head committed (a revocation, even one whose notice
                # is still on its way from another hub process, is seen here first)
                if check_now or heads:
                    next_check = time.monotonic() + recheck
                    newest = max(heads, key=lambda h: int(h["seq"]), default=None)
                    if (not scoped and newest is not None and sent is not None
                            and sent[0] == newest["epoch"] and sent[1] < int(newest["seq"])):
                        # read the lines while the access check runs (both off the loop);
                        # they are attached below only if it passes
                        _prefetch(_change_lines(hub, p, space_id, newest["epoch"], sent[1],
                                                int(newest["seq"]), prefetch=True))
                    try:
                        head = await shared.check(p, space_id)
                    except REFUSED as e:
                        ended = "revoked"
                        metrics.events_sent.labels(type="revoked").inc()
                        yield _sse("revoked", {"code": e.code, "message": e.message})
                        return
                    except Exception:
                        # database unreachable: keep the stream, check again later; heads
                        # go out bare (no content without a check). The caller is told once
                        # (an idle watcher would otherwise say "ok" through an outage): it
                        # syncs, gets 503 unavailable, and retries on its own pace
                        if not told_unavailable:
                            told_unavailable = True
                            metrics.events_sent.labels(type="unavailable").inc()
                            chunks.append(_sse("unavailable", UNAVAILABLE))
                        for h in heads:
                            chunks += head_events(h)
                    else:  # the head read now covers every head event of this wake
                        told_unavailable = False
                        for h in heads:  # keep the commit time this process heard of
                            if (h["epoch"], h["seq"]) == (head["epoch"], head["seq"]):
                                head["at"] = h.get("at")
                        lines = None
                        # a scoped caller's heads go out bare (the shared lines are whole
                        # batches): it pulls, and its pull leaves out what it may not read
                        scoped = bool(head.pop("scoped", False)) or partial
                        if (not scoped and sent is not None and sent[0] == head["epoch"]
                                and sent[1] < head["seq"]):
                            lines = await _change_lines(hub, p, space_id, head["epoch"],
                                                        sent[1], head["seq"])
                        chunks += head_events(head, lines)
                if not chunks and time.monotonic() - last_write >= keepalive:
                    chunks.append(": keepalive\n\n")
                for chunk in chunks:
                    yield chunk
                if chunks:
                    last_write = time.monotonic()
        finally:
            sub.close()
            release()
            metrics.streams_open.dec()
            metrics.stream_disconnects.labels(reason=ended).inc()

    body = stream()
    weakref.finalize(body, release)  # a stream never started still gives its slot back
    return StreamingResponse(body, media_type="text/event-stream", headers={
        "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def parse_long_poll(qp: Any, max_wait_s: int) -> tuple[float, int | None, str | None]:
    unknown = set(qp) - {"wait", "after", "epoch"}
    if unknown:
        raise InvalidRequest(f"unknown query parameters: {', '.join(sorted(unknown))}")
    try:
        wait = float(qp.get("wait", "0"))
        after = int(qp["after"]) if "after" in qp else None
    except ValueError:
        raise InvalidRequest("wait must be a number of seconds and after an integer seq"
                             ) from None
    if not 0 <= wait <= max_wait_s or (after is not None and after < 0):
        raise InvalidRequest(f"wait must be between 0 and {max_wait_s} seconds, after >= 0",
                             {"max_wait": max_wait_s})
    return wait, after, qp.get("epoch")


async def long_poll_head(request: Request, p: Principal, hub: Any) -> dict[str, Any]:
    """``head?wait=S&after=SEQ[&epoch=E]``: answer at once when the head is not
    ``(E, SEQ)``; otherwise when it moves, or after ``S`` seconds with the same head."""
    wait, after, epoch = parse_long_poll(request.query_params, hub.settings.longpoll_max_s)
    space_ref = request.path_params["space"]

    def read() -> dict[str, Any]:
        return spaces.head(hub.store, hub.key, p, space_ref, hub.now())

    sub = hub.broker.subscribe(None)  # before the read: a publication cannot slip between
    hub.metrics.longpolls.inc()
    try:
        h = await run_in_threadpool(read)
        sub.space = h["space"]  # from now on only this space's events wake it
        deadline = time.monotonic() + wait
        while (after is None or h["seq"] == after) and (epoch is None or h["epoch"] == epoch):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            evs = await sub.next(left)
            if any(ev.kind == "shutdown" for ev in evs):
                break  # the process is stopping: answer with the head as it is
            if any(_concerns(ev, h["space"]) for ev in evs):
                h = await run_in_threadpool(read)
        return h
    finally:
        hub.metrics.longpolls.dec()
        sub.close()


def _concerns(ev: Event, space_id: str) -> bool:
    return ev.kind == "poke" or ev.data.get("space") in (None, space_id)
