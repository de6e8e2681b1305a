"""Spaces, invites, replicas and epochs: the hub's administrative decisions.

Each public function runs its own transaction(s) through the Store and records an audit
event in the same transaction as the change it describes.
"""

from __future__ import annotations

from typing import Any

from hub import audit, policy, signed_state, spacelog
from hub import scope as scopes
from hub.access import (
    INVITE_PREFIX,
    MAX_CREDENTIAL,
    Principal,
    effective_role_txn,
    new_secret,
    raise_deleted_txn,
    recheck_principal_txn,
    secret_hash,
    space_access_txn,
)
from hub.admin import check_display_name
from hub.grants import issue_tokens_txn
from hub.keys import HubKey
from hub.quotas import HubQuotas, usage_doc_txn
from hub.settings import Settings
from hub.space_delete import fresh_refusal
from hub.store.batches import count_live_entries_txn
from hub.store.db import Store
from hub.store.hub_state import hub_state_txn, insert_hub_state_txn
from hub.store.invites import (
    insert_invite_txn,
    invite_by_hash_txn,
    invite_name_txn,
    set_invite_name_txn,
    use_invite_txn,
)
from hub.store.principals import (
    count_live_replicas_txn,
    device_by_id_txn,
    insert_device_txn,
    insert_replica_txn,
    insert_user_txn,
    list_members_txn,
    list_replicas_txn,
    role_txn,
    set_member_txn,
    set_name_source_txn,
    set_owner_txn,
    user_name_txn,
)
from hub.store.rules import list_rules_txn
from hub.store.spaces_sql import (
    SpaceRow,
    find_space_txn,
    get_space_txn,
    insert_space_txn,
    list_spaces_txn,
    set_head_txn,
)
from shared.digest import genesis_digest
from shared.errors import Forbidden, InvalidRequest, QuotaExceeded, SpaceDeleted, Unauthorized
from shared.ids import is_id, is_space_name, new_id
from shared.signing import load_public

GENESIS_AUDIT = audit.GENESIS


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise InvalidRequest(message)


def init_hub_txn(conn: Any, now: int) -> str:
    hub_id = new_id(now)
    insert_hub_state_txn(conn, hub_id=hub_id, created_at=now, audit_seq=0,
                         audit_digest=GENESIS_AUDIT)
    audit.record_hub_txn(conn, at=now, action="hub.init", actor={"system": "init"},
                         details={"hub_id": hub_id})
    return hub_id


def create_invite_txn(conn: Any, *, space_id: str | None, role: str, ttl: int, now: int,
                      actor: dict[str, Any], created_by: str | None,
                      name: str | None = None) -> dict[str, Any]:
    """A new invite; ``name``: the new member's display name, the default at join."""
    code = new_secret(INVITE_PREFIX)
    invite_id = new_id(now)
    expires = now + ttl * 1000
    # the space row first: the invite's row names it (a KEY SHARE lock on PostgreSQL), and
    # locking it FOR UPDATE after that deadlocks with another join or invite doing the same
    space = None if space_id is None else get_space_txn(conn, space_id, lock=True)
    insert_invite_txn(conn, id=invite_id, code_hash=secret_hash(code), space_id=space_id,
                      role=role, created_by=created_by, created_at=now, expires_at=expires)
    if name is not None:
        set_invite_name_txn(conn, invite_id, name)
    details: dict[str, Any] = {"invite": invite_id, "role": role, "expires_at": expires}
    if name is not None:
        details["name"] = name
    if space_id is None:
        audit.record_hub_txn(conn, at=now, action="invite.create", actor=actor, details=details)
    else:
        assert space is not None  # the caller found it (space_access_txn)
        audit.record_space_txn(conn, space, at=now, action="invite.create", actor=actor,
                               details=details)
    return {"id": invite_id, "code": code, "expires_at": expires, "role": role,
            "space": space_id, "name": name}


