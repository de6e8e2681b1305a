"""The one error tree of Quire. Wire codes live here; the hub converts ``QuireError`` to
responses in one handler and the replica maps responses back to the same classes.

    QuireError                      code               HTTP  retry
    ├── Internal                    internal           500   yes   a bug; the hub logs it
    ├── Unauthorized                unauthorized       401   no    details.reason says which check
    ├── Forbidden                   forbidden          403   no
    │   └── PolicyDenied            policy_denied      403   no    details.denied lists every op
    ├── NotFound                    not_found          404   no
    ├── HeadChanged                 head_changed       409   yes   pull, merge, push again
    ├── EpochChanged                epoch_changed      409   yes   after a fresh snapshot
    ├── BaseMismatch                base_mismatch      409   yes   after pull and merge
    ├── BatchConflict               batch_conflict     409   no    same id, other content
    ├── BlobMissing                 blob_missing       409   yes   upload details.missing, then again
    ├── VersionBlocked              version_blocked    409   no    details.blocked (id, version)
    ├── PacketStale                 packet_stale       409   no    (replica) re-read the packet
    ├── ClaimHeld                   claim_held         409   no    (replica) another agent's claim
    ├── ProposalClosed              proposal_closed    409   no    details.state: decided already
    ├── ProposalStale               proposal_stale     409   no    its base moved: propose again
    ├── SnapshotRequired            snapshot_required  410   yes   fetch the snapshot
    ├── SpaceDeleted                space_deleted      410   no    details.deleted_at, purge_after
    ├── TooLarge                    too_large          413   no    details names the limit
    ├── UpgradeRequired             upgrade_required   426   no    details: protocol, required
    ├── QuotaExceeded               quota_exceeded     413   no    details: scope, quota, usage
    ├── InvalidRequest              invalid_request    422   no
    │   └── BlobMismatch            blob_mismatch      422   no    the bytes do not hash to the URL
    ├── ContentScreened             content_screened   422   no    details.findings: entry, line
    ├── RateLimited                 rate_limited       429   yes   after details.retry_after
    ├── Unavailable                 unavailable        503   yes
    ├── TransferFailed              transfer_failed    -     yes   (client) network, timeout, cut
    └── LocalError                  local_error        -     no    (client) on this machine
        ├── NotJoined               not_joined         -     no    no such joined space or hub
        │   ├── SpaceNotFound       space_not_found    -     no    no joined space by that name
        │   └── SpaceAmbiguous      space_ambiguous    -     no    several match: name it by id
        ├── LockHeld                lock_held          -     no    another sync or watcher runs
        ├── VaultMissing            vault_missing      -     no    the vault folder is gone
        ├── IgnoreFileInvalid       ignore_file_invalid  -   no    .quireignore cannot be read
        ├── HubUnverified           hub_unverified     -     no    what the hub key did not sign
        │   └── HubKeyUnchained     hub_key_unchained  -     no    a key no rotation chains to
        ├── AuditUnverified         audit_unverified   -     no    the audit export does not link
        │   ├── AuditTruncated      audit_truncated    -     no    it ends before a kept tip
        │   └── AuditRewritten      audit_rewritten    -     no    another digest at a kept tip
        └── StaleHead               stale_head         -     no    no fresh signed head (nonce)

HTTP ``-``: raised on the client side only, never sent by the hub (``status`` 0). ``retry``
is ``retryable``: whether trying again later (after the named action) can succeed; a permanent
refusal must be surfaced to a person or agent, never retried in a loop. The drawing is
compared with the classes below by a test (``test_error_tree.py``): a class is drawn under its
base, with its code, status and retry. Two subclasses live with their one user and are not
wire errors: ``hub.grants.AuthorizationPending`` (the device grant's polling answer, 400) and
``replica.cli.main.UsageError`` (a command line that does not parse, exit 2).
"""

from __future__ import annotations

from typing import Any, ClassVar


class QuireError(Exception):
    code: ClassVar[str] = "internal"
    status: ClassVar[int] = 500
    retryable: ClassVar[bool] = False

    def __init__(self, message: str = "", details: dict[str, Any] | None = None):
        super().__init__(message or self.code)
        self.message = message or self.code
        self.details = details or {}

    def to_wire(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, {self.details!r})"


