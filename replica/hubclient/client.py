"""The hub HTTP client. The only module that imports ``httpx2``.

It takes an injected transport (tests pass the hub app in-process or a hostile double), maps
error responses to the ``shared.errors`` classes with ``from_wire``, and turns everything
that means "the transfer failed" (network errors, timeouts, a 2xx body that is not JSON, an
NDJSON stream without its ``end`` line) into ``TransferFailed``, which is retryable.

It trusts nothing it cannot verify: heads and receipts must carry a valid signature by the
pinned hub key, every pulled batch must parse (its digest recomputed) and extend the hash
chain from the replica's head to the signed head that ends the page, and every snapshot
entry must match its version. Everything parsed from the hub is bounded first (line length,
nesting depth, sizes: ``shared.jsonlimits``). A hub that fails these checks raises
``HubUnverified`` (permanent: a person must look). What the store must add up to (the state
root) and who signed each batch is checked by ``replica/trust/verify.py``.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx2

from replica.hubclient.ndjson import (
    LINE_LIMITS,
    MAX_LINE,
    check_entry_line,
    ndjson_lines,
    parse_answer,
    parse_line,
)
from replica.trust.keypin import KeyPin
from replica.trust.scoped import Withheld, parse_withheld
from shared import PROTOCOL_HEADER, PROTOCOL_VERSION
from shared.attachments import blob_hash
from shared.digest import verify_chain
from shared.entry import Entry
from shared.errors import (
    HubUnverified,
    InvalidRequest,
    LocalError,
    QuireError,
    StaleHead,
    TransferFailed,
    from_wire,
)
from shared.jsonlimits import JsonLimitError
from shared.jsonlimits import loads as bounded_loads
from shared.signed import SignedHead, parse_head
from shared.wire import REPLICA_HEADER, Batch, parse_batch, verify_receipt

DEFAULT_TIMEOUT = 30.0
END_PREFIX = b'{"end"'  # how the hub starts an end line (hub/feed.py); raw streams parse it


@dataclass(frozen=True)
class Change:
    batch: Batch
    seq: int
    head: str
    accepted_at: int | None
    author: dict[str, Any] | None
    receipt: dict[str, Any] | None = None
    # a scoped answer's left-out ops (replica/trust/scoped.py); the batch is then redacted
    withheld: Withheld | None = None


@dataclass(frozen=True)
class ChangesPage:
    changes: list[Change]
    head_seq: int
    more: bool
    signed: SignedHead | None = None  # the hub-signed head the page ends at
    end: dict[str, Any] | None = None  # the end line as sent (scope, proofs)


def _q(s: str) -> str:
    return quote(s, safe="")


def parse_changes(lines: Iterator[dict[str, Any]], *,
                  verify_head: Callable[[Any, str], SignedHead], space_id: str, epoch: str,
                  after: int, after_digest: str) -> ChangesPage:
    """Changes lines (ending with ``end``), each batch parsed and chained onto
    ``(after, after_digest)``, up to the hub-signed head in the end line, which must be
    exactly where the chain arrives (``verify_head``: ``HubClient.verified_head``, which
    follows a hub key rotation). Used for pulls and for changes carried by head events
    (the watcher): one verification for both."""
    changes: list[Change] = []
    end: dict[str, Any] | None = None
    prev = (after, after_digest)
    for line in lines:
        if "end" in line:
            end = line["end"]
            continue
        withheld = None
        try:
            if "withheld" in line:  # a scoped answer: ops left out, digest from the receipt
                withheld = parse_withheld(line["withheld"])
                batch = parse_batch(line["batch"], redacted=True)
            else:
                batch = parse_batch(line["batch"])
            seq, head = line["seq"], line["head"]
            prev = verify_chain(space_id, epoch, [(seq, batch.digest, head)], start=prev)
            author, receipt = line.get("author"), line.get("receipt")
            if not (author is None or isinstance(author, dict)) or not (
                    receipt is None or isinstance(receipt, dict)):
                raise ValueError("author and receipt must be objects")
        except HubUnverified:
            raise
        except Exception as e:  # noqa: BLE001 - whatever a hostile line does, it is refused
            raise HubUnverified(f"pulled batch does not verify: {type(e).__name__}: {e}",
                                {"reason": "bad_batch"}) from e
        if batch.space != space_id or batch.epoch != epoch:
            raise HubUnverified("pulled batch belongs to another space or epoch")
        changes.append(Change(batch, seq, head, line.get("accepted_at"), author, receipt,
                              withheld))
    if not isinstance(end, dict):
        raise TransferFailed("changes: no end line")
    signed = verify_head(end.get("head"), space_id)
    if (signed.epoch, signed.seq, signed.digest) != (epoch, prev[0], prev[1]):
        raise HubUnverified("the changes do not end at the head the hub signed",
                            {"reason": "head_mismatch", "signed_seq": signed.seq,
                             "chain_seq": prev[0]})
    head_seq, more = end.get("head_seq", prev[0]), end.get("more")
    if not isinstance(head_seq, int) or isinstance(head_seq, bool):
        raise HubUnverified("changes end line: head_seq is not an integer")
    return ChangesPage(changes, head_seq, more is True, signed, end)


def hub_url(url: str) -> str:
    """A hub URL as people type it, made the one the client uses: spaces and a trailing
    ``/`` or ``/v1`` (the API's prefix, which the client adds itself) dropped. A URL without
    ``http://`` or ``https://`` is refused with the URL to try (``invalid_request``, reason
    ``bad_url``): guessing the scheme could send a credential in the clear."""
    u = url.strip().rstrip("/")
    if u.lower().endswith("/v1"):
        u = u[:-3].rstrip("/")
    scheme, sep, rest = u.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest:
        raise InvalidRequest(f"{url!r} is not a hub URL: give its scheme and address, e.g. "
                             f"https://{rest or u} (or http://{rest or u} on this machine or "
                             "a trusted network)", {"reason": "bad_url", "url": url})
    return f"{scheme.lower()}://{rest}"


@functools.cache
def _verified_tls() -> ssl.SSLContext:
    return httpx2.create_ssl_context()  # the system's CAs (SSL_CERT_FILE, ... honoured)


def tls_context(base_url: str) -> ssl.SSLContext:
    """The TLS context of a client of ``base_url``. Loading the CA bundle costs about 50 ms
    of CPU, which every client paid (a join made four): an ``https`` hub's clients share one
    context per process; an ``http`` hub's get one with no CA loaded, which verifies nothing
    and so refuses any TLS connection (fails closed; redirects are never followed)."""
    if base_url.lower().startswith("https:"):
        return _verified_tls()
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, check_hostname, no CAs


class HubClient:
    def __init__(self, base_url: str, *, auth: httpx2.Auth | None = None,
                 transport: httpx2.BaseTransport | None = None,
                 hub_key: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 pin: KeyPin | None = None):
        self.base_url = base_url.rstrip("/")
        # the pinned hub key, which follows the hub's key rotations (replica/trust/keypin.py)
        self.pin = pin or (KeyPin(hub_key) if hub_key else None)
        # set by the sync engine: this replica names itself on its pulls (REPLICA_HEADER),
        # so the hub refuses them once the replica is revoked
        self.replica_id: str | None = None
        self._http = httpx2.Client(base_url=self.base_url, auth=auth, transport=transport,
                                   timeout=timeout, follow_redirects=False,
                                   verify=tls_context(self.base_url),
                                   # the wire version it speaks (hub/protocol.py)
                                   headers={PROTOCOL_HEADER: str(PROTOCOL_VERSION)})

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> HubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ plumbing

    def _request(self, method: str, path: str, body: Any = None,
                 params: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> Any:
        try:
            resp = self._http.request(method, path, json=body, params=params, headers=headers)
        except (httpx2.TransportError, httpx2.StreamError) as e:
            raise self.unreachable(method, path, e) from e
        return self._decode(resp, method, path)

    def unreachable(self, method: str, path: str, e: Exception) -> TransferFailed:
        """The hub could not be reached: the message names its URL (exit 4, and the CLI
        adds that nothing local is lost: docs/cli.md, "Exit codes")."""
        return TransferFailed(f"could not reach the hub at {self.base_url} ({method} {path}: "
                              f"{type(e).__name__}: {e})", {"url": self.base_url})

    @staticmethod
    def _decode(resp: httpx2.Response, method: str, path: str) -> Any:
        try:
            data = parse_answer(resp.content, f"{method} {path}") if resp.content else None
        except ValueError:
            data = None
            if resp.status_code < 400:
                raise TransferFailed(f"{method} {path}: response is not JSON") from None
        if resp.status_code >= 400:
            raise from_wire(resp.status_code, data)
        return data

    def _pull_headers(self) -> dict[str, str]:
        return {REPLICA_HEADER: self.replica_id} if self.replica_id else {}

    def _stream(self, path: str, params: dict[str, Any] | None = None, raw: bool = False
                ) -> Iterator[Any]:
        """Yield NDJSON lines; raise TransferFailed if the stream ends without ``end``.
        ``raw``: lines after the first as bytes, unparsed, except an end line (a dict)."""
        # the auth flow wants response bodies (to see a refused token): wrapped so it never
        # reads this one, which would hold a whole snapshot in memory before the first line
        auth = self._http.auth
        try:
            with self._http.stream("GET", path, params=params, headers=self._pull_headers(),
                                   auth=_StreamAuth(auth) if auth is not None else None
                                   ) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    self._decode(resp, "GET", path)
                saw_end, first = False, True
                for line in ndjson_lines(resp.iter_bytes()):
                    if not line.strip():
                        continue
                    if saw_end:
                        raise TransferFailed(f"GET {path}: data after the end line")
                    if raw and not first and not line.startswith(END_PREFIX):
                        yield line
                        continue
                    first = False
                    obj = parse_line(line, f"GET {path}")
                    if "end" in obj:
                        saw_end = True
                    yield obj
                if not saw_end:
                    raise TransferFailed(f"GET {path}: stream cut before its end line")
        except (httpx2.TransportError, httpx2.StreamError) as e:
            raise self.unreachable("GET", path, e) from e

    # ------------------------------------------------------------ hub and identity

    def health(self) -> dict[str, Any]:
        """``GET /healthz``: is the hub up (raises ``QuireError`` while it is not)."""
        return self._request("GET", "/healthz")

    def hub_info(self) -> dict[str, Any]:
        return self._request("GET", "/v1/hub")

    def hub_info_and_clock(self) -> tuple[dict[str, Any], int | None]:
        """``GET /v1/hub`` and the hub's clock from its ``Date`` header (Unix ms, to the
        second; None without one): what ``quire doctor`` compares this machine's clock with."""
        from email.utils import parsedate_to_datetime

        try:
            resp = self._http.request("GET", "/v1/hub")
        except (httpx2.TransportError, httpx2.StreamError) as e:
            raise TransferFailed(f"GET /v1/hub: {type(e).__name__}: {e}") from e
        info = self._decode(resp, "GET", "/v1/hub")
        try:
            clock = int(parsedate_to_datetime(resp.headers["date"]).timestamp() * 1000)
        except (KeyError, TypeError, ValueError):
            clock = None
        return info, clock

    def redeem(self, code: str, device_name: str, device_key: str,
               user_name: str | None = None, held_elsewhere: list[str] | None = None,
               default_name: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"code": code, "device_name": device_name,
                                "device_key": device_key}
        if held_elsewhere:  # an invite for one of these is refused, unused (already_joined)
            body["held_elsewhere"] = held_elsewhere
        if user_name:
            body["user_name"] = user_name  # the member's display name (a new member only)
        if default_name:
            body["default_name"] = default_name  # this machine's guess, after the invite's
        return self._request("POST", "/v1/invites/redeem", body)

    def spaces(self) -> list[dict[str, Any]]:
        return self._request("GET", "/v1/spaces")["spaces"]

    def create_space(self, name: str) -> dict[str, Any]:
        return self._request("POST", "/v1/spaces", {"name": name})

    def usage(self, space: str) -> dict[str, Any]:
        return self._request("GET", f"/v1/spaces/{space}/usage")

    def set_quota(self, space: str, limits: dict[str, int | None]) -> dict[str, Any]:
        return self._request("POST", f"/v1/spaces/{space}/quota", limits)

    def screening_allow(self, space: str, entry: str, version: str, rule: str = "*"
                        ) -> dict[str, Any]:
        return self._request("POST", f"/v1/spaces/{_q(space)}/screening/allows",
                             {"entry": entry, "version": version, "rule": rule})

    def screening_allows(self, space: str, entry: str | None = None) -> list[dict[str, Any]]:
        params = {"entry": entry} if entry else None
        return self._request("GET", f"/v1/spaces/{_q(space)}/screening/allows",
                             params=params)["allows"]

    def create_invite(self, space: str, role: str, ttl: int | None = None,
                      name: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"role": role}
        if ttl is not None:
            body["ttl_seconds"] = ttl
        if name is not None:
            body["name"] = name  # the new member's display name, offered at join
        return self._request("POST", f"/v1/spaces/{_q(space)}/invites", body)

    def create_owner_invite(self, ttl: int | None = None, name: str | None = None
                            ) -> dict[str, Any]:
        body: dict[str, Any] = {"role": "owner"}
        if ttl is not None:
            body["ttl_seconds"] = ttl
        if name is not None:
            body["name"] = name
        return self._request("POST", "/v1/invites", body)

    def register_replica(self, space: str, name: str) -> str:
        return self._request("POST", f"/v1/spaces/{_q(space)}/replicas",
                             {"name": name})["replica_id"]

    def report_conflicts(self, space: str, replica_id: str, items: list[dict[str, Any]]
                         ) -> dict[str, Any]:
        """Replace this replica's open-conflicts report (replica/conflicts/report.py)."""
        return self._request("PUT", f"/v1/spaces/{_q(space)}/replicas/{_q(replica_id)}"
                             "/conflicts", {"conflicts": items})

    def bump_epoch(self, space: str, reason: str, dry_run: bool = False,
                   fork: list[Any] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"reason": reason}
        if dry_run:
            body["dry_run"] = True
        if fork is not None:  # a fork recovery: the evidence (replica/app/fork_recovery.py)
            body["fork"] = {"checkpoints": fork[:2]}
            if len(fork) > 2:  # of different sizes: the consistency proof
                body["fork"]["consistency"] = fork[2]
        return self._request("POST", f"/v1/spaces/{_q(space)}/epoch", body)

    def purge(self, space: str, entries: list[str], reason: str, dry_run: bool = False
              ) -> dict[str, Any]:
        body: dict[str, Any] = {"entries": entries, "reason": reason}
        if dry_run:
            body["dry_run"] = True
        return self._request("POST", f"/v1/spaces/{_q(space)}/purge", body)

    # ------------------------------------------------------------ identity and administration
    # (docs/protocol.md; destructive verbs take dry_run)

    def admin_get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """GET an administrative resource (``path`` built with ``q()`` by the caller)."""
        return self._request("GET", path, params=params)

    def admin_post(self, path: str, body: dict[str, Any]) -> Any:
        return self._request("POST", path, body)

    def audit(self, space: str | None, since: int = 0,
              names: dict[str, str] | None = None) -> Iterator[dict[str, Any]]:
        """Audit events as exported (NDJSON), without the end line; ``names`` is filled
        with the display names the end line carries (id -> name)."""
        params: dict[str, Any] = {"since": since}
        if space:
            params["space"] = space
        for line in self._stream("/v1/audit", params):
            if "end" not in line:
                yield line
            elif names is not None and isinstance(line["end"], dict) and isinstance(
                    line["end"].get("names"), dict):
                names.update({str(k): str(v) for k, v in line["end"]["names"].items()})

    def grant(self, body: dict[str, Any], path: str, proof: str) -> tuple[int, Any]:
        """An unauthenticated call carrying only a DPoP proof (token endpoint, device login).
        Returns ``(status, body)`` undecoded: RFC 8628 polling reads codes such as
        ``authorization_pending`` that are not errors of ours."""
        try:
            resp = self._http.request("POST", path, json=body, headers={"DPoP": proof})
            return resp.status_code, (parse_answer(resp.content, f"POST {path}")
                                      if resp.content else None)
        except (httpx2.TransportError, httpx2.StreamError) as e:
            raise self.unreachable("POST", path, e) from e
        except ValueError as e:
            raise TransferFailed(f"POST {path}: response is not JSON") from e

    # ------------------------------------------------------------ sync

    @property
    def hub_key(self) -> str | None:
        """The newest pinned hub key: what the hub signs now must verify with it."""
        return self.pin.current if self.pin else None

    @property
    def hub_keys(self) -> tuple[str, ...]:
        """Every key of the pinned chain, newest first: for what the hub signed earlier."""
        if self.pin is None:
            raise LocalError("no pinned hub key: join the hub first")
        return self.pin.keys

    def _need_key(self) -> str:
        if not self.hub_key:
            raise LocalError("no pinned hub key: join the hub first")
        return self.hub_key

    def follow_key_chain(self) -> bool:
        """Fetch the hub's key rotation chain and follow it from the pinned key (True: a
        newer key is pinned now). Raises ``HubKeyUnchained`` when the hub's key does not
        chain to the pinned one."""
        self._need_key()
        assert self.pin is not None
        return self.pin.follow(self._request("GET", "/v1/hub/keys"))

    def _after_rotation(self, e: HubUnverified) -> bool:
        """A signature the pinned key did not make: was the key rotated (then it is
        followed: True)? A hub without the chain endpoint, or an answer that is not one,
        leaves the first error standing (False)."""
        if (e.details or {}).get("reason") != "bad_signature" or self.pin is None:
            return False
        try:
            return self.follow_key_chain()
        except (HubUnverified, TransferFailed):
            raise
        except QuireError:
            return False

    def verified_head(self, obj: Any, space: str, nonce: str | None = None) -> SignedHead:
        """A head the hub key signed now: the pinned key, or the newest key the hub's
        rotation chain leads to from it (followed and pinned, then checked again)."""
        try:
            return parse_head(self._need_key(), obj, space=space, nonce=nonce)
        except HubUnverified as e:
            if not self._after_rotation(e):
                raise
        return parse_head(self._need_key(), obj, space=space, nonce=nonce)

    def head(self, space: str, nonce: str | None = None) -> dict[str, Any]:
        """The signed head (``signed``: its parsed form); raises HubUnverified when the
        signature does not verify, StaleHead when it is not over our ``nonce``."""
        h = self._request("GET", f"/v1/spaces/{_q(space)}/head",
                          params={"nonce": nonce} if nonce else None,
                          headers=self._pull_headers())
        if not isinstance(h, dict):
            raise HubUnverified("head is not an object")
        signed = self.verified_head(h, h.get("space") or "")
        if nonce is not None and signed.nonce != nonce:
            raise StaleHead("the hub's head is not signed over our nonce: it may be a replay "
                            "of an old head", {"reason": "nonce", "seq": signed.seq})
        if space not in (signed.space, h.get("name")):
            raise HubUnverified("head is for another space")
        return dict(h, signed=signed)

    def folder_proof(self, space: str, scope: list[str], nonce: str
                     ) -> tuple[SignedHead, Any]:
        """The completeness proof for folder globs ``scope`` and the head it ends at,
        signed over ``nonce`` (docs/protocol.md, "Folder proofs"); the proof itself is
        checked by replica/trust/completeness.py against what the store holds."""
        doc = self._request("GET", f"/v1/spaces/{_q(space)}/proof",
                            params={"scope": scope, "nonce": nonce},
                            headers=self._pull_headers())
        if not isinstance(doc, dict) or set(doc) != {"head", "proof"}:
            raise HubUnverified("the folder proof answer is not {head, proof}",
                                {"reason": "bad_proof"})
        signed = self.verified_head(doc["head"], space, nonce)
        return signed, doc["proof"]

    def devices(self, space: str) -> list[Any]:
        """Hub-signed device attestations (verified by replica/trust/verify.py)."""
        res = self._request("GET", f"/v1/spaces/{_q(space)}/devices",
                            headers=self._pull_headers())
        return res.get("devices") if isinstance(res, dict) else None  # type: ignore[return-value]

    def changes(self, space_id: str, *, epoch: str, after: int, after_digest: str,
                limit: int | None = None, scope: str | None = None,
                only: tuple[str, ...] = ()) -> ChangesPage:
        """Batches after ``after``, each parsed and chained onto ``(after, after_digest)``.
        ``scope``: the fingerprint of the scope the caller's copy holds; ``only``: a
        partial replica's globs (replica/trust/scoped.py).

        A cut stream keeps nothing (the caller retries from its head: nothing was applied).
        """
        params: dict[str, Any] = {"epoch": epoch, "after": after}
        if limit is not None:
            params["limit"] = limit
        if scope is not None:
            params["scope"] = scope
        if only:
            params["only"] = list(only)
        return parse_changes(self._stream(f"/v1/spaces/{_q(space_id)}/changes", params),
                             verify_head=self.verified_head, space_id=space_id, epoch=epoch,
                             after=after, after_digest=after_digest)

    def snapshot(self, space: str) -> Iterator[dict[str, Any] | tuple[Entry, int]]:
        """First the head dict, then ``(entry, seq)`` per live entry (versions checked)."""
        lines = self.snapshot_lines(space)
        yield next(lines)  # {"head": signed head, "epochs": [...]}: replica/engine/clone.py checks
        for line in lines:
            if isinstance(line, dict):
                return  # the end line
            entry, _text, seq = check_entry_line(line)
            yield entry, seq

    def snapshot_lines(self, space: str, only: tuple[str, ...] = ()) -> Iterator[Any]:
        """The snapshot's head dict, then each entry line as bytes, not yet checked (that is
        ``ndjson.check_entry_line``, which the vault writers run), then the end dict.
        ``only``: a partial replica's globs."""
        path = f"/v1/spaces/{_q(space)}/snapshot"
        lines = self._stream(path, {"only": list(only)} if only else None, raw=True)
        first = next(lines, None)
        if not isinstance(first, dict) or "head" not in first:
            raise HubUnverified("snapshot does not start with its head")
        yield first
        yield from lines

    def put_blob(self, space: str, sha256: str, data: bytes) -> dict[str, Any]:
        """Upload an attachment's bytes (idempotent: a blob the space holds is not sent
        twice by the hub's store, and answers 200)."""
        path = f"/v1/spaces/{_q(space)}/blobs/{_q(sha256)}"
        try:
            resp = self._http.request("PUT", path, content=data,
                                      headers={"Content-Type": "application/octet-stream"})
        except (httpx2.TransportError, httpx2.StreamError) as e:
            raise self.unreachable("PUT", path, e) from e
        return self._decode(resp, "PUT", path)

    def upload_status(self, space: str, sha256: str) -> dict[str, Any]:
        """How much of a resumable upload the hub holds: ``{"received", "stored"}``."""
        return self._request(
            "GET", f"/v1/spaces/{_q(space)}/blobs/{_q(sha256)}/upload")

    def put_blob_range(self, space: str, sha256: str, chunk: bytes, start: int,
                       total: int) -> dict[str, Any]:
        """One range of a resumable upload (``Content-Range``)."""
        path = f"/v1/spaces/{_q(space)}/blobs/{_q(sha256)}"
        headers = {"Content-Type": "application/octet-stream",
                   "Content-Range": f"bytes {start}-{start + len(chunk) - 1}/{total}"}
        try:
            resp = self._http.request("PUT", path, content=chunk, headers=headers)
        except (httpx2.TransportError, httpx2.StreamError) as e:
            raise self.unreachable("PUT", path, e) from e
        return self._decode(resp, "PUT", path)

    def get_blob(self, space: str, sha256: str, size: int) -> bytes:
        """An attachment's bytes, checked: exactly ``size`` bytes hashing to ``sha256``
        (the entry's word, signed into the state root), else ``HubUnverified`` and nothing
        kept. A longer answer is cut off at ``size`` + 1 byte, never held whole."""
        path = f"/v1/spaces/{_q(space)}/blobs/{_q(sha256)}"
        auth = self._http.auth
        try:
            with self._http.stream("GET", path, headers=self._pull_headers(),
                                   auth=_StreamAuth(auth) if auth is not None else None
                                   ) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    self._decode(resp, "GET", path)
                chunks, got = [], 0
                for chunk in resp.iter_bytes():
                    got += len(chunk)
                    chunks.append(chunk)
                    if got > size:
                        break
        except (httpx2.TransportError, httpx2.StreamError) as e:
            raise self.unreachable("GET", path, e) from e
        data = b"".join(chunks)
        if len(data) != size or blob_hash(data) != sha256:
            raise HubUnverified("the hub served an attachment whose bytes are not the ones "
                                "its signed entry names; nothing was written",
                                {"sha256": sha256, "size": size, "got": len(data)})
        return data

    def push(self, space: str, batch: Batch) -> dict[str, Any]:
        """Publish; returns the verified receipt (the same one when the batch is replayed).

        Sent with ``rebase=1``: when the head moved since ``batch.parent`` but none of the
        batch's entries changed, the hub chains it on its current head (receipt seq beyond
        parent seq + 1); the caller must then pull the gap (docs/protocol.md)."""
        res = self._request("POST", f"/v1/spaces/{_q(space)}/batches", batch.to_wire(),
                            params={"rebase": "1"})
        return self._check_receipt(res, batch)

    def receipt(self, space: str, replica_id: str, batch: Batch) -> dict[str, Any]:
        res = self._request("GET", f"/v1/spaces/{_q(space)}/receipts/{_q(replica_id)}/"
                                   f"{_q(batch.batch_id)}")
        return self._check_receipt(res, batch)

    def _check_receipt(self, res: Any, batch: Batch) -> dict[str, Any]:
        receipt = res.get("receipt") if isinstance(res, dict) else None
        if not isinstance(receipt, dict):
            raise HubUnverified("response carries no receipt")
        if not verify_receipt(self._need_key(), receipt) and not (
                self._after_rotation(HubUnverified("", {"reason": "bad_signature"}))
                and verify_receipt(self._need_key(), receipt)):
            raise HubUnverified("receipt signature does not verify with the pinned hub key")
        if (receipt.get("batch_id") != batch.batch_id
                or receipt.get("batch_digest") != batch.digest
                or receipt.get("replica_id") != batch.replica_id
                or receipt.get("epoch") != batch.epoch):
            raise HubUnverified("receipt is for another batch")
        seq = receipt.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq <= batch.parent_seq:
            raise HubUnverified("receipt seq does not come after the batch's parent")
        if seq > batch.parent_seq + 1:
            # rebased on a later head: the link to the head before it is not known here;
            # the pull that must follow verifies the chain through the gap, and that the
            # change at this seq is this batch with this head (Replica.push)
            if not isinstance(receipt.get("head"), str):
                raise HubUnverified("receipt carries no head")
            return receipt
        try:
            verify_chain(batch.space, batch.epoch, [(seq, batch.digest, receipt["head"])],
                         start=(batch.parent_seq, batch.parent_digest))
        except (KeyError, ValueError) as e:
            raise HubUnverified(f"receipt does not extend the parent head: {e}") from e
        return receipt

    # ------------------------------------------------------------ live

    def events(self, space: str, *, last_event_id: str | None = None,
               read_timeout: float = 60.0, only: tuple[str, ...] = ()
               ) -> Iterator[dict[str, Any]]:
        """The space's server-sent events, each ``{"event", "id"?, "data"}``, until the
        stream drops (``TransferFailed``) or the hub refuses (its error). The hub sends a
        keep-alive comment every 20 s by default: ``read_timeout`` must exceed that."""
        path = f"/v1/spaces/{_q(space)}/events"
        headers = {"Accept": "text/event-stream", **self._pull_headers()}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        auth = self._http.auth
        try:
            with self._http.stream("GET", path, headers=headers,
                                   params={"only": list(only)} if only else None,
                                   auth=_StreamAuth(auth) if auth is not None else None,
                                   timeout=httpx2.Timeout(self._http.timeout.connect or 30,
                                                          read=read_timeout)) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    self._decode(resp, "GET", path)
                ev: dict[str, Any] = {}
                for line in resp.iter_lines():
                    if line == "":
                        if "data" in ev:
                            yield ev
                        ev = {}
                    elif not line.startswith(":"):
                        k, _, v = line.partition(":")
                        v = v[1:] if v.startswith(" ") else v
                        if k == "data":
                            if len(v) > MAX_LINE:
                                raise HubUnverified("an event is longer than the line limit",
                                                    {"reason": "line_too_long"})
                            try:
                                ev["data"] = bounded_loads(v, LINE_LIMITS)
                            except JsonLimitError as e:
                                raise HubUnverified(f"GET {path}: event data crosses a parse "
                                                    f"limit: {e}", {"reason": "parse_limit"}
                                                    ) from None
                            except ValueError:
                                raise TransferFailed(f"GET {path}: event data is not JSON"
                                                     ) from None
                        elif k in ("event", "id"):
                            ev[k] = v
        except (httpx2.TransportError, httpx2.StreamError) as e:
            raise self.unreachable("GET", path, e) from e
        raise TransferFailed(f"GET {path}: the event stream ended")


class _StreamAuth(httpx2.Auth):
    """Runs another auth flow (DPoP proofs, token refresh) on a request whose response is a
    never-ending stream: bodies are read only for the flow's own requests (refresh) and for
    errors, never for the stream itself (httpx would otherwise read it to the end)."""

    requires_response_body = False

    def __init__(self, inner: httpx2.Auth):
        self.inner = inner

    def auth_flow(self, request: httpx2.Request
                  ) -> Generator[httpx2.Request, httpx2.Response, None]:
        flow = self.inner.auth_flow(request)
        req = next(flow)
        while True:
            response = yield req
            if req is not request or response.status_code >= 400:
                response.read()
            try:
                req = flow.send(response)
            except StopIteration:
                return


def is_retryable(e: BaseException) -> bool:
    return isinstance(e, QuireError) and e.retryable
