"""Folder proofs: the hub's answer to "prove these folders are all I should hold"
(shared/folderproof.py; docs/protocol.md, "Folder proofs"; decisions.md D143).

    GET /v1/spaces/{space}/proof?scope=projects/alpha/*&scope=guardrail/*[&nonce=N]
      └─ one read transaction:
           the caller's read scope ─▶ every live entry in the folders must be readable,
                                      else policy_denied (reason read_scope): a proof is
                                      for a set the caller is served whole
           kept folder nodes of the spine and their children ─▶ folderproof.build
           the signed head (its ``tree`` is the root the proof ends at)
      ─▶ {head, proof}

A partial replica's pull and snapshot carry the same proof in their end line
(``answer_proof_txn``, read in the answer's own transaction) when they end at the current
head.

The proof shows, outside the scope, hashes and counts only (shared/folderproof.py). A
scope that is not folders (a kind, a tag, one entry) is ``invalid_request``
(reason ``unprovable_scope``): it is served by pulls but cannot be proved complete.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hub import scope as scopes
from hub import signed_state
from hub.access import Principal, space_access_txn
from hub.keys import HubKey
from hub.store import folders_sql as fs
from hub.store import state_sql as ss
from hub.store.db import Store
from shared import folderproof, foldertree
from shared.errors import InvalidRequest, PolicyDenied
from shared.readscope import ReadScope


def parse(patterns: list[str]) -> folderproof.Scope:
    scope = folderproof.parse_scope(patterns)
    if scope is None:
        raise InvalidRequest("scope: one to 64 folder patterns (FOLDER/* or FOLDER/**: the "
                             "folder and everything under it); kinds, tags and single "
                             "entries cannot be proved complete",
                             {"reason": "unprovable_scope"})
    return scope


def _nodes_txn(conn: Any, space_id: str, spine: list[str]) -> dict[str, foldertree.Node]:
    """The kept nodes of the spine and their children; computed from the entries when the
    tree was never built (a space untouched since migration 0030)."""
    if fs.top_txn(conn, space_id) is not None and signed_state.FOLDER_TREE:
        return fs.nodes_txn(conn, space_id, spine) if spine else {}
    return foldertree.tree_of(ss.iter_live_versions_txn(conn, space_id))


def readable_whole_txn(conn: Any, space_id: str, reader: ReadScope,
                       scope: folderproof.Scope) -> bool:
    """Do the read rules of ``reader`` let it read every live entry of ``scope``?"""
    rules = ReadScope(reader.rules)  # the rules alone (not a partial replica's globs)
    if rules.unrestricted:
        return True
    ids = [eid for eid, _ in ss.iter_live_versions_txn(conn, space_id) if scope.holds(eid)]
    return len(scopes.visible_txn(conn, space_id, rules, ids)) == len(ids)


def answer_proof_txn(conn: Any, space_id: str, reader: ReadScope, only: Iterable[str],
                     tree: str | None) -> dict[str, Any] | None:
    """The proof a partial replica's pull or snapshot carries in its end line, read in the
    answer's transaction, for the folder globs of ``only`` (the others are not proved):
    None when the answer does not end at the current head (``tree`` None), ``only`` has no
    folder glob, or read rules hide part of its folders."""
    scope = folderproof.provable_part(only)[0] if tree is not None else None
    if scope is None or tree is None or not readable_whole_txn(conn, space_id, reader, scope):
        return None
    return folderproof.build(_nodes_txn(conn, space_id, folderproof.spine_and_children(scope)),
                             scope, tree)


def _check_readable_txn(conn: Any, p: Principal, space: Any, role: str | None,
                        scope: folderproof.Scope) -> None:
    if not readable_whole_txn(conn, space.id, scopes.scope_txn(conn, p, space, role), scope):
        raise PolicyDenied("the space rules keep some entries of these folders from you, so "
                           "no proof of them is served; ask for folders you may read whole",
                           {"reason": "read_scope"})


def proof(store: Store, key: HubKey, p: Principal, space_ref: str, patterns: list[str],
          now: int, nonce: str | None = None, state_root: bool = True) -> dict[str, Any]:
    """The signed head and the proof for ``patterns`` at it, read together."""
    scope = parse(patterns)
    with store.read() as conn:
        space, role = space_access_txn(conn, p, space_ref, "viewer")
        _check_readable_txn(conn, p, space, role, scope)
        nodes = _nodes_txn(conn, space.id, folderproof.spine_and_children(scope))
        root = signed_state.current_root_txn(conn, space.id, state_root)
        tips = signed_state.audit_tips_txn(conn, space, enabled=state_root)
    head = signed_state.signed_head(key, space=space.id, epoch=space.epoch,
                                    seq=space.head_seq, digest=space.head_digest, root=root,
                                    at=now, nonce=nonce, tips=tips)
    tree = head.get("tree")
    if tree is None:
        raise InvalidRequest("this hub keeps no folder tree (setting state_root is off)",
                             {"reason": "unprovable_scope"})
    return {"head": head, "proof": folderproof.build(nodes, scope, tree)}