class Internal(QuireError):
    code = "internal"
    status = 500
    retryable = True


class Unauthorized(QuireError):
    code = "unauthorized"
    status = 401


class Forbidden(QuireError):
    code = "forbidden"
    status = 403


class PolicyDenied(Forbidden):
    code = "policy_denied"


class NotFound(QuireError):
    code = "not_found"
    status = 404


class HeadChanged(QuireError):
    code = "head_changed"
    status = 409
    retryable = True


class EpochChanged(QuireError):
    code = "epoch_changed"
    status = 409
    retryable = True


class BaseMismatch(QuireError):
    code = "base_mismatch"
    status = 409
    retryable = True


class BatchConflict(QuireError):
    code = "batch_conflict"
    status = 409


class BlobMissing(QuireError):
    """A batch names an attachment whose bytes the hub does not hold: upload each blob of
    ``details.missing`` (``PUT /v1/spaces/{space}/blobs/{sha256}``), then publish again."""

    code = "blob_missing"
    status = 409
    retryable = True


class VersionBlocked(QuireError):
    """The batch writes an entry version an admin reverted and blocked (``quire admin
    revert --block``); ``details.blocked``: each op's entry id, version and the reverted
    seq. Permanent for that content: a replica holds the edit as a conflict."""

    code = "version_blocked"
    status = 409


class PacketStale(QuireError):
    code = "packet_stale"
    status = 409


class ClaimHeld(QuireError):
    code = "claim_held"
    status = 409


class ProposalClosed(QuireError):
    """The proposal is no longer open (accepted, rejected, withdrawn or stale):
    ``details.state`` says which."""

    code = "proposal_closed"
    status = 409


class ProposalStale(QuireError):
    """The entry changed since the proposal was written against it: nothing was
    overwritten; the proposal is now ``stale`` (``details.base``, ``details.current``)."""

    code = "proposal_stale"
    status = 409


class SnapshotRequired(QuireError):
    code = "snapshot_required"
    status = 410
    retryable = True


class SpaceDeleted(QuireError):
    """The space was deleted (``quire admin space delete``): publications and pulls are
    refused until an admin restores it; its data is purged after the hub's retention."""

    code = "space_deleted"
    status = 410


class TooLarge(QuireError):
    code = "too_large"
    status = 413


class UpgradeRequired(QuireError):
    """The space holds what this client's protocol version cannot read (entries with
    ``raw``, docs/protocol.md "Protocol versions"): upgrade Quire. ``details``:
    ``protocol`` (the client's), ``required`` (the space's)."""

    code = "upgrade_required"
    status = 426


class QuotaExceeded(QuireError):
    """The space (or the hub) is at a quota this publication would grow past."""

    code = "quota_exceeded"
    status = 413


class InvalidRequest(QuireError):
    code = "invalid_request"
    status = 422


class BlobMismatch(InvalidRequest):
    """Uploaded bytes whose SHA-256 is not the one the URL names (nothing is stored)."""

    code = "blob_mismatch"


class ContentScreened(QuireError):
    """The batch's content holds what looks like a secret, or an instruction-injection
    marker in a guardrail or skill (shared/screening.py). ``details.findings``: every
    finding (entry, version, line, rule, fingerprint; never the matched text). Permanent
    for this content: edit it, or an admin allows that entry version."""

    code = "content_screened"
    status = 422


class RateLimited(QuireError):
    code = "rate_limited"
    status = 429
    retryable = True


class Unavailable(QuireError):
    code = "unavailable"
    status = 503
    retryable = True


class TransferFailed(QuireError):
    """The request may or may not have reached the hub (network error, timeout, cut stream)."""

    code = "transfer_failed"
    status = 0
    retryable = True


class LocalError(QuireError):
    """A problem on this machine (bad vault file, missing configuration, lock held)."""

    code = "local_error"
    status = 0


class NotJoined(LocalError):
    code = "not_joined"


