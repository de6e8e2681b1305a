"""The authorization server behind the ``mcp`` SDK's OAuth routes (mcp.server.auth): the SDK
parses and answers the protocol (RFC 8414 metadata, RFC 7591 registration, authorize with
PKCE S256 only, token with code_verifier and redirect_uri checks, revocation); this class
decides and stores, on the hub's database and clock (D136).

    register_client        a public client (no secret is issued or kept; redirect URIs
                           https, or http on loopback)
    authorize              a pending request ─► the console's consent page (hub/oauth/consent)
    load_authorization_code / exchange_authorization_code
                           a code once: a second use revokes the consent (the code leaked)
    load_refresh_token / exchange_refresh_token
                           rotation: a used refresh token's reuse revokes the consent
    load_access_token      hub/oauth/tokens.py ``verify`` (the MCP endpoint calls it itself
                           to answer refusals with their reason)
    revoke_token           one token (RFC 7009)
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    RegistrationError,
    TokenError,
)
from mcp.shared.auth import InvalidScopeError, OAuthClientInformationFull, OAuthToken
from starlette.concurrency import run_in_threadpool

from hub.access import secret_hash
from hub.oauth import consent
from hub.oauth import scopes as sc
from hub.oauth import tokens as tk
from hub.store import oauth_sql as sql
from hub.store.db import Store
from shared.errors import QuireError

LOOPBACK = {"127.0.0.1", "localhost", "[::1]", "::1"}


class QuireClient(OAuthClientInformationFull):
    """A registered client; any scope the hub knows may be asked (read, propose, write,
    space:NAME): what is granted is the member's choice at consent."""

    def validate_scope(self, requested_scope: str | None) -> list[str] | None:
        try:
            sc.parse(requested_scope)
        except sc.ScopeError as e:
            raise InvalidScopeError(str(e)) from None
        return None if requested_scope is None else requested_scope.split()


def _redirect_ok(uri: str) -> bool:
    u = urlsplit(uri)
    return not u.fragment and (u.scheme == "https" or (u.scheme == "http"
                                                        and u.hostname in LOOPBACK))