def create_space(store: Store, p: Principal, name: Any, now: int) -> dict[str, Any]:
    _require(is_space_name(name), "space name: 1-63 of a-z, 0-9, '-', '_', starting with a "
             "letter or digit")
    if not p.is_owner or p.delegation_id is not None:
        raise Forbidden("only hub owners create spaces")

    def txn(conn: Any) -> dict[str, Any]:
        if find_space_txn(conn, name) is not None:
            raise InvalidRequest(f"a space named {name!r} exists", {"reason": "name_taken"})
        space_id, epoch = new_id(now), new_id(now)
        insert_space_txn(conn, id=space_id, name=name, epoch=epoch, head_seq=0,
                         head_digest=genesis_digest(space_id, epoch), rules_version=0,
                         audit_seq=0, audit_digest=GENESIS_AUDIT, created_at=now)
        set_member_txn(conn, space_id, p.user_id, "admin", now)
        space = get_space_txn(conn, space_id, lock=True)
        audit.record_space_txn(conn, space, at=now, action="space.create", actor=p.actor(),
                               details={"name": name, "epoch": epoch})
        return {"id": space_id, "name": name, "epoch": epoch}

    return {"space": store.run_write(txn)}


def list_spaces(store: Store, p: Principal) -> dict[str, Any]:
    with store.read() as conn:
        mine = list_spaces_txn(conn, p.user_id)
        if p.delegation_id is not None:
            # a delegation reaches one space, with its own (narrowed) role: list just that
            out = []
            for s in mine:
                role = effective_role_txn(conn, p, s["id"])
                if role is not None:
                    out.append(dict(s, role=role))
            return {"spaces": out}
        if p.is_owner:
            seen = {s["id"] for s in mine}
            for s in list_spaces_txn(conn, None):
                if s["id"] not in seen:
                    mine.append(dict(s, role="admin"))
    return {"spaces": sorted(mine, key=lambda s: s["name"])}


def invite(store: Store, p: Principal, space_ref: str | None, body: dict[str, Any], now: int,
           ttl_default: int, ttl_max: int, *, dry_run: bool = False) -> dict[str, Any]:
    """Create an invite (its code is in the answer, once; only its hash is kept).
    ``dry_run`` (the console's preview, space invites): every check runs, nothing is
    written, no code is made."""
    role = body.get("role")
    ttl = body.get("ttl_seconds", ttl_default)
    _require(isinstance(ttl, int) and not isinstance(ttl, bool) and 60 <= ttl <= ttl_max,
             f"ttl_seconds must be an integer between 60 and {ttl_max}")
    name = body.get("name")
    if name is not None:
        name = check_display_name(name)
    if p.delegation_id is not None:
        raise Forbidden("delegated credentials cannot create invites")
    if space_ref is None:
        _require(role == "owner", "hub-level invites are for role 'owner'")
        if not p.is_owner:
            raise Forbidden("only hub owners invite owners")
        return store.run_write(lambda conn: create_invite_txn(
            conn, space_id=None, role="owner", ttl=ttl, now=now, actor=p.actor(),
            created_by=p.user_id, name=name))
    if not (isinstance(role, str) and role in policy.ROLES):
        raise InvalidRequest("role must be viewer, editor or admin")

    def txn(conn: Any) -> dict[str, Any]:
        space, _ = space_access_txn(conn, p, space_ref, "admin")
        if dry_run:
            return {"space": space.id, "role": role, "expires_at": now + ttl * 1000,
                    "name": name, "dry_run": True}
        return create_invite_txn(conn, space_id=space.id, role=role, ttl=ttl, now=now,
                                 actor=p.actor(), created_by=p.user_id, name=name)

    return store.run_write(txn)


