"""The hub's side of verified replication (docs/architecture.md, "Trust"; shared/state.py,
shared/signed.py).

    guard.commit_txn ──advance_txn──▶ touched bucket lattices, bucket digests, root
                                      (same transaction as the head; root kept per batch)
    head / changes / snapshot / events ──signed_head──▶ {space, epoch, seq, digest,
                                                        state, at[, nonce]} + signature
        (head, changes, snapshot: + the audit tips and the log's checkpoint at that head
         as a signed note, audit_tips_txn, read with the head; hub/spacelog.py)
    epoch bump ──epoch_statement_txn──▶ signed {epoch, previous, reason, …}, kept, and
                                         its leaf in the space log
    GET …/devices ──attestations_txn──▶ signed device records (key, valid_from, revoked_at)

The folder tree (shared/foldertree.py) moves in the same transactions: ``advance_txn``
rehashes the touched folders and their ancestors (O(depth) per op) and the head signs its
root as ``tree`` where it is the space's current head (a page ending earlier carries none);
``folder_proof_txn`` serves a scope's completeness proof (shared/folderproof.py).

A space without a state row (created before migration 0003) gets one computed from its
entries on first use; without folder rows (before migration 0030), the hub builds them at
start (``build_missing_trees``) or the next publication does, and a head computes its
``tree`` from the entries until then. ``enabled=False`` (setting ``state_root``) skips the bookkeeping for
benchmarks: heads then carry the all-zero state, which no replica accepts.
"""

from __future__ import annotations

import json
import threading
from typing import Any, NamedTuple

from hub import spacelog
from hub.keys import HubKey
from hub.store import folders_sql as fs
from hub.store import state_sql as ss
from hub.store.batches import iter_changes_txn
from hub.store.hub_state import hub_state_txn
from hub.store.spaces_sql import SpaceRow, get_space_txn
from shared import foldertree, state, tlog
from shared.canonical import canonical_str
from shared.signed import (
    DEVICE_DOMAIN,
    EPOCH_DOMAIN,
    device_body,
    epoch_body,
    head_body,
    sign_head,
    sign_statement,
)

DISABLED_ROOT = "0" * 64  # served when the setting is off: never a real root
# The folder tree is kept with the state root; benchmarks turn it off alone to measure what
# it costs a publication (bench/folder_proof.py). A hub never does: its heads then carry no
# ``tree``, and no partial replica can prove its scope complete.
FOLDER_TREE = True


def _rebuild_tree_txn(conn: Any, space_id: str, live: list[tuple[str, str]]
                      ) -> dict[str, foldertree.Node]:
    nodes = foldertree.tree_of(live)
    fs.clear_txn(conn, space_id)
    fs.write_txn(conn, space_id, nodes, ())
    return nodes


def _advance_tree_txn(conn: Any, space_id: str, changes: list[state.Change],
                      nodes: dict[str, foldertree.Node] | None) -> None:
    """The folder tree after ``changes``. ``nodes``: the kept nodes ``foldertree.needed``
    names (and their children), as this transaction read them; no top row means the tree
    was never built: rebuilt from the entries as they are before the batch."""
    moved = [c for c in changes if c[1] != c[2]]
    if not moved:
        return
    if nodes is None:
        nodes = fs.nodes_txn(conn, space_id, foldertree.needed(c[0] for c in moved))
    if foldertree.TOP not in nodes:
        nodes = _rebuild_tree_txn(conn, space_id, list(ss.iter_live_versions_txn(conn, space_id)))
    write, gone, _ = foldertree.advance(nodes, moved)
    fs.write_txn(conn, space_id, write, gone)


