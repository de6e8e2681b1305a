"""SHA-256 digests and the head hash chain (docs/architecture.md, "Batches, heads,
receipts")."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from shared.canonical import canonical_bytes

HEX64 = frozenset("0123456789abcdef")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_of(value: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of ``value``."""
    return sha256_hex(canonical_bytes(value))


_HEX64_RE = re.compile("[0-9a-f]{64}")


def is_digest(s: object) -> bool:
    """64 lowercase hex digits (one compiled match: a character loop in Python cost a
    watcher ~6 of them per received change)."""
    return isinstance(s, str) and _HEX64_RE.fullmatch(s) is not None


def genesis_digest(space_id: str, epoch: str) -> str:
    """Digest of head seq 0 of an epoch: binds the chain to its space and epoch."""
    return digest_of({"genesis": {"space": space_id, "epoch": epoch}})


def chain_next(prev_digest: str, batch_digest: str) -> str:
    """digest_n = SHA-256(digest_{n-1} || batch_digest_n), over the raw 32-byte values."""
    return sha256_hex(bytes.fromhex(prev_digest) + bytes.fromhex(batch_digest))


def verify_chain(space_id: str, epoch: str, links: Iterable[tuple[int, str, str]],
                 start: tuple[int, str] | None = None) -> tuple[int, str]:
    """Verify ``(seq, batch_digest, head_digest)`` links in order.

    Starts at genesis unless ``start=(seq, digest)`` is given. Returns the last verified
    ``(seq, digest)``; raises ``ValueError`` naming the first link that does not verify.
    """
    seq, digest = start if start is not None else (0, genesis_digest(space_id, epoch))
    for link_seq, batch_digest, head_digest in links:
        if link_seq != seq + 1:
            raise ValueError(f"chain gap: expected seq {seq + 1}, got {link_seq}")
        expected = chain_next(digest, batch_digest)
        if expected != head_digest:
            raise ValueError(f"chain broken at seq {link_seq}")
        seq, digest = link_seq, head_digest
    return seq, digest
