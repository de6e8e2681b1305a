"""How the replica proves who it is to the hub: an ``httpx2.Auth`` flow, so the scheme lives
here and not at any call site.

Every request carries ``Authorization: DPoP <access token>`` and a fresh DPoP proof signed
by the device key (RFC 9449; ``shared/dpop.py``). When the access token is about to expire,
or the hub answers 401 with ``details.reason`` ``token_expired``/``invalid_token``, the flow
refreshes it once (``POST /v1/token``, grant ``refresh_token``, with a proof by the same
key), persists the rotated refresh credential through ``CredentialFile`` and retries the
request once. Refreshing happens under a file lock after re-reading the file, so two
processes of one machine (a sync and a watcher) never present the same refresh credential
twice, which the hub would treat as theft and answer by revoking the whole login.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator
from typing import Any

import httpx2
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from replica.hubclient.ndjson import parse_answer
from replica.machine.credentials import CredentialFile, Tokens
from shared.dpop import make_proof
from shared.errors import HubUnverified, QuireError
from shared.jsonlimits import loads as bounded_loads
from shared.signing import load_private

REFRESH_MARGIN_S = 30  # refresh this long before the access token expires
# unknown_kid: signed by a hub key since rotated (hub/keyrotation.py): a refresh gets one
# signed by the new key
RETRY_REASONS = ("token_expired", "invalid_token", "unknown_kid")


class DPoPAuth(httpx2.Auth):
    requires_response_body = True

    def __init__(self, key: Ed25519PrivateKey, tokens: Tokens, *,
                 credentials: CredentialFile | None = None,
                 clock: Callable[[], float] = time.time):
        self._key = key
        self._tokens = tokens
        self._credentials = credentials
        self._clock = clock

    @property
    def tokens(self) -> Tokens:
        return self._tokens

    def _sign(self, request: httpx2.Request) -> None:
        url = self._tokens.htu_base.rstrip("/") + request.url.path
        request.headers["Authorization"] = f"DPoP {self._tokens.access_token}"
        request.headers["DPoP"] = make_proof(self._key, request.method, url,
                                             access_token=self._tokens.access_token)

    def _expiring(self) -> bool:
        return self._tokens.expires_at - REFRESH_MARGIN_S <= self._clock()

    def _adopt_newer(self) -> bool:
        """Another process may have rotated the credential: take it instead of refreshing."""
        if self._credentials is None:
            return False
        saved = self._credentials.load()
        if saved is not None and saved.refresh_token != self._tokens.refresh_token:
            self._tokens = saved
            return True
        return False

    def _refresh_request(self) -> httpx2.Request:
        url = self._tokens.htu_base.rstrip("/") + "/v1/token"
        body = json.dumps({"grant_type": "refresh_token",
                           "refresh_token": self._tokens.refresh_token}).encode()
        return httpx2.Request("POST", url, content=body, headers={
            "Content-Type": "application/json",
            "DPoP": make_proof(self._key, "POST", url)})

    def _refresh_flow(self, request: httpx2.Request
                      ) -> Generator[httpx2.Request, httpx2.Response, bool]:
        """Refresh the access token; True when it worked (tokens saved)."""
        if not self._tokens.refresh_token:
            return False
        lock = self._credentials.lock() if self._credentials else None
        if lock is not None:
            lock.__enter__()
        try:
            if self._adopt_newer() and not self._expiring():
                return True
            resp = yield self._refresh_request()
            if resp.status_code != 200:
                return False
            try:  # a hostile answer is refused here, never a KeyError or RecursionError
                data = parse_answer(resp.content, "POST /v1/token")
                tokens = Tokens(str(data["access_token"]), str(data["refresh_token"]),
                                int(data["expires_at"]), self._tokens.htu_base)
            except (ValueError, TypeError, KeyError) as e:
                raise HubUnverified(f"POST /v1/token: not a token answer: {type(e).__name__}",
                                    {"reason": "bad_token_answer"}) from None
            self._tokens = tokens
            if self._credentials is not None:
                self._credentials.save(self._tokens)
            return True
        finally:
            if lock is not None:
                lock.__exit__(None, None, None)

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response,
                                                              None]:
        if self._expiring():
            yield from self._refresh_flow(request)
        self._sign(request)
        response = yield request
        if response.status_code == 401 and _reason(response) in RETRY_REASONS:
            if (yield from self._refresh_flow(request)):
                self._sign(request)
                yield request

    def __repr__(self) -> str:  # never show a secret in logs
        return "DPoPAuth(tokens=***)"


def _reason(response: httpx2.Response) -> str | None:
    try:
        err = parse_answer(response.content, "401").get("error") or {}
        return (err.get("details") or {}).get("reason")
    except (QuireError, ValueError, AttributeError):
        return None


def auth_for(key_path: Any, credentials: CredentialFile) -> DPoPAuth | None:
    """The auth flow of a joined device (None when it holds no tokens yet)."""
    tokens = credentials.load()
    if tokens is None:
        return None
    return DPoPAuth(load_private(key_path), tokens, credentials=credentials)


def delegated(key_path: Any, token: str, htu_base: str) -> DPoPAuth:
    """An agent's flow: a delegated token (no refresh) with proofs by the device key."""
    return DPoPAuth(load_private(key_path), Tokens(token, None, 2**62, htu_base))



def token_claims(token: str) -> dict[str, Any]:
    """The claims of an access token as this machine holds it, read without checking the
    signature: what a delegated token says of itself (``act.sub``, the agent; ``space``,
    ``scope``, ``dlg``, ``exp``), to name the session and its provenance. The hub verifies
    every claim on every request; {} when it is not a JWT."""
    import base64

    try:
        payload = token.split(".")[1]
        doc = bounded_loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def token_agent(token: str | None) -> str | None:
    """The agent a delegated token acts for (its ``act.sub``), or None."""
    act = token_claims(token).get("act") if token else None
    sub = act.get("sub") if isinstance(act, dict) else None
    return sub if isinstance(sub, str) and sub else None
