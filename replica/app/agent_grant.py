"""An MCP session as an agent principal: the delegation ``quire mcp --agent NAME`` holds.

    first tool call ──► mint: POST /v1/delegations with this device's own credential
                        (one space, read unless --write, ttl <= 24 h, default 8 h)
    every tool call ──► check: GET …/head with the delegated token (one round trip), so a
                        revocation stops the session at its next call
                    ──► renew: within RENEW_FRACTION of expiry, mint a new delegation and
                        revoke the old one (the member's list shows one live grant)
    hub says delegation_revoked ──► revoked for good: every later call fails with
                        ``unauthorized`` (reason ``delegation_revoked``); never re-minted
    session ends    ──► release(): the delegation it holds is revoked (best effort: one
                        that could not be is still bounded by its lifetime and by the
                        hub's delegations_per_agent)

An exported delegation (``QUIRE_DELEGATION_TOKEN``, from ``quire delegate create``) is
used as it is instead (``ExportedGrant``): checked the same way, never renewed.

Every hub request of the session (sync, publication, remote reads) carries the delegated
token (``delegated_client``), never the device's own credential, so the guard, the rules
for ``agents`` and the audit see the agent (docs/agents.md). Offline
(hub unreachable) the check is skipped and local tools keep working; nothing is published
without the hub, which re-checks the delegation at commit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.errors import InvalidRequest, TransferFailed, Unauthorized

DEFAULT_TTL_S = 8 * 3600
MAX_TTL_S = 24 * 3600
MIN_TTL_S = 60
RENEW_FRACTION = 0.25  # renew when less than this share of the lifetime is left
STOP_REASONS = ("delegation_revoked", "unknown_delegation")


@dataclass
class Grant:
    id: str
    token: str
    expires_at: int  # ms
    issued_at: int  # ms


class AgentGrant:
    """The delegation of one agent on one space, obtained and renewed on demand.

    ``mint(body) -> response`` posts to ``/v1/delegations`` with the device credential;
    ``revoke(id)`` revokes one; ``probe(token)`` makes one hub request with the delegated
    token (raises the hub's error). All three are injected: tests hand in the real hub."""

    def __init__(self, *, space: str, agent: str, write: bool, ttl_s: int = DEFAULT_TTL_S,
                 mint: Callable[[dict[str, Any]], dict[str, Any]],
                 revoke: Callable[[str], Any], probe: Callable[[str], Any],
                 clock: Callable[[], float] = time.time):
        if not (isinstance(ttl_s, int) and MIN_TTL_S <= ttl_s <= MAX_TTL_S):
            raise InvalidRequest(f"the delegation lasts {MIN_TTL_S} s to 24 h "
                                 f"(--ttl); got {ttl_s}")
        self.space, self.agent, self.write, self.ttl_s = space, agent, write, ttl_s
        self._mint, self._revoke, self._probe, self._clock = mint, revoke, probe, clock
        self.grant: Grant | None = None
        self.stopped: dict[str, Any] | None = None  # why the session may no longer act

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _obtain(self) -> Grant:
        res = self._mint({"space": self.space, "agent": self.agent,
                          "scope": "write" if self.write else "read",
                          "ttl_seconds": self.ttl_s})
        d = res["delegation"]
        return Grant(d["id"], res["token"], int(d["expires_at"]), self._now_ms())

    def _due(self, g: Grant) -> bool:
        left = g.expires_at - self._now_ms()
        return left <= (g.expires_at - g.issued_at) * RENEW_FRACTION

    def token(self) -> str:
        """The live delegated token: minted on first use, renewed near expiry."""
        self._refuse_if_stopped()
        g = self.grant
        if g is None or self._due(g):
            fresh = self._obtain()
            self.grant = fresh
            if g is not None and g.expires_at > self._now_ms():
                try:
                    self._revoke(g.id)  # one live grant per session
                except Exception:  # noqa: BLE001 (best effort: it expires anyway)
                    pass
        assert self.grant is not None
        return self.grant.token

    def check(self) -> None:
        """One hub round trip with the delegated token: a revoked delegation stops the
        session here. A transfer failure (offline) is not a refusal."""
        try:
            token = self.token()
            self._probe(token)
        except TransferFailed:
            return  # offline: local tools work; publishing needs a token (``ready``)
        except Unauthorized as e:
            reason = (e.details or {}).get("reason")
            if reason == "delegation_expired":
                self.grant = None  # a lapse (machine slept), not a revocation: mint again
                self._probe(self.token())
                return
            if reason in STOP_REASONS:
                self.stopped = {"reason": reason, "delegation": self.grant.id
                                if self.grant else None, "agent": self.agent}
            raise
        except Exception:
            raise

    @property
    def ready(self) -> bool:
        """A delegated token is held (a publication can carry it)."""
        return self.stopped is None and self.grant is not None

    def _refuse_if_stopped(self) -> None:
        if self.stopped is not None:
            raise Unauthorized(
                f"the delegation of agent {self.agent} on this space was revoked; this MCP "
                "session no longer acts for it (local changes are kept). A member can start "
                "'quire mcp' again if the agent should continue.", dict(self.stopped))

    def release(self) -> None:
        """The session ends: revoke the delegation it holds, so no live token outlives it.
        Best effort (the hub may be unreachable): never raises."""
        g, self.grant = self.grant, None
        if g is None or g.expires_at <= self._now_ms():
            return
        try:
            self._revoke(g.id)
        except Exception:  # noqa: BLE001 - it expires anyway; the session is over
            pass

    def describe(self) -> dict[str, Any]:
        g = self.grant
        return {"agent": self.agent, "scope": "write" if self.write else "read",
                "delegation": g.id if g else None, "expires_at": g.expires_at if g else None,
                "stopped": self.stopped}


class ExportedGrant:
    """A delegation a member minted and exported (``QUIRE_DELEGATION_TOKEN`` from ``quire
    delegate create``): used as it is, never renewed nor replaced by one of the session's
    own. ``claims``: what the token says of itself (``act.sub``, ``space``, ``scope``,
    ``dlg``, ``exp``); the hub checks them on every request. Same interface as
    ``AgentGrant``."""

    def __init__(self, token: str, claims: dict[str, Any], *,
                 probe: Callable[[str], Any]):
        act = claims.get("act")
        self.agent = str(act.get("sub") or "") if isinstance(act, dict) else ""
        self.space = str(claims.get("space") or "")
        self.write = claims.get("scope") == "write"
        self._token, self._claims, self._probe = token, claims, probe
        self.stopped: dict[str, Any] | None = None

    def token(self) -> str:
        if self.stopped is not None:
            raise Unauthorized(
                f"the exported delegation of agent {self.agent} no longer works "
                f"({self.stopped['reason']}); this MCP session no longer acts for it (local "
                "changes are kept). A member can export a new one and start 'quire mcp' "
                "again.", dict(self.stopped))
        return self._token

    def check(self) -> None:
        try:
            self._probe(self.token())
        except TransferFailed:
            return
        except Unauthorized as e:
            reason = (e.details or {}).get("reason")
            if reason in (*STOP_REASONS, "delegation_expired", "token_expired"):
                self.stopped = {"reason": reason, "delegation": self._claims.get("dlg"),
                                "agent": self.agent}
            raise

    @property
    def ready(self) -> bool:
        return self.stopped is None

    def describe(self) -> dict[str, Any]:
        exp = self._claims.get("exp")
        return {"agent": self.agent, "scope": "write" if self.write else "read",
                "delegation": self._claims.get("dlg"),
                "expires_at": int(exp) * 1000 if isinstance(exp, int) else None,
                "stopped": self.stopped, "exported": True}


def delegated_client(home: Any, space: Any, token: str) -> Any:
    """A hub client of ``space``'s hub that carries the delegated ``token`` (proofs by the
    device key): every hub request of an agent session, and never the device's own
    credential."""
    from replica.app import service
    from replica.hubclient.auth import auth_for, delegated
    from replica.hubclient.client import HubClient
    from replica.machine.credentials import CredentialFile
    from shared.errors import LocalError

    hub = home.hub(space.hub_id)
    if hub is None:
        raise LocalError(f"space {space.name} belongs to a hub this machine no longer knows")
    device = auth_for(hub.key_path, CredentialFile(hub.credential_path, hub.key_path))
    base = device.tokens.htu_base if device is not None else hub.url  # the DPoP URL base
    client = HubClient(hub.url, auth=delegated(hub.key_path, token, base),
                       pin=service.key_pin(hub))
    client.replica_id = space.replica_id
    return client


def exported_grant(home: Any, space: Any, token: str, claims: dict[str, Any]
                   ) -> ExportedGrant:
    """The grant of an exported delegated ``token`` on ``space``, probed with the hub."""

    def probe(tok: str) -> Any:
        with delegated_client(home, space, tok) as c:
            return c.head(space.space_id)

    return ExportedGrant(token, claims, probe=probe)


def grant_for(home: Any, space: Any, agent: str, *, write: bool, ttl_s: int) -> AgentGrant:
    """The grant of ``agent`` on a joined ``space`` of ``home``: minted and revoked with
    this device's own credential, probed with the delegated token (the real hub)."""
    from replica.app import service
    from shared.errors import LocalError

    hub = home.hub(space.hub_id)
    if hub is None:
        raise LocalError(f"space {space.name} belongs to a hub this machine no longer knows")

    def mint(body: dict[str, Any]) -> dict[str, Any]:
        with service.open_client(hub, device_only=True) as c:
            return c.admin_post("/v1/delegations", body)  # type: ignore[no-any-return]

    def revoke(delegation: str) -> Any:
        with service.open_client(hub, device_only=True) as c:
            return c.admin_post(f"/v1/delegations/{delegation}/revoke", {})

    def probe(token: str) -> Any:
        with delegated_client(home, space, token) as c:
            return c.head(space.space_id)

    return AgentGrant(space=space.space_id, agent=agent, write=write, ttl_s=ttl_s,
                      mint=mint, revoke=revoke, probe=probe)
