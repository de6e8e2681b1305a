"""Hub-attested publication: a change the hub signs and publishes for a member, through the
same guard as every batch (docs/agents.md, "Proposals"; docs/decisions.md D135).

A browser (the console) holds no device key, and an agent without a replica (the remote
MCP endpoint) has none either; replicas believe only batches signed by a device the hub
attests (replica/trust/verify.py). So the hub holds one signing device per approving
member, its key derived from the hub key (HKDF, per member: nobody else can sign as it, a
hub key rotation makes a new one), registered as a ``devices`` row of that member with a
``replicas`` row per space. Replicas verify its batches like any device's, with no change.

    publish_attested(store, key, settings, member, space_id, ops, attested, ...)
      1. the member's hub-held device and its replica in the space: found, or made now
         (one write transaction); a revoked one refuses (an admin stopped it)
      2. the batch: ops on their stated bases, parent = the current head, provenance
         {agent, attested: hub, proposed_by, approved_by, proposal}, signed with that key
      3. hub/guard.py ``publish`` with the member as principal (role, rules, screening,
         quota, blocks, bases re-checked under the space lock; ``rebase``), ``via_hub``
         set so the audit event's actor names both principals and the batch row the agent;
         ``then_txn`` runs in the committing transaction (a proposal is closed there)
      → the guard's Outcome; the caller tells in-process listeners (``hub.published``)

A base that moved is the guard's ``base_mismatch``: nothing is overwritten (the proposal
goes ``stale``, hub/proposals.py). ``rights="agent"`` judges the rules as the agent acting
for the member (the remote MCP endpoint's direct writes) instead of as the member.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from hub import guard
from hub import screening as screen
from hub.access import HubAttested, Principal
from hub.keys import HubKey
from hub.quotas import HubQuotas
from hub.store import proposals_sql as sql
from hub.store.db import Store
from hub.store.spaces_sql import get_space_txn
from shared.errors import Forbidden, NotFound
from shared.ids import new_id
from shared.signing import public_b64
from shared.wire import Op, build_batch

HKDF_INFO = b"quire hub attester v1:"


def attester_key(key: HubKey, user_id: str) -> Ed25519PrivateKey:
    """The signing key of ``user_id``'s hub-held device: HKDF-SHA256 of the hub key's seed,
    bound to the member (one key per member; unknown to anyone without the hub key)."""
    seed = key.private.private_bytes(serialization.Encoding.Raw,
                                     serialization.PrivateFormat.Raw,
                                     serialization.NoEncryption())
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                   info=HKDF_INFO + user_id.encode("ascii")).derive(seed)
    return Ed25519PrivateKey.from_private_bytes(derived)


def ensure_attester_txn(conn: Any, user_id: str, space_id: str, public_key: str,
                        now: int) -> tuple[str, str]:
    """(device id, replica id) of the member's hub-held device in the space, made when
    missing. One an admin revoked is not made again: ``forbidden``."""
    dev = sql.attester_device_txn(conn, user_id, public_key)
    if dev is None:
        device_id = new_id(now)
        sql.insert_attester_device_txn(conn, id=device_id, user_id=user_id,
                                       public_key=public_key, now=now)
    elif dev.revoked_at is not None:
        raise Forbidden("your hub-attested device was revoked, so the hub publishes nothing "
                        "for you; an admin revoked it on purpose",
                        {"reason": "attester_revoked"})
    else:
        device_id = dev.id
    rep = sql.attester_replica_txn(conn, space_id, device_id)
    if rep is None:
        replica_id = new_id(now)
        sql.insert_attester_replica_txn(conn, id=replica_id, space_id=space_id,
                                        device_id=device_id, now=now)
    elif rep.revoked_at is not None:
        raise Forbidden("the hub's replica for your attested changes was revoked in this "
                        "space", {"reason": "attester_revoked"})
    else:
        replica_id = rep.id
    return device_id, replica_id


def publish_attested(store: Store, key: HubKey, settings: Any, *, member: Principal,
                     space_id: str, ops: Sequence[Op], attested: HubAttested,
                     now: Callable[[], int], rights: Literal["member", "agent"] = "member",
                     client: str = "quire-hub", tool: str = "proposal",
                     then_txn: Callable[[Any, guard.Outcome], None] | None = None,
                     hooks: guard.GuardHooks | None = None) -> guard.Outcome:
    """Publish ``ops`` (each an ``Op(entry, base)``; ``base`` the version it was written
    against, None for a create) in ``space_id`` (an id) as a hub-attested batch for
    ``member``: the approving member's own, non-delegated ``Principal`` (from their
    request or console session). ``attested``: ``HubAttested(agent, agent_user,
    approved_by=member.user_id, proposal)``. ``settings``: the hub's (max_ops,
    max_entry_body, state_root, quotas, screening_injection), as the batches endpoint uses.

    ``rights``: ``"member"`` judges role and rules as the member (an accepted proposal);
    ``"agent"`` as ``attested.agent`` acting for the member (rules for agents and for
    ``agent:NAME`` apply, the member's allows do not).

    Raises what the guard raises (``base_mismatch`` when a base moved: nothing written;
    ``forbidden``, ``policy_denied``, ``content_screened``, ``quota_exceeded`` …), and
    ``forbidden`` (``attester_revoked``) when the member's hub-held device or replica was
    revoked. Returns the guard's ``Outcome``; the caller emits it (``hub.published``)."""
    if member.delegation_id is not None or member.agent is not None:
        raise Forbidden("only a member acting as themselves approves a hub-attested change; "
                        "an agent cannot", {"reason": "agent_cannot_approve"})
    if attested.approved_by != member.user_id:
        raise ValueError("attested.approved_by must be the member publishing it")
    signing = attester_key(key, member.user_id)
    at = now()

    def prepare(conn: Any) -> tuple[str, str, Any]:
        space = get_space_txn(conn, space_id)
        if space is None:
            raise NotFound("no such space")
        device_id, replica_id = ensure_attester_txn(conn, member.user_id, space.id,
                                                    public_b64(signing), at)
        return device_id, replica_id, space

    device_id, replica_id, space = store.run_write(prepare)
    batch = build_batch(signing, batch_id=new_id(at), replica_id=replica_id, space=space.id,
                        epoch=space.epoch, parent_seq=space.head_seq,
                        parent_digest=space.head_digest, ops=list(ops),
                        provenance=dict(attested.provenance(), client=client, tool=tool))
    principal = Principal(member.user_id, device_id, member.user_name, member.is_owner,
                          agent=attested.agent if rights == "agent" else None,
                          via_hub=attested)
    s = settings
    return guard.publish(store, key, principal, space.id, batch.to_wire(),
                         max_ops=s.max_ops, max_body=s.max_entry_body, now=now, hooks=hooks,
                         rebase=True, state_root=s.state_root,
                         quota=HubQuotas.from_settings(s),
                         screening=screen.config_for(s.screening_injection),
                         then_txn=then_txn)
