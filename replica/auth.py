"""How the replica proves who it is to the hub: an ``httpx2.Auth`` flow, so the scheme can
change (DPoP proofs with the device key, token refresh, nonce retry) without touching a
single call site. Today: ``Authorization: Bearer <device credential>`` (docs/protocol.md).
"""

from __future__ import annotations

from collections.abc import Generator

import httpx2


class BearerAuth(httpx2.Auth):
    """Sends the device credential returned by invite redemption."""

    def __init__(self, credential: str):
        self._credential = credential

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response,
                                                              None]:
        request.headers["Authorization"] = f"Bearer {self._credential}"
        yield request

    def __repr__(self) -> str:  # never show the secret in logs
        return "BearerAuth(credential=***)"