def redeem(store: Store, key: HubKey, settings: Settings, body: dict[str, Any],
           caller: Principal | None, now: int) -> dict[str, Any]:
    """Redeem an invite: register a device (or use the calling one) and grant the role.

    A new device gets an access token and a refresh credential bound to ``device_key``; no
    proof of possession is needed here because those tokens are useless without the key.
    A new member's display name (docs/decisions.md D138): the one they chose
    (``user_name``), else the invite's name, else the machine's guess (``default_name``),
    else the device name; where it came from is kept (``users.name_source``)."""
    code = body.get("code")
    device_name = body.get("device_name", "device")
    device_key = body.get("device_key")
    chosen = body.get("user_name") or None
    guess = body.get("default_name") or None
    if not (isinstance(code, str) and code.startswith(INVITE_PREFIX)
            and len(code) <= MAX_CREDENTIAL):
        raise InvalidRequest("code must be an invite code ('qi_…')")
    _require(isinstance(device_name, str) and 0 < len(device_name) <= 100,
             "device_name must be 1-100 characters")
    _require(chosen is None or (isinstance(chosen, str) and 0 < len(chosen) <= 100),
             "user_name must be 1-100 characters")
    chosen = None if chosen is None else check_display_name(chosen)
    try:
        guess = None if guess is None else check_display_name(guess)
    except InvalidRequest:
        guess = None  # a guess that is not a name: the device name instead
    held = body.get("held_elsewhere", [])
    _require(isinstance(held, list) and len(held) <= 10_000
             and all(isinstance(h, str) and is_id(h) for h in held),
             "held_elsewhere must be a list of space ids")
    if not isinstance(device_key, str):  # what load_public refuses with ValueError too
        raise InvalidRequest("device_key must be a base64url Ed25519 public key")
    try:
        load_public(device_key)
    except (ValueError, TypeError) as e:
        raise InvalidRequest("device_key must be a base64url Ed25519 public key") from e

    def txn(conn: Any) -> dict[str, Any]:
        inv = invite_by_hash_txn(conn, secret_hash(code))
        if inv is None:
            raise Unauthorized("invite code not recognized", {"reason": "unknown_invite"})
        if inv.revoked_at is not None:
            raise Forbidden("this invite was revoked; ask an admin for a new one",
                            {"reason": "invite_revoked"})
        if inv.used_at is not None:
            raise Forbidden("this invite was already used; ask an admin for a new one",
                            {"reason": "invite_used"})
        if inv.expires_at <= now:
            raise Forbidden("this invite expired; ask an admin for a new one",
                            {"reason": "invite_expired", "expired_at": inv.expires_at})
        if inv.space_id is not None:
            # locked before the member row that names it is written (create_invite_txn)
            target = get_space_txn(conn, inv.space_id, lock=True)
            if target is not None and target.deleted_at is not None:
                raise_deleted_txn(conn, target)  # the invite stays unused
        if inv.space_id is not None and inv.space_id in held:
            # the machine already holds this space in another vault: refused before the
            # invite is used, so it stays valid (docs/cli.md "join")
            raise Forbidden("this machine already holds this space in another vault; the "
                            "invite was not used", {"reason": "already_joined",
                                                    "space": inv.space_id})
        tokens: dict[str, Any] = {"access_token": None, "refresh_token": None}
        offered = invite_name_txn(conn, inv.id)
        source: str | None
        user_name, source = ((chosen, "member") if chosen else
                             (offered, "invite") if offered else
                             (guess, "guess") if guess else
                             (check_display_name(device_name), "guess"))
        new_user = caller is None
        if caller is not None:
            if caller.delegation_id is not None:
                raise Forbidden("delegated credentials cannot redeem invites",
                                {"reason": "delegated"})
            p = recheck_principal_txn(conn, caller)
            dev = device_by_id_txn(conn, p.device_id)
            assert dev is not None  # recheck_principal_txn found it, in this transaction
            if dev.public_key != device_key:
                raise InvalidRequest("device_key differs from the calling device's key")
            user_id, device_id = p.user_id, p.device_id
        else:
            user_id, device_id = new_id(now), new_id(now)
            insert_user_txn(conn, id=user_id, name=user_name, is_owner=inv.role == "owner",
                            active=True, created_at=now)
            set_name_source_txn(conn, user_id, source)
            insert_device_txn(conn, id=device_id, user_id=user_id, name=device_name,
                              public_key=device_key, token_hash=None, created_at=now)
            tokens = issue_tokens_txn(conn, key, settings, user_id=user_id,
                                      device_id=device_id, device_key=device_key, now=now)
        if not use_invite_txn(conn, inv.id, user_id, now):
            raise Forbidden("this invite was already used", {"reason": "invite_used"})
        actor = {"user": user_id, "device": device_id, "agent": None}
        space_out = None
        if inv.role == "owner":
            set_owner_txn(conn, user_id)
            audit.record_hub_txn(conn, at=now, action="invite.redeem", actor=actor,
                                 details={"invite": inv.id, "role": "owner"})
        else:
            current = role_txn(conn, inv.space_id, user_id)
            # the invite's role, unless the user already has a higher one in the space
            role = current if current is not None and policy.role_rank(current) >= \
                policy.role_rank(inv.role) else inv.role
            set_member_txn(conn, inv.space_id, user_id, role, now)
            space = get_space_txn(conn, inv.space_id, lock=True)
            assert space is not None  # the invite names it (a purged space's invites go too)
            audit.record_space_txn(conn, space, at=now, action="invite.redeem", actor=actor,
                                   details={"invite": inv.id, "role": role})
            space_out = {"id": space.id, "name": space.name, "role": role,
                         "epoch": space.epoch}
        if not new_user:
            known = user_name_txn(conn, user_id)
            assert known is not None  # recheck_principal_txn found the caller
            user_name, source = known
        return dict(tokens, user_id=user_id, device_id=device_id,
                    user_name=user_name, name_source=source, new_user=new_user,
                    hub=hub_info(conn, key, settings.url), space=space_out)

    return store.run_write(txn)


