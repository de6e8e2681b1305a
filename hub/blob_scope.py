"""Whether a reader may have a blob's bytes: read rules reach an attachment's bytes as they
reach its entry (docs/security.md, "Read rules"; decisions.md D151).

    may_fetch_txn(conn, p, space, role, sha256)
      the reader's scope (hub/scope.py scope_txn, in the answer's own transaction)
      hides nothing?                        ─► yes: every blob the space holds
      else: the entries any stored version of which names sha256 (current rows, batches:
            hub/store/blobs_sql.py namers_txn), judged at this head (visible_txn: a
            deleted one by its last live version)
            one of them readable?           ─► yes, else no

Who asks: hub/blobs.py. ``GET …/blobs/H`` answers a "no" exactly as an absent blob
(``not_found``): a hash names content, and whether the space holds it is itself a fact
about hidden entries. An upload by a caller told "no" is answered as if the space did not
hold the bytes (``stored: true``, the quota checked as for new bytes, nothing written
twice), and its upload status as if nothing were held: the caller learns nothing beyond
the bytes it sent. That upload is recorded as the caller's proof of holding the bytes
(``prove_txn``: a row of ``blob_uploads`` under a key of its own, per member and agent);
the guard (``unproven_txn``) treats bytes hidden from a writer and not proven by it as
missing (``blob_missing``), so naming a hash it does not hold the bytes of neither tells
a writer that the space holds them nor, once its entry names them, serves them to it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hub.scope import actor_of, scope_of_rules, scope_txn, visible_txn
from hub.store.blobs_sql import namers_txn, save_upload_txn, upload_txn
from shared.digest import sha256_hex
from shared.readscope import ReadScope


def may_fetch_txn(conn: Any, p: Any, space: Any, role: str | None, sha256: str) -> bool:
    """May ``p`` (role ``role`` in ``space``) have the bytes of blob ``sha256`` (module
    docstring)? Says nothing of whether the space holds them."""
    return _may_fetch_txn(conn, scope_txn(conn, p, space, role), space.id, sha256)


def _may_fetch_txn(conn: Any, scope: ReadScope, space_id: str, sha256: str) -> bool:
    if scope.unrestricted:
        return True
    names = namers_txn(conn, space_id, sha256)
    return bool(names) and bool(visible_txn(conn, space_id, scope, names))


def _proof_key(p: Any, sha256: str) -> str:
    """Where a caller's proof of holding ``sha256``'s bytes is kept: a ``blob_uploads`` key
    no upload has (a digest of the member, the agent and the hash)."""
    return sha256_hex(f"quire-blob-proof-v1\n{p.user_id}\n{p.agent or ''}\n{sha256}"
                      .encode())


def prove_txn(conn: Any, p: Any, space_id: str, sha256: str, size: int, now: int) -> None:
    """``p`` sent the bytes of blob ``sha256`` (``size`` of them), held but hidden from it."""
    save_upload_txn(conn, space_id, _proof_key(p, sha256), size, b"", now)


def unproven_txn(conn: Any, p: Any, space: Any, role: str | None,
                 rules: list[dict[str, Any]], held: Iterable[tuple[str, int]]) -> set[str]:
    """Of the ``held`` blobs (hash, size) a batch by ``p`` names, those hidden from it
    (no entry it may read under ``rules`` names them) that it never sent itself."""
    scope = scope_of_rules(rules, actor_of(p, role), space.folders)
    if scope.unrestricted:
        return set()
    out = set()
    for sha, size in held:
        if _may_fetch_txn(conn, scope, space.id, sha):
            continue
        proof = upload_txn(conn, space.id, _proof_key(p, sha))
        if proof is None or proof != (size, b""):
            out.add(sha)
    return out
