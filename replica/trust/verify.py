"""What a replica checks before anything the hub sent stays in its store (docs/architecture.md,
"Trust").

    pull page / delivered changes            snapshot
      chain from our head (client.changes)     signed head: same epoch and not behind,
      end line: head signed by the pinned key    or a signed epoch statement path to it
                                                 (snapshot_path; the path's purges and
                                                 restores: replica/engine/purge.py, restored.py)
      receipts signed, batch signed by a        every entry's version (client.snapshot)
        device the hub attests, valid then
                 │                                        │
                 └──── applied in ONE store transaction ──┘
                                  │
            state_root_txn: the root of the synced entries, from the store
                      (triggers log every synced change; O(changed)), plus the
                      withheld sums of a scoped or partial replica (scoped.py)
                                  │
            equal to the signed head's ``state``?  no → HubUnverified, rollback:
            nothing applied, no vault write journaled
                                  │ yes
            the head kept (``signed_head``) and its audit tips, when newer
            (``audit_tips``, replica/trust/audit_tips.py)

The state kept here (``state_buckets``, ``state_log`` in replica/store/store.py) is always the
root of what the store's synced columns hold, whatever code path wrote them: verification
never trusts a code path's own account of what it applied.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterable
from typing import Any

from replica.store import store as st
from replica.store.db import Conn
from replica.trust import audit_tips as auditcheck
from replica.trust import logcheck
from shared import state
from shared.errors import HubUnverified
from shared.signed import (
    Attestation,
    EpochStatement,
    Keys,
    SignedHead,
    attested_at,
    epoch_path,
    parse_attestation,
    parse_epoch_statement,
)
from shared.wire import verify_receipt

STATE_READY = st.STATE_READY  # meta: the state tables were built from this store
DEVICES = "devices"  # meta: device attestations as the hub signed them
SIGNED_HEAD = "signed_head"  # meta: the last signed head verified and reached (wire form)


def new_nonce() -> str:
    return secrets.token_urlsafe(24)


# ---------------------------------------------------------------- the state root


def _cursor_rows(conn: Conn, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    cur = conn.connection.cursor()
    try:
        cur.execute(sql, params)
        return cur.fetchall()
    finally:
        cur.close()


def _rebuild_txn(conn: Conn, lattices_of: Callable[[list[tuple[str, str]]], dict[int, bytes]]
                 = state.lattices_of) -> None:
    live = [(i, sv) for i, sv, _lv, _h in st.live_versions_txn(conn) if sv is not None]
    lattices = lattices_of(live)
    _cursor_rows(conn, "DELETE FROM state_buckets")
    _cursor_rows(conn, "DELETE FROM state_log")
    _write_buckets_txn(conn, lattices)
    st.set_meta_txn(conn, STATE_READY, True)


def _write_buckets_txn(conn: Conn, lattices: dict[int, bytes]) -> None:
    cur = conn.connection.cursor()
    try:
        cur.executemany("INSERT OR REPLACE INTO state_buckets (bucket, lattice, digest) "
                        "VALUES (?, ?, ?)",
                        [(b, lat, state.bucket_digest(b, lat)) for b, lat in lattices.items()])
    finally:
        cur.close()


def rebuild_state_txn(conn: Conn, lattices_of: Callable[[list[tuple[str, str]]],
                                                         dict[int, bytes]]) -> None:
    """The state tables built again from every synced row the store holds (after a bulk
    load without triggers, replica/engine/clone.py). ``lattices_of`` is ``state.lattices_of`` or
    one that spreads the same sums over processes (replica/engine/clone_writers.py): it is handed
    what the store holds, never a code path's account of what it wrote."""
    _rebuild_txn(conn, lattices_of)


def state_root_txn(conn: Conn) -> str:
    """The root of the store's synced live entries, folding in every change logged since
    the last call (O(changed)); built from the whole store the first time."""
    if not st.get_meta_txn(conn, STATE_READY, False):
        _rebuild_txn(conn)
    rows = _cursor_rows(
        conn, "SELECT l.id, l.old, CASE WHEN e.synced_deleted THEN NULL "
              "ELSE e.synced_version END FROM state_log l LEFT JOIN entries e ON e.id = l.id")
    if rows:
        touched = sorted({state.bucket_of(r[0]) for r in rows if r[1] != r[2]})
        current: dict[int, bytes] = {}
        if touched:
            marks = ", ".join("?" * len(touched))
            current = {b: bytes(lat) for b, lat in _cursor_rows(
                conn, f"SELECT bucket, lattice FROM state_buckets WHERE bucket IN ({marks})",
                tuple(touched))}
        _write_buckets_txn(conn, state.apply_changes(current, [tuple(r) for r in rows]))
        _cursor_rows(conn, "DELETE FROM state_log")
    digests = list(state.EMPTY_DIGESTS)
    for b, d in _cursor_rows(conn, "SELECT bucket, digest FROM state_buckets"):
        digests[b] = bytes(d)
    # a scoped or partial replica: plus what the hub's answers left out (replica/trust/
    # scoped.py); nothing for a replica that holds the whole space
    return state.root_of(st.fold_withheld_txn(conn, digests))