def build_missing_trees(store: Any, stop: threading.Event | None = None) -> int:
    """Build the folder tree of every space that has none (spaces from before migration
    0030), each in a write transaction of its own under the space's lock (a publication in
    between finds it built, or builds it itself); how many were built. The hub runs it once
    at start, off the event loop: until a space's tree is built, its heads compute ``tree``
    from every entry. ``stop``: set at shutdown, ends it between spaces."""
    with store.read() as conn:
        todo = fs.unbuilt_txn(conn)
    built = 0
    for space_id in todo:
        if stop is not None and stop.is_set():
            break

        def txn(conn: Any, space_id: str = space_id) -> bool:
            if get_space_txn(conn, space_id, lock=True) is None \
                    or fs.top_txn(conn, space_id) is not None:
                return False
            _rebuild_tree_txn(conn, space_id, list(ss.iter_live_versions_txn(conn, space_id)))
            return True

        built += bool(store.run_write(txn))
    return built


def folder_read(space_id: str, ops: Any) -> Any:
    """The read of the kept folder nodes ``advance_txn`` needs for ``ops`` (``read_together``;
    its rows go to ``folder_nodes_of``)."""
    return fs.nodes_read(space_id, foldertree.needed(op.entry_id for op in ops))


folder_nodes_of = fs.nodes_of


def tree_root_txn(conn: Any, space_id: str) -> str:
    """The tree root at the space's current head (read transaction: nothing written)."""
    kept = fs.top_txn(conn, space_id) if FOLDER_TREE else None
    if kept is not None:
        return kept
    return foldertree.root_of_entries(ss.iter_live_versions_txn(conn, space_id))


def _rebuild_txn(conn: Any, space_id: str) -> tuple[list[bytes], str]:
    live = list(ss.iter_live_versions_txn(conn, space_id))
    if FOLDER_TREE:
        _rebuild_tree_txn(conn, space_id, live)
    lattices = state.lattices_of(live)
    ss.clear_lattices_txn(conn, space_id)
    ss.set_lattices_txn(conn, space_id, lattices)
    digests = state.digests_with(state.EMPTY_DIGESTS, lattices)
    root = state.root_of(digests)
    ss.set_root_txn(conn, space_id, state.pack_digests(digests), root)
    return digests, root


def rebuild_txn(conn: Any, space_id: str) -> str:
    """Recompute the space's state from its entries table (a restore replaced it); the root."""
    return _rebuild_txn(conn, space_id)[1]


_READ = object()


def advance_txn(conn: Any, space_id: str, changes: list[state.Change],
                cur: Any = _READ, lattices: dict[int, bytes] | None = None,
                folders: dict[str, foldertree.Node] | None = None) -> str:
    """Apply a batch's ``(id, old live version, new live version)`` to the space's state and
    return the new root. Runs in the publishing transaction, before the entries are written
    (a missing state is rebuilt from the entries as they were before the batch). ``cur``:
    the kept ``(digests, root)`` (or None) as this transaction already read it;
    ``lattices``: the kept lattices of (at least) every bucket the changes touch, read with
    it (``lattice_read``); ignored when the state had to be rebuilt. ``folders``: the kept
    folder nodes (``folder_read``), likewise."""
    if cur is _READ:
        cur = ss.root_txn(conn, space_id)
    if cur is None:
        digests, lattices, folders = _rebuild_txn(conn, space_id)[0], None, None
    else:
        digests = state.unpack_digests(cur[0])
    if FOLDER_TREE:
        _advance_tree_txn(conn, space_id, changes, folders)
    buckets = sorted({state.bucket_of(c[0]) for c in changes if c[1] != c[2]})
    if not buckets:
        return state.root_of(digests)
    new = state.apply_changes(ss.lattices_txn(conn, space_id, buckets) if lattices is None
                              else lattices, changes)
    ss.set_lattices_txn(conn, space_id, new)
    digests = state.digests_with(digests, new)
    root = state.root_of(digests)
    ss.set_root_txn(conn, space_id, state.pack_digests(digests), root)
    return root


def lattice_read(space_id: str, ops: Any) -> Any:
    """The read of the kept lattices of every bucket ``ops`` touch (``read_together``;
    its rows go to ``lattices_of``): a superset of the buckets ``advance_txn`` changes."""
    return ss.lattices_read(space_id, sorted({state.bucket_of(op.entry_id) for op in ops}))