def hub_info(conn: Any, key: HubKey, url: str | None = None) -> dict[str, Any]:
    state = hub_state_txn(conn)
    out = {"hub_id": state.hub_id if state else None, "protocol": 1,
           "public_key": key.public, "key_id": key.kid}
    if url is not None:
        out["url"] = url  # token audience and DPoP htu base
    return out


def register_replica(store: Store, p: Principal, space_ref: str, body: dict[str, Any],
                     now: int, *, max_replicas: int = 0) -> dict[str, Any]:
    """A new replica of the space for the caller's device. At most ``max_replicas`` live
    ones per device and space (0: no limit): each is a row, and each may hold a conflict
    report, so a device that registers in a loop is refused (``quota_exceeded``) rather
    than stored."""
    name = body.get("name", "replica")
    _require(isinstance(name, str) and 0 < len(name) <= 100, "name must be 1-100 characters")

    def txn(conn: Any) -> dict[str, Any]:
        space, _ = space_access_txn(conn, p, space_ref, "viewer", lock=True)
        if max_replicas and p.device_id and count_live_replicas_txn(
                conn, space.id, p.device_id) >= max_replicas:
            raise QuotaExceeded(
                f"this device already has {max_replicas} live replicas of space "
                f"{space.name}; an admin can revoke the ones no longer used (quire admin "
                "replicas list, quire admin replicas revoke SPACE ID)",
                {"limit": max_replicas, "measure": "replicas", "space": space.id})
        replica_id = new_id(now)
        insert_replica_txn(conn, id=replica_id, space_id=space.id, device_id=p.device_id,
                           name=name, created_at=now)
        audit.record_space_txn(conn, space, at=now, action="replica.register",
                               actor=p.actor(), details={"replica": replica_id, "name": name})
        return {"replica_id": replica_id, "space": space.id}

    return store.run_write(txn)


def head(store: Store, key: HubKey, p: Principal, space_ref: str, now: int,
         nonce: str | None = None, state_root: bool = True,
         quota: HubQuotas | None = None) -> dict[str, Any]:
    """The signed head (with the state root, and over ``nonce`` when the caller sent one:
    a freshness proof), plus the caller's role and applying rules (not signed). A deleted
    space's refusal carries its statement signed over ``nonce`` too (hub/space_delete.py)."""
    try:
        with store.read() as conn:
            space, role = space_access_txn(conn, p, space_ref, "viewer")
            rules = list_rules_txn(conn, space.id)
            root = signed_state.current_root_txn(conn, space.id, state_root)
            usage = None if quota is None else usage_doc_txn(conn, quota, space.id)
            tips = signed_state.audit_tips_txn(conn, space, enabled=state_root)
    except SpaceDeleted as e:
        if nonce is None:
            raise
        raise fresh_refusal(key, e, nonce) from None
    signed = signed_state.signed_head(key, space=space.id, epoch=space.epoch,
                                      seq=space.head_seq, digest=space.head_digest, root=root,
                                      at=now, nonce=nonce, tips=tips)
    actor = policy.Actor(p.user_id, role, p.agent)
    # the effective rules (typed defaults included) that apply to this caller: the replica
    # pre-checks its pushes with exactly these (shared/policy.py); its read rules as stored
    # (with their kinds and tags: hub/scope.py)
    scope = scopes.scope_of_rules(rules, actor, space.folders)
    applying = [r.to_dict() for r in policy.effective_rules(rules)
                if policy.rule_applies(r, actor) and scopes.READ not in r.actions]
    applying += [r.to_dict() for r in scope.rules]
    if usage is not None and not scope.unrestricted:  # totals count what it may not read
        usage = dict(usage, entries=None, bytes=None, history_bytes=None, scoped=True)
    extra = {} if usage is None else {"usage": usage}  # quotas (hub/quotas.py)
    # ``kinds``: the folder mapping the guard judges kinds under (hub/space_kinds.py)
    return dict(signed, name=space.name, role=role, rules=applying, kinds=space.folders,
                rules_version=space.rules_version, **extra)