def check_root_txn(conn: Conn, signed: SignedHead, what: str) -> None:
    """The store, as this transaction leaves it, must hold exactly the signed state."""
    root = state_root_txn(conn)
    if root != signed.state:
        raise HubUnverified(f"{what}: the entries do not add up to the state the hub signed "
                            f"at seq {signed.seq}; nothing was applied",
                            {"reason": "state_mismatch", "seq": signed.seq,
                             "signed": signed.state, "computed": root})
    st.set_meta_txn(conn, SIGNED_HEAD, signed.wire)
    tips = auditcheck.keep(st.get_meta_txn(conn, auditcheck.AUDIT_TIPS, None), signed)
    if tips is not None:
        st.set_meta_txn(conn, auditcheck.AUDIT_TIPS, tips)


# ---------------------------------------------------------------- authors


class Authors:
    """Device attestations, cached in the store, refreshed from the hub once per run when a
    batch names a device the cache does not know."""

    def __init__(self, hub_keys: Callable[[], Keys], fetch: Callable[[], list[Any]],
                 cached: list[Any] | None):
        # the pinned chain's keys (cached attestations may be signed by a retired one), read
        # at each use: a rotation followed during the run adds the new key
        self.hub_keys = hub_keys
        self.fetch = fetch
        self.wire: list[Any] = list(cached or [])
        self.by_id = self._parse(self.wire)
        self.refreshed = False

    def _parse(self, wire: list[Any]) -> dict[str, Attestation]:
        out = {}
        keys = self.hub_keys()
        for obj in wire:
            a = _attestation(keys, obj)
            out[a.device] = a
        return out

    def get(self, device: str) -> Attestation | None:
        a = self.by_id.get(device)
        if (a is None or a.revoked_at is not None) and not self.refreshed:
            # unknown here, or revoked: the hub's current record decides (a revocation's
            # time never moves earlier, and a batch accepted before it stays valid)
            self.refreshed = True
            wire = self.fetch()
            if not isinstance(wire, list):
                raise HubUnverified("device attestations are not a list")
            self.by_id = self._parse(wire)
            self.wire = wire
            a = self.by_id.get(device)
        return a


# (pinned keys, the attestation's JSON text) -> what parse_attestation made of it. A watcher
# builds Authors for every publication it applies, from the same cached attestations: one
# signature check per attestation each time, 20 devices ~2.8 ms of CPU per publication
# (bench/profiles.md, "Save to every vault"). The same bytes under the same keys verify
# the same way, so each is checked once per process; a changed or new one is checked anew.
_VERIFIED: dict[tuple[tuple[str, ...], str], Attestation] = {}
_VERIFIED_MAX = 4096