class QuireProvider:
    """``OAuthAuthorizationServerProvider`` over the hub's store and clock."""

    def __init__(self, store: Store, settings: Any, now: Callable[[], int]):
        self.store, self.settings, self.now = store, settings, now

    def _off(self, ms: int) -> float:
        """A hub-clock instant in the SDK's clock (it compares with ``time.time()``)."""
        return time.time() + (ms - self.now()) / 1000

    async def get_client(self, client_id: str) -> QuireClient | None:
        def read() -> Any:
            with self.store.read() as conn:
                return sql.client_txn(conn, client_id) if len(client_id) <= 64 else None
        row = await run_in_threadpool(read)
        return None if row is None else QuireClient.model_validate_json(row.info)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        uris = [str(u) for u in client_info.redirect_uris or []]
        bad = [u for u in uris if not _redirect_ok(u)]
        if not uris or bad:
            raise RegistrationError("invalid_redirect_uri", "redirect URIs must be https, or "
                                    f"http on a loopback address: {bad or 'none given'}")
        if len(uris) > 10 or any(len(u) > 2000 for u in uris):
            raise RegistrationError("invalid_redirect_uri", "at most 10 redirect URIs of "
                                    "2000 characters")
        # public clients only (RFC 7591 lets the server replace what was asked): PKCE
        # proves the code's holder, and no client secret is ever kept
        client_info.token_endpoint_auth_method = "none"
        client_info.client_secret = None
        client_info.client_secret_expires_at = None
        name = (client_info.client_name or "agent")[:200]
        info = client_info.model_dump_json(exclude_none=True)
        now = self.now()
        await run_in_threadpool(self.store.run_write, lambda conn: sql.insert_txn(
            conn, sql.oauth_clients, id=client_info.client_id, name=name, info=info,
            created_at=now))

    async def authorize(self, client: OAuthClientInformationFull,
                        params: AuthorizationParams) -> str:
        now = self.now()
        request_id = secrets.token_urlsafe(24)
        scope = " ".join(params.scopes or [])
        await run_in_threadpool(self.store.run_write, lambda conn: sql.insert_txn(
            conn, sql.oauth_requests, id=request_id, client_id=client.client_id,
            redirect_uri=str(params.redirect_uri),
            redirect_explicit=params.redirect_uri_provided_explicitly,
            code_challenge=params.code_challenge, state=params.state, scopes=scope,
            resource=params.resource, created_at=now,
            expires_at=now + self.settings.oauth_request_ttl * 1000))
        return f"{self.settings.url.rstrip('/')}/console/consent?request={request_id}"

    async def load_authorization_code(self, client: OAuthClientInformationFull,
                                      authorization_code: str) -> AuthorizationCode | None:
        now = self.now()

        def txn(conn: Any) -> Any:
            row = sql.code_txn(conn, secret_hash(authorization_code))
            if row is not None and row.used_at is not None:
                consent.revoke_leaked_txn(conn, row.consent_id, now)  # a replayed code leaked
                return "replayed"
            return row

        if len(authorization_code) > 200:
            return None
        row = await run_in_threadpool(self.store.run_write, txn)
        if row is None or row == "replayed" or row.expires_at <= now:
            return None
        return AuthorizationCode(
            code=authorization_code, scopes=row.scopes.split(),
            expires_at=self._off(row.expires_at), client_id=row.client_id,
            code_challenge=row.code_challenge, redirect_uri=row.redirect_uri,
            redirect_uri_provided_explicitly=row.redirect_explicit, resource=row.resource)

    def _pair_txn(self, conn: Any, consent_id: str, client_id: str, scopes: str,
                  now: int) -> OAuthToken:
        c = sql.consent_txn(conn, consent_id)
        try:
            tk.consent_live(c, now)
        except QuireError as e:
            raise TokenError("invalid_grant", e.message) from None
        pair = tk.mint_pair_txn(conn, consent_id=consent_id, client_id=client_id,
                                scopes=scopes, now=now,
                                access_ttl_s=self.settings.oauth_access_ttl,
                                refresh_until=int(c.expires_at))
        return OAuthToken(access_token=pair["access_token"], token_type="Bearer",
                          expires_in=pair["expires_in"], scope=pair["scope"],
                          refresh_token=pair["refresh_token"])

    async def exchange_authorization_code(self, client: OAuthClientInformationFull,
                                          authorization_code: AuthorizationCode) -> OAuthToken:
        now = self.now()

        def txn(conn: Any) -> OAuthToken:
            h = secret_hash(authorization_code.code)
            if not sql.use_code_txn(conn, h, now):
                raise TokenError("invalid_grant", "this authorization code was used already")
            row = sql.code_txn(conn, h)
            return self._pair_txn(conn, row.consent_id, row.client_id, row.scopes, now)

        return await run_in_threadpool(self.store.run_write, txn)

    async def load_refresh_token(self, client: OAuthClientInformationFull,
                                 refresh_token: str) -> RefreshToken | None:
        now = self.now()

        def txn(conn: Any) -> Any:
            row = sql.token_txn(conn, secret_hash(refresh_token))
            if row is None or row.kind != "refresh":
                return None
            if row.used_at is not None:  # a rotated refresh token again: it leaked
                consent.revoke_leaked_txn(conn, row.consent_id, now)
                return None
            return row

        if not refresh_token.startswith(tk.REFRESH_PREFIX) or len(refresh_token) > 200:
            return None
        row = await run_in_threadpool(self.store.run_write, txn)
        if row is None or row.revoked_at is not None or row.expires_at <= now:
            return None
        return RefreshToken(token=refresh_token, client_id=row.client_id,
                            scopes=row.scopes.split(), expires_at=int(self._off(row.expires_at)))

    async def exchange_refresh_token(self, client: OAuthClientInformationFull,
                                     refresh_token: RefreshToken,
                                     scopes: list[str]) -> OAuthToken:
        now = self.now()

        def txn(conn: Any) -> OAuthToken:
            h = secret_hash(refresh_token.token)
            if not sql.use_refresh_txn(conn, h, now):
                raise TokenError("invalid_grant", "this refresh token was used already")
            row = sql.token_txn(conn, h)
            narrowed = " ".join(s for s in row.scopes.split() if s in scopes) or row.scopes
            return self._pair_txn(conn, row.consent_id, row.client_id, narrowed, now)

        return await run_in_threadpool(self.store.run_write, txn)

    async def load_access_token(self, token: str) -> AccessToken | None:
        try:
            g = await run_in_threadpool(tk.verify, self.store, token, self.now())
        except QuireError:
            return None
        return AccessToken(token=token, client_id=g.client_id, scopes=g.scopes,
                           expires_at=int(self._off(g.expires_at)))

    async def exchange_identity_assertion(self, client: OAuthClientInformationFull,
                                          params: Any) -> OAuthToken:
        raise TokenError("unsupported_grant_type", "no identity assertion grant here")

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        now = self.now()
        await run_in_threadpool(self.store.run_write, lambda conn: sql.revoke_token_txn(
            conn, secret_hash(token.token), now))

