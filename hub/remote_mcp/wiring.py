"""How hub/app.py serves the remote endpoint: ``/mcp`` and the OAuth routes, or nothing
when ``remote_mcp`` is off or the hub's URL cannot carry OAuth (plain http off loopback)."""

from __future__ import annotations

import logging
from typing import Any

from starlette.routing import BaseRoute, Route

from hub import logs
from hub.oauth.provider import QuireProvider
from hub.oauth.routes import RESOURCE_PATH, oauth_routes, served
from hub.remote_mcp.server import Endpoint

log = logging.getLogger("quire.hub")


def remote_endpoint(hub: Any) -> Endpoint | None:
    s = hub.settings
    if not s.remote_mcp:
        return None
    if not served(s.url):
        logs.event(log, "remote_mcp_off", logging.INFO, url=s.url,
                   reason="OAuth needs an https public_url (or http on a loopback address)")
        return None
    return Endpoint(hub)


def remote_routes(hub: Any, endpoint: Endpoint) -> list[BaseRoute]:
    provider = QuireProvider(hub.store, hub.settings, lambda: hub.now())
    return [*oauth_routes(provider, hub.settings.url), Route(RESOURCE_PATH, endpoint)]
