"""The stack's ceiling for publish rate: a bare Starlette endpoint on the same uvicorn setup
as ``quire hub serve`` (hub/cli.py) that parses the same JSON body and does nothing else.

It answers ``POST /v1/spaces/{space}/batches`` with a receipt-shaped document carrying a
counter as ``seq``, and ``GET /v1/spaces/{space}/head`` with that counter, so the load
generator runs the very same client loop against it and against the hub.

``--signed`` (not what ``bench.run`` starts; for comparison, docs/decisions.md "What the
bare endpoint is"): besides parsing, the endpoint does the work the protocol itself asks of
any server accepting a publication, without a database: it verifies the DPoP proof's
Ed25519 signature with the key the proof carries, parses and validates the batch with
``shared.wire.parse_batch`` (its digest recomputed from the canonical JSON), verifies the
batch signature with that same key (the load generator signs both with the device key),
and answers a receipt signed with a key of its own.

Run: ``python -m bench.bare --port P [--signed]``.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import time
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

_ZERO = "0" * 64
_seq = itertools.count(1)
_last = 0


async def batches(request: Request) -> JSONResponse:
    global _last
    await request.json()
    _last = next(_seq)
    return JSONResponse({"receipt": {"seq": _last, "head": _ZERO}, "replayed": False})


_KEY = None  # --signed: the receipt key


@functools.lru_cache(maxsize=64)
def _public(x: str) -> Any:
    from shared.signing import load_public

    return load_public(x)


async def signed_batches(request: Request) -> Response:
    """``--signed``: the protocol's own work on a publication, no database (see above)."""
    global _last
    from shared.canonical import canonical_str
    from shared.signing import b64u_decode
    from shared.wire import parse_batch, receipt_body, sign_receipt

    raw = await request.json()
    h64, p64, s64 = request.headers["dpop"].split(".")
    x = json.loads(b64u_decode(h64))["jwk"]["x"]
    _public(x).verify(b64u_decode(s64), f"{h64}.{p64}".encode("ascii"))
    batch = parse_batch(raw)
    if not batch.verify_signature(x):
        return JSONResponse({"error": {"code": "invalid_request"}}, status_code=400)
    _last = next(_seq)
    receipt = canonical_str(sign_receipt(_KEY, receipt_body(
        space=batch.space, batch_id=batch.batch_id, replica_id=batch.replica_id, seq=_last,
        head=_ZERO, epoch=batch.epoch, accepted_at=int(time.time() * 1000),
        digest=batch.digest)))
    return Response('{"receipt":' + receipt + ',"replayed":false}', status_code=201,
                    media_type="application/json")


async def head(request: Request) -> JSONResponse:
    return JSONResponse({"space": request.path_params["space"], "epoch": "0" * 26,
                         "seq": _last, "digest": _ZERO})


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


def make_app(signed: bool = False) -> Starlette:
    return Starlette(routes=[
        Route("/healthz", healthz),
        Route("/v1/spaces/{space}/head", head),
        Route("/v1/spaces/{space}/batches", signed_batches if signed else batches,
              methods=["POST"]),
    ])


app = make_app()


def signed_app() -> Starlette:
    """The ``--signed`` app (an import string for uvicorn's workers)."""
    global _KEY
    from shared.signing import new_private_key

    _KEY = new_private_key()
    return make_app(signed=True)


def main() -> None:
    import uvicorn

    p = argparse.ArgumentParser(prog="python -m bench.bare")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--workers", type=int, default=1,
                   help="processes on the one port, as `quire hub serve --workers N`")
    p.add_argument("--signed", action="store_true",
                   help="verify the proof and batch signatures and sign a receipt (see above)")
    args = p.parse_args()
    # the same uvicorn.run arguments as `quire hub serve`; uvicorn's own workers for N > 1
    # (each bare process counts on its own: seq is per process, the load generator only
    # counts answers)
    target: Any = ("bench.bare:signed_app" if args.signed else "bench.bare:app") \
        if args.workers > 1 else (signed_app() if args.signed else app)
    uvicorn.run(target, host=args.host, port=args.port, factory=args.signed and
                args.workers > 1, log_level="warning", access_log=False,
                timeout_graceful_shutdown=3, workers=args.workers if args.workers > 1 else None)


if __name__ == "__main__":
    main()
