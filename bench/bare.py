"""The stack's ceiling for publish rate: a bare Starlette endpoint on the same uvicorn setup
as ``quire hub serve`` (hub/cli.py) that parses the same JSON body and does nothing else.

It answers ``POST /v1/spaces/{space}/batches`` with a receipt-shaped document carrying a
counter as ``seq``, and ``GET /v1/spaces/{space}/head`` with that counter, so the load
generator runs the very same client loop against it and against the hub.

Run: ``python -m bench.bare --port P``.
"""

from __future__ import annotations

import argparse
import itertools

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

_ZERO = "0" * 64
_seq = itertools.count(1)
_last = 0


async def batches(request: Request) -> JSONResponse:
    global _last
    await request.json()
    _last = next(_seq)
    return JSONResponse({"receipt": {"seq": _last, "head": _ZERO}, "replayed": False})


async def head(request: Request) -> JSONResponse:
    return JSONResponse({"space": request.path_params["space"], "epoch": "0" * 26,
                         "seq": _last, "digest": _ZERO})


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


app = Starlette(routes=[
    Route("/healthz", healthz),
    Route("/v1/spaces/{space}/head", head),
    Route("/v1/spaces/{space}/batches", batches, methods=["POST"]),
])


def main() -> None:
    import uvicorn

    p = argparse.ArgumentParser(prog="python -m bench.bare")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--workers", type=int, default=1,
                   help="processes on the one port, as `quire hub serve --workers N`")
    args = p.parse_args()
    # the same uvicorn.run arguments as `quire hub serve`; uvicorn's own workers for N > 1
    # (each bare process counts on its own: seq is per process, the load generator only
    # counts answers)
    uvicorn.run("bench.bare:app" if args.workers > 1 else app, host=args.host, port=args.port,
                log_level="warning", access_log=False, timeout_graceful_shutdown=3,
                workers=args.workers if args.workers > 1 else None)


if __name__ == "__main__":
    main()