lattices_of = ss.lattices_of


def batch_changes(ops: Any, current: dict[str, tuple[str, bool]]) -> list[state.Change]:
    """``(id, old, new)`` live versions of a batch's ops against the current versions."""
    out = []
    for op in ops:
        cur = current.get(op.entry_id)
        old = cur[0] if cur is not None and not cur[1] else None
        new = None if op.entry.deleted else op.entry.version
        out.append((op.entry_id, old, new))
    return out


def current_root_txn(conn: Any, space_id: str, enabled: bool = True) -> str:
    """The root at the space's current head (read transaction: nothing written)."""
    if not enabled:
        return DISABLED_ROOT
    cur = ss.root_txn(conn, space_id)
    if cur is not None:
        return cur[1]
    return state.root_of_entries(ss.iter_live_versions_txn(conn, space_id))


def kept_lattices_txn(conn: Any, space_id: str) -> dict[int, bytes] | None:
    """Every bucket's kept lattice at the space's current head (None when the state was
    never kept: a caller then sums the entries itself)."""
    if ss.root_txn(conn, space_id) is None:
        return None
    return ss.lattices_txn(conn, space_id, list(range(state.BUCKETS)))


def root_at_txn(conn: Any, space: SpaceRow, seq: int, enabled: bool = True) -> str | None:
    """The root right after head ``seq`` of the space's current epoch; None when unknown
    (a batch accepted before migration 0003, or the genesis of a past head)."""
    if not enabled:
        return DISABLED_ROOT
    if seq == space.head_seq:
        return current_root_txn(conn, space.id)
    if seq <= 0:
        return None
    return ss.batch_root_txn(conn, space.id, space.epoch, seq)


class Tips(NamedTuple):
    """What a head signs beside its chain and root, read in the head's transaction."""

    space: tuple[int, str]  # the space's audit chain tip
    hub: tuple[int, str]  # the hub chain's tip
    log: spacelog.LogHead | None = None  # the space log at this head (None: before it)
    tree: tuple[int, str] | None = None  # (seq, folder tree root) at the space's head


def audit_tips_txn(conn: Any, space: SpaceRow, seq: int | None = None,
                   enabled: bool = True) -> Tips:
    """The audit tips (space chain, hub chain) as this transaction reads them: signed into
    the head so a replica holds the hub to the audit log it had then (docs/security.md, "The
    audit log"); and the log's checkpoint right after head ``seq`` (default: the space's
    head), so a replica and the witnesses hold the hub to one history (hub/spacelog.py)."""
    hub = hub_state_txn(conn)
    at_head = enabled and FOLDER_TREE and (seq is None or seq == space.head_seq)
    return Tips((int(space.audit_seq), space.audit_digest),
                (int(hub.audit_seq), hub.audit_digest), spacelog.checkpoint_txn(conn, space, seq),
                (space.head_seq, tree_root_txn(conn, space.id)) if at_head else None)


_NOTES: dict[tuple[str, str, int, bytes, str | None], str] = {}
_NOTES_MAX = 4096


def checkpoint_note(key: HubKey, space: str, log: spacelog.LogHead) -> str:
    """The log's checkpoint as a signed note (C2SP), signed by the hub key: once per
    checkpoint in a process (Ed25519 signatures are deterministic, so the note is a
    function of what it says; heads asked again at one size reuse it)."""
    memo = (key.public, space, log.size, log.root, log.policy)
    note = _NOTES.get(memo)
    if note is None:
        if len(_NOTES) >= _NOTES_MAX:
            _NOTES.clear()
        note = _NOTES[memo] = tlog.sign_note(key.private, tlog.Checkpoint(
            tlog.origin_of(key.public, space), log.size, log.root, log.policy).body())
    return note


