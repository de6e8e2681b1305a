"""Where an MCP host finds and uses the hub's authorization server (docs/protocol.md,
"Remote MCP and OAuth").

    GET  /.well-known/oauth-protected-resource/mcp     RFC 9728: the resource /mcp, its
                                                       authorization server, its scopes
    GET  /.well-known/oauth-authorization-server/oauth RFC 8414: the server's endpoints
    POST /oauth/register                               RFC 7591 dynamic registration
    GET  /oauth/authorize                              code + PKCE (S256) ─► consent page
    POST /oauth/token                                  code or refresh ─► tokens
    POST /oauth/revoke                                 RFC 7009

The SDK's handlers (mcp.server.auth) parse and answer; hub/oauth/provider.py decides. The
issuer is ``<hub url>/oauth``; a hub whose URL is plain http on a non-loopback host serves
no OAuth (RFC 8414 wants https) and so no remote endpoint.
"""

from __future__ import annotations

from typing import Any

from mcp.server.auth.handlers.metadata import MetadataHandler
from mcp.server.auth.routes import (
    build_metadata,
    cors_middleware,
    create_auth_routes,
    create_protected_resource_routes,
    validate_issuer_url,
)
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from pydantic import AnyHttpUrl
from starlette.routing import BaseRoute, Mount, Route

from hub.oauth.provider import QuireProvider
from hub.oauth.scopes import ACTIONS

ISSUER_PATH = "/oauth"
RESOURCE_PATH = "/mcp"


def issuer(url: str) -> AnyHttpUrl:
    return AnyHttpUrl(url.rstrip("/") + ISSUER_PATH)


def resource(url: str) -> AnyHttpUrl:
    return AnyHttpUrl(url.rstrip("/") + RESOURCE_PATH)


def served(url: str) -> bool:
    """Whether a hub at ``url`` can serve OAuth (https, or http on loopback)."""
    try:
        validate_issuer_url(issuer(url))
    except ValueError:
        return False
    return True


def oauth_routes(provider: QuireProvider, url: str) -> list[BaseRoute]:
    regs = ClientRegistrationOptions(enabled=True, valid_scopes=None)
    revs = RevocationOptions(enabled=True)
    meta = build_metadata(issuer(url), AnyHttpUrl(url.rstrip("/") + "/console"), regs, revs)
    meta.scopes_supported = list(ACTIONS)
    well_known: Any = cors_middleware(MetadataHandler(meta).handle, ["GET", "OPTIONS"])
    return [
        Route("/.well-known/oauth-authorization-server" + ISSUER_PATH, endpoint=well_known,
              methods=["GET", "OPTIONS"]),
        *create_protected_resource_routes(resource(url), [issuer(url)],
                                          scopes_supported=list(ACTIONS),
                                          resource_name="Quire hub"),
        Mount(ISSUER_PATH, routes=create_auth_routes(
            provider, issuer(url), client_registration_options=regs,
            revocation_options=revs)),
    ]