def verify(store: Store, p: Principal, space_ref: str) -> dict[str, Any]:
    """``quire verify --hub``: the hub re-checks the space's chain from the epoch's genesis
    and its state root; an admin also gets the space's audit chain checked."""
    from hub import admin

    with store.read(snapshot=True) as conn:
        space, role = space_access_txn(conn, p, space_ref, "viewer")
        out = signed_state.verify_space_txn(conn, space)
    if policy.at_least(role, "admin") and p.delegation_id is None:
        out["audit"] = admin.verify_audit(store, p, space.id)
    else:
        out["audit"] = {"ok": None, "skipped": "the audit chain is checked for admins"}
    out["ok"] = bool(out["chain"]["ok"] and out["state"]["ok"]
                     and out["audit"]["ok"] is not False)
    return out


def devices(store: Store, key: HubKey, p: Principal, space_ref: str, now: int
            ) -> dict[str, Any]:
    """Hub-signed attestations of the devices whose batches the space may hold."""
    with store.read() as conn:
        space, _ = space_access_txn(conn, p, space_ref, "viewer")
        return {"devices": signed_state.attestations_txn(conn, key, space.id, now)}


def bump_epoch(store: Store, p: Principal, space_ref: str, body: dict[str, Any], now: int,
               key: HubKey | None = None, *, dry_run: bool = False) -> dict[str, Any]:
    """A new epoch: history restarts at seq 0, the entries stay (the new epoch's state).
    A dry run (``dry_run``, the console's preview, or ``body["dry_run"]``, the API's):
    every check runs under the space lock, nothing is written (head, epoch and audit stay
    as they are); either way the answer carries the impact (``epoch_impact_txn``)."""
    reason = body.get("reason")
    if not (isinstance(reason, str) and 0 < len(reason.strip()) <= 500):
        raise InvalidRequest("reason is required (1-500 characters): say why history "
                             "restarts")
    dry = body.get("dry_run", False)
    _require(isinstance(dry, bool), "dry_run must be true or false")
    dry = dry or dry_run
    if p.delegation_id is not None:
        raise Forbidden("delegated credentials cannot change epochs")
    fork = body.get("fork")

    def txn(conn: Any) -> dict[str, Any]:
        space, _ = space_access_txn(conn, p, space_ref, "admin", lock=True)
        # a fork recovery: this hub's log survives, the evidence names the other history
        forked = None if fork is None else spacelog.fork_evidence(key, p, space.id, fork)
        out = {"space": space.id, "epoch": None, "previous": space.epoch,
               "previous_seq": space.head_seq, "reason": reason, "dry_run": dry,
               "impact": epoch_impact_txn(conn, space)}
        if dry:
            return out
        epoch = new_id(now)
        set_head_txn(conn, space.id, 0, genesis_digest(space.id, epoch), epoch=epoch)
        st = None
        if key is not None:  # the statement replicas verify before taking the new epoch
            st = signed_state.epoch_statement_txn(conn, key, space, epoch, reason, now,
                                                  forked=forked)
        details = {"previous": space.epoch, "epoch": epoch, "reason": reason,
                   "previous_seq": space.head_seq}
        if forked is not None:
            details["forked"] = forked
            out["statement"] = st  # what the witnesses take the line from (D146)
        audit.record_space_txn(conn, space, at=now, action="epoch.bump", actor=p.actor(),
                               details=details)
        return dict(out, epoch=epoch)

    return store.run_write(txn)


def epoch_impact_txn(conn: Any, space: SpaceRow) -> dict[str, Any]:
    """What a bump does: the current epoch's history stops at its head (its batches are
    no longer served as changes); every live entry is carried into the new epoch; every
    replica not revoked must take a snapshot of the new epoch (and replays its unpublished
    changes on it); nobody loses access (members, roles, devices and rules are untouched)."""
    replicas = [{"id": r["id"], "name": r["name"], "device_name": r["device_name"],
                 "user_id": r["user_id"]}
                for r in list_replicas_txn(conn, space.id) if r["revoked_at"] is None]
    return {"history_left": {"epoch": space.epoch, "batches": int(space.head_seq),
                             "head_digest": space.head_digest},
            "entries_carried": count_live_entries_txn(conn, space.id),
            "replicas_resnapshot": replicas,
            "members": len(list_members_txn(conn, space.id)),
            "loses_access": []}