def signed_head(key: HubKey, *, space: str, epoch: str, seq: int, digest: str, root: str,
                at: int, nonce: str | None = None, tips: Tips | None = None
                ) -> dict[str, Any]:
    audit, hub_audit = (tips[0], tips[1]) if tips is not None else (None, None)
    log = tips.log if isinstance(tips, Tips) else None
    if log is not None and (log.epoch, log.seq) != (epoch, seq):
        log = None  # read for another head (a page's end: pass its seq to audit_tips_txn)
    tree = tips.tree if isinstance(tips, Tips) else None
    return sign_head(key.private, head_body(
        space=space, epoch=epoch, seq=seq, digest=digest, state=root, at=at, nonce=nonce,
        audit=audit, hub_audit=hub_audit,
        checkpoint=None if log is None else checkpoint_note(key, space, log),
        tree=tree[1] if tree is not None and tree[0] == seq else None))


def epoch_statement_txn(conn: Any, key: HubKey, space: SpaceRow, epoch: str, reason: str,
                        at: int, restored_from: dict[str, Any] | None = None,
                        purged: list[str] | None = None, forked: list[str] | None = None
                        ) -> dict[str, Any]:
    """Sign and keep the statement that ``space`` moved from its epoch to ``epoch``
    (``restored_from``: the backup's head of the space, hub/restore.py; ``purged``: the
    entries replicas must drop, hub/purge.py; ``forked``: the evidence of two histories
    this epoch recovers from, hub/spacelog.py ``fork_evidence``)."""
    st = sign_statement(key.private, EPOCH_DOMAIN, epoch_body(
        space=space.id, epoch=epoch, previous=space.epoch, previous_seq=space.head_seq,
        previous_digest=space.head_digest, reason=reason, at=at,
        restored_from=restored_from, purged=purged, forked=forked))
    ss.insert_epoch_txn(conn, space.id, epoch, canonical_str(st), at)
    spacelog.epoch_leaf_txn(conn, space.id, epoch, st)  # the log records the decision
    return st


def epoch_statements_txn(conn: Any, space_id: str) -> list[str]:
    """Every signed epoch statement of the space (canonical JSON text), oldest first."""
    return ss.epoch_statements_txn(conn, space_id)


def attestations_txn(conn: Any, key: HubKey, space_id: str, now: int) -> list[dict[str, Any]]:
    """Signed records of every device whose batches a replica of the space may hold."""
    return [sign_statement(key.private, DEVICE_DOMAIN, device_body(
        device=d, user=u, public_key=pk, valid_from=created, revoked_at=revoked, at=now))
        for d, u, pk, created, revoked in ss.space_devices_txn(conn, space_id)]


def verify_space_txn(conn: Any, space: SpaceRow) -> dict[str, Any]:
    """The hub checks itself: every batch of the current epoch parsed again (digest
    recomputed from the stored body), chained from the epoch's genesis to the head; every
    stored per-batch root present; the state root recomputed from the entries table equal to
    the kept one. ``ok`` only when all hold; the first failure is named."""
    from shared.digest import verify_chain
    from shared.wire import parse_batch

    out: dict[str, Any] = {"epoch": space.epoch, "seq": space.head_seq}
    links = []
    problem = None
    for row in iter_changes_txn(conn, space.id, space.epoch, 0, 2**62):
        try:
            batch = parse_batch(json.loads(row.body))
        except Exception as e:  # noqa: BLE001 - any stored batch that fails is reported
            problem = problem or {"seq": row.seq, "reason": f"batch does not parse: {e}"}
            continue
        links.append((row.seq, batch.digest, row.head_digest))
    try:
        seq, digest = verify_chain(space.id, space.epoch, links)
        if (seq, digest) != (space.head_seq, space.head_digest):
            problem = problem or {"seq": seq, "reason": "the chain does not end at the head"}
    except ValueError as e:
        problem = problem or {"reason": str(e)}
    out["chain"] = {"ok": problem is None, "batches": len(links), "problem": problem}
    kept = ss.root_txn(conn, space.id)
    recomputed = state.root_of_entries(ss.iter_live_versions_txn(conn, space.id))
    out["state"] = {"ok": kept is None or kept[1] == recomputed, "root": recomputed,
                    "kept": kept[1] if kept is not None else None}
    return out
