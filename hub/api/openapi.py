"""The OpenAPI document at /v1/openapi.json, built from the route table and docs."""

from __future__ import annotations

from typing import Any

from shared import PROTOCOL_VERSION
from shared.errors import WIRE_CODES

SUMMARIES = {
    "/healthz": "liveness",
    "/readyz": "readiness (database reachable)",
    "/v1/openapi.json": "this document",
    "/v1/hub": "hub id and signing key (pin it at join)",
    "/v1/keys": "hub public keys (JWK)",
    "/v1/invites/redeem": "redeem an invite: register a device, grant a role",
    "/v1/invites": "create an owner enrollment invite (owners)",
    "/v1/spaces": "list spaces (GET) or create one (POST, owners)",
    "/v1/spaces/{space}/invites": "create an invite for a role (admins)",
    "/v1/spaces/{space}/replicas": "register a replica of this device",
    "/v1/spaces/{space}/head": "current head, hub-signed, with role and rules",
    "/v1/spaces/{space}/changes": "batches after a seq (NDJSON)",
    "/v1/spaces/{space}/snapshot": "every live entry at one head (NDJSON)",
    "/v1/spaces/{space}/batches": "publish a batch through the guard",
    "/v1/spaces/{space}/receipts/{replica}/{batch}": "recover a receipt",
    "/v1/spaces/{space}/epoch": "start a new epoch (admins)",
}


def document(routes: list[Any]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for r in routes:
        for method in sorted(m for m in (r.methods or ()) if m != "HEAD"):
            params = [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
                      for n in r.param_convertors]
            paths.setdefault(r.path, {})[method.lower()] = {
                "summary": SUMMARIES.get(r.path, ""),
                "parameters": params,
                "responses": {"default": {"description": "error: {error: {code, message, "
                                                         "details}}; codes: "
                                                         + ", ".join(WIRE_CODES)}},
            }
    return {"openapi": "3.1.0",
            "info": {"title": "Quire hub", "version": str(PROTOCOL_VERSION),
                     "description": "See docs/protocol.md"},
            "paths": paths}