class SpaceNotFound(NotJoined):
    """No joined space matches the name or id given (``details.candidates``: the joined)."""

    code = "space_not_found"


class SpaceAmbiguous(NotJoined):
    """Several joined spaces match (``details.candidates``); name one by id."""

    code = "space_ambiguous"


class LockHeld(LocalError):
    code = "lock_held"


class VaultMissing(LocalError):
    """The vault folder is gone, or holds none of the recorded pages and no presence file
    (moved, not mounted): the sync refuses instead of publishing every page as deleted
    (replica/vault/presence.py). ``details``: vault, recorded, presence_file."""

    code = "vault_missing"


class IgnoreFileInvalid(LocalError):
    """The vault's ``.quireignore`` cannot be read or holds a pattern that is not valid: the
    sync refuses before anything is published (replica/vault/ignore.py). ``details``: file,
    line (or null), reason."""

    code = "ignore_file_invalid"


class HubUnverified(LocalError):
    """The hub (or something between it and us) sent what does not verify against the
    pinned hub key: a signature, a digest, the chain, the state root. Nothing was applied;
    permanent until a person looks (an honest hub never sends it)."""

    code = "hub_unverified"


class HubKeyUnchained(HubUnverified):
    """The hub signs with a key that no chain of rotation statements (each signed by the
    key it replaces) leads to from this machine's pinned key: a replaced or forged hub key,
    or an old key lost (then re-pin by hand: ``quire repin``, docs/operations.md)."""

    code = "hub_key_unchained"


class AuditUnverified(LocalError):
    """``quire admin audit --verify``: the exported audit chain does not link (an event
    edited without rehashing the rest)."""

    code = "audit_unverified"


class AuditTruncated(AuditUnverified):
    """The exported audit chain ends before a tip the hub key signed and this home kept:
    events were deleted from the hub's log."""

    code = "audit_truncated"


class AuditRewritten(AuditUnverified):
    """The exported audit chain holds another digest at a tip the hub key signed and this
    home kept: events were edited and the chain after them rehashed."""

    code = "audit_rewritten"


class StaleHead(LocalError):
    """The newest signed head is older than the freshness bound and no head signed over
    our nonce could be had: "up to date" cannot be claimed (docs/security.md)."""

    code = "stale_head"


ERROR_CLASSES: dict[str, type[QuireError]] = {
    cls.code: cls
    for cls in (
        Internal, Unauthorized, Forbidden, PolicyDenied, NotFound, HeadChanged, EpochChanged,
        BaseMismatch, BatchConflict, BlobMissing, VersionBlocked, SpaceDeleted, PacketStale, ClaimHeld, ProposalClosed,
        ProposalStale, SnapshotRequired, TooLarge, UpgradeRequired,
        QuotaExceeded, InvalidRequest, BlobMismatch, ContentScreened, RateLimited, Unavailable,
        TransferFailed, LocalError, AuditUnverified, AuditTruncated, AuditRewritten,
        NotJoined, SpaceNotFound, SpaceAmbiguous, LockHeld, VaultMissing, IgnoreFileInvalid, HubUnverified,
        HubKeyUnchained,
        StaleHead,
    )
}

WIRE_CODES = (
    "unauthorized", "forbidden", "policy_denied", "not_found", "head_changed",
    "epoch_changed", "base_mismatch", "batch_conflict", "version_blocked", "space_deleted",
    "snapshot_required", "too_large", "upgrade_required", "quota_exceeded", "proposal_closed", "proposal_stale",
    "invalid_request", "content_screened", "blob_missing", "blob_mismatch", "rate_limited", "unavailable", "internal",
)


def from_wire(status: int, body: Any) -> QuireError:
    """Rebuild the exception a hub response describes (unknown codes keep their status)."""
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict) and isinstance(err.get("code"), str):
        cls = ERROR_CLASSES.get(err["code"])
        details = err.get("details") if isinstance(err.get("details"), dict) else {}
        message = str(err.get("message") or err["code"])
        if cls is not None:
            return cls(message, details)
    if status >= 500:
        return Unavailable(f"hub answered HTTP {status}")
    return InvalidRequest(f"hub answered HTTP {status} without an error body")