def _attestation(keys: Keys, obj: Any) -> Attestation:
    """``parse_attestation``, remembered for exactly this object under exactly these keys
    (only successes: a failure raises every time)."""
    if not (isinstance(obj, dict) and all(isinstance(k, str) for k in obj)):
        return parse_attestation(keys, obj)  # (json.dumps would write 1 and "1" alike)
    try:  # the exact text: any difference in any field (or its type) is another key
        text = json.dumps(obj, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return parse_attestation(keys, obj)  # not JSON data: never remembered
    memo = ((keys,) if isinstance(keys, str) else tuple(keys), text)
    a = _VERIFIED.get(memo)
    if a is None:
        a = parse_attestation(keys, obj)
        if len(_VERIFIED) >= _VERIFIED_MAX:
            _VERIFIED.clear()
        _VERIFIED[memo] = a
    return a


def check_authors(hub_key: Keys, changes: Iterable[Any], authors: Authors) -> None:
    """Each pulled batch: its receipt signed by the hub when it was accepted (seq, head,
    digest as pulled), its signature by the device the change names, a device the hub
    attests and that was not revoked when the batch was accepted."""
    for c in changes:
        b = c.batch
        r = c.receipt
        if not (isinstance(r, dict) and verify_receipt(hub_key, r)
                and r.get("batch_digest") == b.digest and r.get("seq") == c.seq
                and r.get("head") == c.head and r.get("batch_id") == b.batch_id
                and r.get("replica_id") == b.replica_id and r.get("epoch") == b.epoch):
            raise HubUnverified(f"the batch at seq {c.seq} carries no receipt the hub signed "
                                "for it", {"reason": "bad_receipt", "seq": c.seq})
        device = (c.author or {}).get("device")
        a = authors.get(device) if isinstance(device, str) else None
        if a is None:
            raise HubUnverified(f"the batch at seq {c.seq} names a device the hub does not "
                                "attest", {"reason": "unknown_device", "seq": c.seq,
                                           "device": device})
        if not b.verify_signature(a.public_key):
            raise HubUnverified(f"the batch at seq {c.seq} is not signed by its device",
                                {"reason": "bad_device_signature", "seq": c.seq,
                                 "device": device})
        if not attested_at(a, int(r["accepted_at"])):
            raise HubUnverified(f"the batch at seq {c.seq} was accepted while its device was "
                                "not valid (revoked?)", {"reason": "revoked_device",
                                                         "seq": c.seq, "device": device})


def snapshot_path(keys: Keys, space_id: str, local: st.Head | None, signed: SignedHead,
                  epochs: Any, fresh: SignedHead | None, accepted: str | None = None
                  ) -> tuple[list[EpochStatement], list[EpochStatement]]:
    """A snapshot's signed head must be in this replica's epoch and not behind its head, or
    in a later epoch that hub-signed statements lead to from ours. Returns every statement
    parsed and the path from our epoch (both empty in the same epoch or a new replica).

    One exception, never taken by itself: a hub that lost its data and was restored from a
    backup (hub/restore.py ``restore_lost``) ends our epoch where the backup ends, before
    our head. Its statement says so (``restored_from`` is where the old epoch ends); it is
    refused (``restore_behind``) until the member accepts that very epoch
    (``accepted``, from ``quire accept-restore``: replica/app/accept_restore.py)."""
    epochs = epochs or []
    if not isinstance(epochs, list) or len(epochs) > 10_000:
        raise HubUnverified("snapshot epoch statements are not a list")
    behind = {"reason": "snapshot_rollback", "snapshot_seq": signed.seq}
    parsed: list[EpochStatement] = []
    path: list[EpochStatement] = []
    if local is not None and local.epoch == signed.epoch:
        if signed.seq < local.seq or (signed.seq == local.seq
                                      and signed.digest != local.digest):
            raise HubUnverified("the snapshot is behind this replica's head (rolled "
                                "back?)", dict(behind, local_seq=local.seq))
    elif local is not None:
        parsed = [parse_epoch_statement(keys, e, space=space_id) for e in epochs]
        path = epoch_path(parsed, local.epoch, signed.epoch)
        first = path[0]
        # a fork recovery (D146) ends our epoch where the surviving history ended, which
        # may be before our head on the other one: what we hold from it is republished
        recovery = logcheck.fork_recovery([first], tuple([keys] if isinstance(keys, str)
                                                         else keys), space_id)
        if first.previous_seq < local.seq and recovery is None:
            lost = first.restored_from == (first.previous, first.previous_seq,
                                           first.previous_digest)
            if lost and accepted == first.epoch:
                pass  # the member accepted this restore: republish (restored.py)
            elif lost:
                raise HubUnverified(
                    f"the hub says it lost its data and was restored from a backup that "
                    f"ends at seq {first.previous_seq}, before this replica's seq "
                    f"{local.seq}: nothing was applied. If the hub's operator confirms the "
                    f"restore, accept it (what you hold from after the backup is then "
                    f"published again): quire accept-restore {space_id}",
                    dict(behind, reason="restore_behind", local_seq=local.seq,
                         epoch=first.epoch, restored_at=first.at,
                         next=f"quire accept-restore {space_id}"))
            else:
                raise HubUnverified("the epoch statement ends the old epoch before this "
                                    "replica's head", dict(behind, local_seq=local.seq))
    if fresh is not None and fresh.epoch == signed.epoch and signed.seq < fresh.seq:
        raise HubUnverified("the snapshot is behind the head the hub just signed",
                            dict(behind, head_seq=fresh.seq))
    return parsed, path
