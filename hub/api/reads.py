"""HTTP handlers for remote reads (hub/reads.py): parse the query, call the domain, answer.

    GET /v1/spaces/{space}/entries   ?prefix=&after=&limit=     live entries at the head
    GET /v1/spaces/{space}/entry     ?id=&seq=&epoch=           one entry (head or seq)
    GET /v1/spaces/{space}/history   ?id=&limit=                its changes, newest first
    GET /v1/spaces/{space}/diff      ?id=&from=&to=&epoch=      between two seqs
    GET /v1/spaces/{space}/search    ?q=&limit=                 every word, at the head
    GET /v1/spaces/{space}/batch     ?seq=&epoch=               what one batch changed
    GET /v1/spaces/{space}/people                               members' display names
    GET /v1/spaces/{space}/backlinks ?id=                       pages linking to one

Entry ids hold a slash, so they travel as the ``id`` query parameter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hub import backlinks, reads
from hub.api.http import JSON, principal
from shared.errors import InvalidRequest

L = reads.LIMITS


def _params(request: Request, allowed: set[str]) -> Any:
    qp = request.query_params
    unknown = set(qp) - allowed
    if unknown:
        raise InvalidRequest(f"unknown query parameters: {', '.join(sorted(unknown))}")
    return qp


def _handler(allowed: set[str], call: Callable[[Any, Any, str, Any], dict[str, Any]]
             ) -> Callable[[Request], Any]:
    async def handler(request: Request) -> Response:
        p = await principal(request)
        qp = _params(request, allowed)
        store = request.app.state.hub.store
        out = await run_in_threadpool(call, store, p, request.path_params["space"], qp)
        return JSON(out)
    return handler


def _list(store: Any, p: Any, space: str, qp: Any) -> dict[str, Any]:
    return reads.list_entries(store, p, space, prefix=qp.get("prefix", ""),
                              after=qp.get("after", ""),
                              limit=reads.parse_limit(qp.get("limit"), L.list_default,
                                                      L.list_max))


def _get(store: Any, p: Any, space: str, qp: Any) -> dict[str, Any]:
    return reads.get_entry(store, p, space, reads.parse_entry_id(qp.get("id")),
                           seq=reads.parse_seq(qp.get("seq")),
                           epoch=reads.parse_epoch(qp.get("epoch")))


def _history(store: Any, p: Any, space: str, qp: Any) -> dict[str, Any]:
    return reads.history(store, p, space, reads.parse_entry_id(qp.get("id")),
                         reads.parse_limit(qp.get("limit"), L.history_default, L.history_max))


def _diff(store: Any, p: Any, space: str, qp: Any) -> dict[str, Any]:
    from_seq = reads.parse_seq(qp.get("from"), "from")
    if from_seq is None:
        raise InvalidRequest("from is required: the seq to diff from")
    return reads.diff(store, p, space, reads.parse_entry_id(qp.get("id")), from_seq=from_seq,
                      to_seq=reads.parse_seq(qp.get("to"), "to"),
                      epoch=reads.parse_epoch(qp.get("epoch")))


def _people(store: Any, p: Any, space: str, qp: Any) -> dict[str, Any]:
    return reads.people(store, p, space)


def _batch(store: Any, p: Any, space: str, qp: Any) -> dict[str, Any]:
    seq = reads.parse_seq(qp.get("seq"))
    if seq is None or seq < 1:
        raise InvalidRequest("seq is required: the seq of an accepted batch (>= 1)")
    return reads.batch(store, p, space, seq=seq, epoch=reads.parse_epoch(qp.get("epoch")))


def _search(store: Any, p: Any, space: str, qp: Any) -> dict[str, Any]:
    return reads.search(store, p, space, qp.get("q"),
                        reads.parse_limit(qp.get("limit"), L.search_default, L.search_max))


def _backlinks(store: Any, p: Any, space: str, qp: Any) -> dict[str, Any]:
    return backlinks.backlinks(store, p, space, reads.parse_entry_id(qp.get("id")))


READ_ROUTES = [
    Route("/v1/spaces/{space}/entries", _handler({"prefix", "after", "limit"}, _list),
          methods=["GET"]),
    Route("/v1/spaces/{space}/entry", _handler({"id", "seq", "epoch"}, _get), methods=["GET"]),
    Route("/v1/spaces/{space}/history", _handler({"id", "limit"}, _history), methods=["GET"]),
    Route("/v1/spaces/{space}/diff", _handler({"id", "from", "to", "epoch"}, _diff),
          methods=["GET"]),
    Route("/v1/spaces/{space}/search", _handler({"q", "limit"}, _search), methods=["GET"]),
    Route("/v1/spaces/{space}/batch", _handler({"seq", "epoch"}, _batch), methods=["GET"]),
    Route("/v1/spaces/{space}/people", _handler(set(), _people), methods=["GET"]),
    Route("/v1/spaces/{space}/backlinks", _handler({"id"}, _backlinks), methods=["GET"]),
]
