"""Hub settings: environment (``QUIRE_HUB_<NAME>``), then ``<data>/hub.toml``, then defaults.

Every limit is a named setting here and documented in docs/operations.md. Secrets (the
database URL may hold a password) are masked in ``repr``.
"""

from __future__ import annotations

import os
import re
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


def _ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Settings:
    data_dir: Path = Path(".quire/hub")
    db_url: str = ""  # default: sqlite file in data_dir
    host: str = "127.0.0.1"
    port: int = 8470
    public_url: str = ""  # the URL clients use (token audience); default http://host:port
    trusted_proxies: str = ""  # addresses/networks whose proxy_header names the client
    proxy_header: str = "x-forwarded-for"  # the one header they set: or forwarded, x-real-ip
    max_body_bytes: int = 8 * 1024 * 1024
    header_timeout_s: int = 10  # a request's headers must arrive within this (hub/api/timeouts.py)
    body_timeout_s: int = 60  # and its body within this of its start
    max_ops: int = 1000
    max_entry_body: int = 1024 * 1024
    json_max_depth: int = 64  # parse limits on every JSON body, checked before parsing
    json_max_keys: int = 200_000  # object members in one body
    json_max_string: int = 4 * 1024 * 1024  # characters of one JSON string as sent
    changes_page: int = 500
    changes_page_max: int = 5000
    invite_ttl: int = 7 * 24 * 3600
    invite_ttl_max: int = 30 * 24 * 3600
    db_pool_size: int = 10
    events_keepalive_ms: int = 20000  # comment line on idle event streams
    events_recheck_ms: int = 60000  # re-read an event stream caller's access this often
    longpoll_max_s: int = 60  # longest head?wait=
    access_ttl: int = 600  # seconds an access token lives (docs/security.md)
    refresh_ttl: int = 30 * 24 * 3600  # seconds a refresh credential lives unused
    dpop_window: int = 60  # seconds a DPoP proof's iat may be off from the hub clock
    dpop_jti_cache: int = 200_000  # DPoP jti values remembered per process
    invites_per_min: int = 120  # invites one user may create a minute (shared on PostgreSQL)
    refreshes_per_min: int = 30  # refresh grants per device key a minute
    publications_per_min: int = 6000  # batches one device may publish a minute
    device_codes_per_min: int = 12  # device logins started per client address a minute
    streams_per_device: int = 16  # open event streams per device, per hub process
    audit_refusal_window: int = 60  # seconds refused attempts are counted before written
    audit_refusal_keys: int = 256  # distinct refusals a window; the rest: one overflow count
    # days a deleted space's data is kept (restorable) before `quire hub gc` or the next
    # hub start purges it (hub/space_delete.py)
    space_retention_days: int = 30
    space_max_entries: int = 1_000_000  # live entries per space (0: none; admins may set)
    space_max_bytes: int = 4 * 1024**3  # bytes of a space's live entries
    space_max_history_bytes: int = 16 * 1024**3  # bytes of a space's batches
    hub_max_bytes: int = 0  # entries + history of all spaces (0: none)
    space_max_attachment_bytes: int = 25 * 1024 * 1024  # one attachment (0: none; admins may set)
    replicas_per_device: int = 100  # live replicas one device registers in a space (0: none)
    conflict_reports_per_member: int = 1000  # conflicts one member's replicas report, a space
    delegation_ttl_max: int = 24 * 3600
    delegations_per_agent: int = 10  # live delegations of one member to one agent (0: none)
    delegations_per_member: int = 100  # live delegations of one member, every agent (0: none)
    device_code_ttl: int = 600  # seconds a device login (RFC 8628) may wait for approval
    device_code_interval: int = 5  # seconds between polls the hub asks for
    console_session_ttl: int = 4 * 3600  # seconds a console (browser) sign-in lasts
    # the remote MCP endpoint's OAuth (hub/oauth/, docs/agents.md "Remote endpoint")
    remote_mcp: bool = True  # serve /mcp and /oauth (on https or a loopback URL)
    oauth_access_ttl: int = 600  # seconds an OAuth access token lives
    oauth_code_ttl: int = 60  # seconds an authorization code may wait for its exchange
    oauth_request_ttl: int = 600  # seconds a sign-in may wait for a member's consent
    oauth_consent_ttl: int = 24 * 3600  # a consent (and its refresh tokens); ≤ delegation_ttl_max
    oauth_requests_per_min: int = 60  # OAuth registrations, authorizations, tokens per address
    # OpenID Connect sign-in for the console (hub/console/oidc.py, docs/operations.md);
    # off while oidc_issuer is empty
    oidc_issuer: str = ""  # the provider's issuer URL, exactly as its metadata states it
    oidc_metadata_url: str = ""  # default: <issuer>/.well-known/openid-configuration
    oidc_client_id: str = ""
    oidc_client_secret_file: str = ""  # a file holding the client secret (preferred)
    oidc_client_secret: str = ""  # or the secret itself, from the environment; never shown
    oidc_scopes: str = "openid email profile"  # profile: the `name` claim (D138)
    oidc_name: str = ""  # the provider's name on the sign-in button (default: the issuer)
    # instruction-injection markers screened in guardrails and skills, added to the
    # defaults (shared/screening.py): one regular expression a line (docs/security.md)
    screening_injection: str = ""
    log_level: str = "info"
    # keep the signed state root (docs/security.md); off only to measure its cost: replicas
    # refuse heads without it
    state_root: bool = True
    log_format: str = "auto"  # json | text | auto (JSON unless stderr is a terminal)
    metrics_host: str = "127.0.0.1"  # /metrics listener, apart from the public port
    metrics_port: int = 0  # 0: the serving port + 1000; -1: no metrics listener
    clock: Callable[[], int] = field(default=_ms, repr=False)  # Unix milliseconds

    def __repr__(self) -> str:
        shown = []
        for f in fields(self):
            if f.name == "clock":
                continue
            v = getattr(self, f.name)
            if f.name == "db_url":
                v = re.sub(r"://([^:/@]+):[^@]+@", r"://\1:***@", str(v))
            if f.name == "oidc_client_secret" and v:
                v = "***"
            shown.append(f"{f.name}={v!r}")
        return f"Settings({', '.join(shown)})"

    @property
    def database_url(self) -> str:
        return self.db_url or f"sqlite:///{(self.data_dir / 'hub.db').resolve()}"

    @property
    def key_path(self) -> Path:
        return self.data_dir / "hub_key.pem"

    @property
    def metrics_listen_port(self) -> int:
        return self.port + 1000 if self.metrics_port == 0 else self.metrics_port

    @property
    def url(self) -> str:
        return self.public_url or f"http://{self.host}:{self.port}"


def _coerce(kind: Any, raw: Any) -> Any:
    if kind in (int, "int"):
        return int(raw)
    if kind in (Path, "Path"):
        return Path(raw)
    return str(raw)


def load_settings(data_dir: str | Path | None = None, **overrides: Any) -> Settings:
    """Environment first, then ``<data>/hub.toml``, then defaults; explicit overrides (CLI
    flags) win over all three."""
    s = Settings()
    data = Path(data_dir or os.environ.get("QUIRE_HUB_DATA_DIR") or s.data_dir)
    file_values: dict[str, Any] = {}
    toml_path = data / "hub.toml"
    if toml_path.exists():
        file_values = tomllib.loads(toml_path.read_text())
    for f in fields(Settings):
        if f.name in ("clock", "data_dir"):
            continue
        env = os.environ.get(f"QUIRE_HUB_{f.name.upper()}")
        if env is not None:
            setattr(s, f.name, _coerce(f.type, env))
        elif f.name in file_values:
            setattr(s, f.name, _coerce(f.type, file_values[f.name]))
    s.data_dir = data
    for k, v in overrides.items():
        if v is not None:
            setattr(s, k, v)
    return s
