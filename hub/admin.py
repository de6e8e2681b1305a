"""Administration: rules, members, invites, devices, replicas, delegations and the audit
export. Every change is audited in the transaction that makes it; destructive verbs take
``dry_run`` (every check runs, nothing is written, the answer says what would happen).

Who may do what:
- space admins (and hub owners): rules, members, invites and replicas of their space;
- hub owners: every device; a member: their own devices, replicas and delegations;
- delegated callers: nothing here (``direct`` refuses them first), except listing nothing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

from hub import audit, policy
from hub import scope as scopes
from hub.access import Principal, space_access_txn
from hub.keys import HubKey
from hub.logs import event
from hub.settings import Settings
from hub.store.audit_sql import iter_audit_txn
from hub.store.db import Store
from hub.store.identity import (
    get_delegation_txn,
    insert_delegation_txn,
    list_delegations_txn,
    live_delegations_txn,
    revoke_delegation_txn,
    revoke_device_refresh_txn,
)
from hub.store.invites import get_invite_txn, list_invites_txn, revoke_invite_txn
from hub.store.principals import (
    admin_over_txn,
    deactivate_user_txn,
    device_by_id_txn,
    get_replica_txn,
    get_user_txn,
    list_devices_txn,
    list_members_txn,
    list_replicas_txn,
    names_txn,
    remove_member_txn,
    revoke_device_txn,
    revoke_replica_txn,
    role_txn,
    set_member_txn,
    set_user_name_txn,
)
from hub.store.rules import delete_rule_txn, insert_rule_txn, list_rules_txn
from hub.store.spaces_sql import bump_rules_version_txn
from hub.tokens import issue_access_token
from shared.canonical import canonical_str
from shared.errors import Forbidden, InvalidRequest, NotFound, QuotaExceeded
from shared.ids import is_id, new_id
from shared.signing import jwk_thumbprint

# a glob on entry ids, which are vault paths (shared/ids.py): any printable characters,
# within the rules column (String(240)); ``Meeting Notes/*`` as well as ``guardrail/*``
GLOB = re.compile(r"^[^\x00-\x1f\x7f\\]{1,240}$")
log = logging.getLogger("quire.hub.admin")
AGENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,63}$")
RULE_WHO_MAX = 64  # rules.who (hub/store/schema.py): ``agent:`` leaves 58 for the name


def direct(p: Principal) -> None:
    """Delegated tokens never reach administration."""
    if p.delegation_id is not None:
        raise Forbidden("delegated credentials cannot use administrative endpoints",
                        {"reason": "delegated"})


def _dry(body: dict[str, Any]) -> bool:
    v = body.get("dry_run", False)
    if not isinstance(v, bool):
        raise InvalidRequest("dry_run must be true or false")
    return v


class _DryRun(Exception):
    """Raised inside a write transaction to roll it back after every check passed."""

    def __init__(self, result: dict[str, Any]):
        self.result = result


def _write(store: Store, fn: Any, dry_run: bool, action: str | None = None
           ) -> dict[str, Any]:
    """Run an administrative change; with ``action``, log it once it committed (one
    ``admin`` line: the action and the ids it touched, nothing else)."""
    try:
        out = store.run_write(lambda conn: fn(conn, dry_run))
    except _DryRun as d:
        return dict(d.result, dry_run=True)
    if action is not None:
        ids = {k: v for k, v in out.items()
               if isinstance(v, str) and (is_id(v) or k == "role")}
        event(log, "admin", logging.INFO, action=action, **ids)
    return dict(out, dry_run=False)


def _finish(out: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    if dry_run:
        raise _DryRun(out)
    return out


# ---------------------------------------------------------------- rules


def list_rules(store: Store, p: Principal, space_ref: str) -> dict[str, Any]:
    direct(p)
    with store.read() as conn:
        space, _ = space_access_txn(conn, p, space_ref, "admin")
        rules = list_rules_txn(conn, space.id)
    # ``effective``: what the guard evaluates, the built-in typed defaults included
    # (read rules as stored: their kinds and tags are not in shared/policy.py's Rule)
    return {"space": space.id, "rules_version": space.rules_version, "rules": rules,
            "effective": [r.to_dict() for r in policy.effective_rules(rules)
                          if scopes.READ not in r.actions]
            + [dict(r, source="space") for r in rules if scopes.is_read_rule(r)]}


def _one_agent(who: str) -> bool:
    """``agent:NAME``: a delegation's agent name, within the rules table's 64 characters."""
    name = policy.rule_agent(who)
    return name is not None and len(who) <= RULE_WHO_MAX and bool(AGENT.match(name))


def parse_rule(body: dict[str, Any]) -> dict[str, Any]:
    effect = body.get("effect", "deny")
    who, actions, entries = body.get("who"), body.get("actions"), body.get("entries")
    if effect not in policy.EFFECTS:
        raise InvalidRequest("effect must be allow or deny")
    if not (isinstance(who, str) and (who in policy.ROLES or who == "agents" or is_id(who)
                                      or _one_agent(who))):
        raise InvalidRequest("who must be viewer, editor, admin, agents, agent:NAME (one "
                             "agent, a name as delegations take it) or a user id")
    known = (*policy.RULE_ACTIONS, scopes.READ)  # read rules: hub/scope.py, D142
    if not (isinstance(actions, list) and actions
            and all(a in known for a in actions)
            and len(set(actions)) == len(actions)):
        raise InvalidRequest("actions must be a non-empty list of create, update, delete, "
                             "bulk_delete, or read alone")
    if not (isinstance(entries, str) and GLOB.match(entries)):
        raise InvalidRequest("entries must be a glob on entry ids, e.g. guardrail/*")
    ordered = [a for a in known if a in actions]
    return {"effect": effect, "who": who, "actions": ordered, "entries": entries,
            **scopes.parse_conditions(body, ordered)}


def add_rule(store: Store, p: Principal, space_ref: str, body: dict[str, Any], now: int,
             *, dry_run: bool = False) -> dict[str, Any]:
    """Add a space rule. ``dry_run`` (the console's preview): checks only, nothing written."""
    direct(p)
    rule = parse_rule(body)

    def txn(conn: Any) -> dict[str, Any]:
        space, _ = space_access_txn(conn, p, space_ref, "admin", lock=True)
        if dry_run:
            out = {"rule": rule, "rules_version": space.rules_version, "dry_run": True}
            if scopes.is_read_rule(rule):  # who would stop or start reading what
                now_rules = list_rules_txn(conn, space.id)
                out["read_impact"] = scopes.read_impact_txn(
                    conn, space, now_rules, [*now_rules, dict(rule, id="new")])
            return out
        rule_id = new_id(now)
        insert_rule_txn(conn, id=rule_id, space_id=space.id, effect=rule["effect"],
                        who=rule["who"], actions=",".join(rule["actions"]),
                        entries=rule["entries"], created_at=now,
                        kinds=",".join(rule.get("kinds", [])) or None,
                        tags=",".join(rule.get("tags", [])) or None)
        # the guard compares rules_version at commit: a batch prepared under the old rules
        # is refused with head_changed and retried under these
        bump_rules_version_txn(conn, space.id)
        audit.record_space_txn(conn, space, at=now, action="rule.add", actor=p.actor(),
                               details=dict(rule, id=rule_id))
        return {"rule": dict(rule, id=rule_id), "rules_version": space.rules_version + 1}

    return store.run_write(txn)


def remove_rule(store: Store, p: Principal, space_ref: str, rule_id: str,
                body: dict[str, Any], now: int) -> dict[str, Any]:
    direct(p)

    def txn(conn: Any, dry_run: bool) -> dict[str, Any]:
        space, _ = space_access_txn(conn, p, space_ref, "admin", lock=True)
        found = [r for r in list_rules_txn(conn, space.id) if r["id"] == rule_id]
        if not found:
            raise NotFound(f"no rule {rule_id} in this space")
        out = {"rule": found[0], "rules_version": space.rules_version + 1}
        if dry_run and scopes.is_read_rule(found[0]):  # who would start reading what
            every = list_rules_txn(conn, space.id)
            out["read_impact"] = scopes.read_impact_txn(
                conn, space, every, [r for r in every if r["id"] != rule_id])
        _finish(out, dry_run)
        delete_rule_txn(conn, space.id, rule_id)
        bump_rules_version_txn(conn, space.id)
        audit.record_space_txn(conn, space, at=now, action="rule.remove", actor=p.actor(),
                               details=found[0])
        return out

    return _write(store, txn, _dry(body), "rule.remove")


# ---------------------------------------------------------------- members and invites


def list_members(store: Store, p: Principal, space_ref: str) -> dict[str, Any]:
    direct(p)
    with store.read() as conn:
        space, _ = space_access_txn(conn, p, space_ref, "admin")
        return {"space": space.id, "members": list_members_txn(conn, space.id)}


def _change_member(store: Store, p: Principal, space_ref: str, user_id: str,
                   body: dict[str, Any], now: int, *, action: str,
                   change: Callable[[Any, str], object], out: dict[str, Any]) -> dict[str, Any]:
    """One audited, dry-runnable change to an existing member of a space."""
    direct(p)

    def txn(conn: Any, dry_run: bool) -> dict[str, Any]:
        space, _ = space_access_txn(conn, p, space_ref, "admin", lock=True)
        before = role_txn(conn, space.id, user_id)
        if before is None:
            raise NotFound(f"user {user_id} is not a member of this space")
        doc = {"user_id": user_id, **out, "previous": before}
        _finish(doc, dry_run)
        change(conn, space.id)
        audit.record_space_txn(conn, space, at=now, action=action, actor=p.actor(),
                               details=doc)
        return doc

    return _write(store, txn, _dry(body), action)


def set_role(store: Store, p: Principal, space_ref: str, user_id: str, body: dict[str, Any],
             now: int) -> dict[str, Any]:
    role = body.get("role")
    if role not in policy.ROLES:
        raise InvalidRequest("role must be viewer, editor or admin")
    return _change_member(store, p, space_ref, user_id, body, now, action="member.role",
                          change=lambda conn, sid: set_member_txn(conn, sid, user_id, role,
                                                                  now),
                          out={"role": role})


def remove_member(store: Store, p: Principal, space_ref: str, user_id: str,
                  body: dict[str, Any], now: int) -> dict[str, Any]:
    return _change_member(store, p, space_ref, user_id, body, now, action="member.remove",
                          change=lambda conn, sid: remove_member_txn(conn, sid, user_id),
                          out={"removed": True})


def list_invites(store: Store, p: Principal, space_ref: str) -> dict[str, Any]:
    direct(p)
    with store.read() as conn:
        space, _ = space_access_txn(conn, p, space_ref, "admin")
        return {"space": space.id, "invites": list_invites_txn(conn, space.id)}


def revoke_invite(store: Store, p: Principal, invite_id: str, body: dict[str, Any], now: int
                  ) -> dict[str, Any]:
    direct(p)

    def txn(conn: Any, dry_run: bool) -> dict[str, Any]:
        inv = get_invite_txn(conn, invite_id) if is_id(invite_id) else None
        if inv is None:
            raise NotFound(f"no invite {invite_id}")
        if inv.space_id is None:
            if not p.is_owner:
                raise NotFound(f"no invite {invite_id}")
            space = None
        else:
            space, _ = space_access_txn(conn, p, inv.space_id, "admin", lock=True)
        if inv.used_at is not None or inv.revoked_at is not None:
            raise Forbidden("this invite was already used or revoked",
                            {"reason": "invite_used" if inv.used_at else "invite_revoked"})
        out = {"invite": invite_id, "revoked": True}
        _finish(out, dry_run)
        revoke_invite_txn(conn, invite_id, now)
        if space is None:
            audit.record_hub_txn(conn, at=now, action="invite.revoke", actor=p.actor(),
                                 details=out)
        else:
            audit.record_space_txn(conn, space, at=now, action="invite.revoke",
                                   actor=p.actor(), details=out)
        return out

    return _write(store, txn, _dry(body), "invite.revoke")


# ---------------------------------------------------------------- devices and replicas


def list_devices(store: Store, p: Principal, all_users: bool) -> dict[str, Any]:
    direct(p)
    if all_users and not p.is_owner:
        raise Forbidden("only hub owners list every device")
    with store.read() as conn:
        rows = list_devices_txn(conn, None if all_users else p.user_id)
    for r in rows:
        r["current"] = r["id"] == p.device_id
    return {"devices": rows}


def revoke_device(store: Store, p: Principal, device_id: str, body: dict[str, Any], now: int
                  ) -> dict[str, Any]:
    """Revoke a device: its tokens stop working on the next request, its refresh
    credentials are revoked, and the guard refuses its in-flight publications."""
    direct(p)

    def txn(conn: Any, dry_run: bool) -> dict[str, Any]:
        dev = device_by_id_txn(conn, device_id) if is_id(device_id) else None
        if dev is None or (dev.user_id != p.user_id and not p.is_owner):
            raise NotFound(f"no device {device_id} you may manage")
        if dev.revoked_at is not None:
            raise Forbidden("this device is already revoked", {"reason": "device_revoked"})
        out = {"device": device_id, "name": dev.name, "user_id": dev.user_id, "revoked": True}
        _finish(out, dry_run)
        revoke_device_txn(conn, device_id, now)
        revoke_device_refresh_txn(conn, device_id, now)
        audit.record_hub_txn(conn, at=now, action="device.revoke", actor=p.actor(),
                             details=out)
        return out

    return _write(store, txn, _dry(body), "device.revoke")


def deactivate_user(store: Store, p: Principal, user_id: str, body: dict[str, Any],
                    now: int) -> dict[str, Any]:
    """Hub owners revoke a user everywhere: every device's tokens stop on the next request,
    refresh credentials are revoked, and the guard refuses their in-flight publications."""
    direct(p)
    if not p.is_owner:
        raise Forbidden("only hub owners deactivate users")
    if user_id == p.user_id:
        raise Forbidden("you cannot deactivate yourself", {"reason": "self"})

    def txn(conn: Any, dry_run: bool) -> dict[str, Any]:
        user = get_user_txn(conn, user_id) if is_id(user_id) else None
        if user is None:
            raise NotFound(f"no user {user_id}")
        if not user.active:
            raise Forbidden("this user is already deactivated", {"reason": "user_inactive"})
        out = {"user_id": user_id, "name": user.name, "deactivated": True}
        _finish(out, dry_run)
        deactivate_user_txn(conn, user_id, now)
        audit.record_hub_txn(conn, at=now, action="user.deactivate", actor=p.actor(),
                             details=out)
        return out

    return _write(store, txn, _dry(body), "user.deactivate")


def check_display_name(name: Any) -> str:
    """A member's display name: 1-100 characters, no control characters, trimmed."""
    if not isinstance(name, str) or not 0 < len(name.strip()) <= 100 or any(
            ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 for ch in name):
        raise InvalidRequest("name must be 1-100 printable characters",
                             {"reason": "bad_name"})
    return name.strip()


def rename_user(store: Store, p: Principal, user_id: str, body: dict[str, Any], now: int
                ) -> dict[str, Any]:
    """Set a member's display name (``user_id`` ``me``: the caller's own). The member, a
    hub owner, or an admin of a space the member is in may; others get ``not_found``."""
    direct(p)
    target = p.user_id if user_id == "me" else user_id
    name = check_display_name(body.get("name"))

    def txn(conn: Any, dry_run: bool) -> dict[str, Any]:
        user = get_user_txn(conn, target) if is_id(target) else None
        if user is None or not (target == p.user_id or p.is_owner
                                or admin_over_txn(conn, p.user_id, target)):
            raise NotFound(f"no user {user_id} you may rename")
        out = {"user_id": target, "name": name, "previous": user.name}
        _finish(out, dry_run)
        # the member's own choice, or an admin's: never replaced by a sign-in's claim
        set_user_name_txn(conn, target, name, "member" if target == p.user_id else "admin")
        audit.record_hub_txn(conn, at=now, action="user.rename", actor=p.actor(),
                             details=out)
        return out

    return _write(store, txn, _dry(body), "user.rename")


def list_replicas(store: Store, p: Principal, space_ref: str) -> dict[str, Any]:
    direct(p)
    with store.read() as conn:
        space, role = space_access_txn(conn, p, space_ref, "viewer")
        rows = list_replicas_txn(conn, space.id)
    if role != "admin":
        rows = [r for r in rows if r["user_id"] == p.user_id]
    return {"space": space.id, "replicas": rows}


def revoke_replica(store: Store, p: Principal, space_ref: str, replica_id: str,
                   body: dict[str, Any], now: int) -> dict[str, Any]:
    direct(p)

    def txn(conn: Any, dry_run: bool) -> dict[str, Any]:
        space, role = space_access_txn(conn, p, space_ref, "viewer", lock=True)
        rep = get_replica_txn(conn, replica_id) if is_id(replica_id) else None
        owner = device_by_id_txn(conn, rep.device_id) if rep is not None else None
        if rep is None or rep.space_id != space.id or (
                role != "admin" and (owner is None or owner.user_id != p.user_id)):
            raise NotFound(f"no replica {replica_id} you may manage in this space")
        if rep.revoked_at is not None:
            raise Forbidden("this replica is already revoked", {"reason": "replica_revoked"})
        out = {"replica": replica_id, "name": rep.name, "device_id": rep.device_id,
               "revoked": True}
        _finish(out, dry_run)
        revoke_replica_txn(conn, replica_id, now)
        audit.record_space_txn(conn, space, at=now, action="replica.revoke", actor=p.actor(),
                               details=out)
        return out

    return _write(store, txn, _dry(body), "replica.revoke")


# ---------------------------------------------------------------- delegations


def parse_ttl(v: Any, maximum: int) -> int:
    if not (isinstance(v, int) and not isinstance(v, bool) and 60 <= v <= maximum):
        raise InvalidRequest(f"ttl_seconds must be an integer between 60 and {maximum}",
                             {"max": maximum})
    return v


def check_delegation_bounds_txn(conn: Any, settings: Settings, user_id: str, agent: str,
                                now: int) -> None:
    """A member holds at most ``delegations_per_agent`` live delegations to one agent and
    ``delegations_per_member`` in all: each is a row, a token and an audit event, and a loop
    that mints (a script, an agent host restarting ``quire mcp``) must stop somewhere. A
    session's renewal mints then revokes, so it needs one spare place."""
    per_agent, total = live_delegations_txn(conn, user_id, agent, now)
    for n, limit, what in ((per_agent, settings.delegations_per_agent, f"agent {agent}"),
                           (total, settings.delegations_per_member, "your agents")):
        if limit and n >= limit:
            raise QuotaExceeded(
                f"you hold {n} live delegations for {what}, the most this hub allows; revoke "
                "the ones no longer used (quire delegate list, quire delegate revoke ID) or "
                "wait for them to expire",
                {"limit": limit, "measure": "delegations", "live": n, "agent": agent})


def create_delegation(store: Store, key: HubKey, settings: Settings, p: Principal,
                      body: dict[str, Any], now: int) -> dict[str, Any]:
    """Mint a token for an agent on the calling device: one space, read or write, bound to
    the device key, at most ``delegation_ttl_max``; its ``act`` claim names the agent."""
    if p.delegation_id is not None:
        raise Forbidden("delegated credentials cannot mint delegations", {"reason": "delegated"})
    agent, scope = body.get("agent"), body.get("scope", "read")
    if not (isinstance(agent, str) and AGENT.match(agent)):
        raise InvalidRequest("agent must be 1-64 of letters, digits, '_.@:-'")
    if scope not in ("read", "write"):
        raise InvalidRequest("scope must be read or write")
    ttl = parse_ttl(body.get("ttl_seconds", 8 * 3600), settings.delegation_ttl_max)
    space_ref = body.get("space")
    if not isinstance(space_ref, str):
        raise InvalidRequest("space is required")

    def txn(conn: Any) -> dict[str, Any]:
        space, role = space_access_txn(conn, p, space_ref, "editor" if scope == "write"
                                       else "viewer", lock=True)
        dev = device_by_id_txn(conn, p.device_id)
        if dev is None:
            raise NotFound("the calling device no longer exists")
        check_delegation_bounds_txn(conn, settings, p.user_id, agent, now)
        d = {"id": new_id(now), "agent": agent, "space_id": space.id, "scope": scope}
        expires = now + ttl * 1000
        insert_delegation_txn(conn, id=d["id"], user_id=p.user_id, device_id=p.device_id,
                              space_id=space.id, agent=agent, scope=scope, created_at=now,
                              expires_at=expires)
        details = {"delegation": d["id"], "agent": agent, "scope": scope,
                   "expires_at": expires}
        # the read rules the agent's session reads under (D149): the audit says its reads
        # were scoped, and by what
        reads = scopes.scope_of_rules(list_rules_txn(conn, space.id),
                                      policy.Actor(p.user_id, role, agent), space.folders)
        if not reads.unrestricted:
            details["read_scope"] = {"rules": reads.describe(), "scope": reads.fingerprint}
        audit.record_space_txn(conn, space, at=now, action="delegation.create",
                               actor=p.actor(), details=details)
        token, _ = issue_access_token(key, aud=settings.url, user_id=p.user_id,
                                      device_id=p.device_id, jkt=jwk_thumbprint(dev.public_key),
                                      now_ms=now, ttl_s=ttl, delegation=d)
        return {"delegation": {"id": d["id"], "space": space.id, "space_name": space.name,
                               "agent": agent, "scope": scope, "expires_at": expires},
                "token": token}

    return store.run_write(txn)


def list_delegations(store: Store, p: Principal) -> dict[str, Any]:
    direct(p)
    with store.read() as conn:
        return {"delegations": list_delegations_txn(conn, user_id=p.user_id)}


def list_space_delegations(store: Store, p: Principal, space_ref: str) -> dict[str, Any]:
    """Every member's agent delegations in a space (space admins: they may revoke them)."""
    direct(p)
    with store.read() as conn:
        space, _ = space_access_txn(conn, p, space_ref, "admin")
        return {"space": space.id, "delegations": list_delegations_txn(conn,
                                                                       space_id=space.id)}


def revoke_delegation(store: Store, p: Principal, delegation_id: str, body: dict[str, Any],
                      now: int) -> dict[str, Any]:
    direct(p)

    def txn(conn: Any, dry_run: bool) -> dict[str, Any]:
        d = get_delegation_txn(conn, delegation_id) if is_id(delegation_id) else None
        space = role = None
        if d is not None:
            try:
                space, role = space_access_txn(conn, p, d.space_id, "viewer", lock=True)
            except (NotFound, Forbidden):
                space = None
        if d is None or space is None or (d.user_id != p.user_id and role != "admin"):
            raise NotFound(f"no delegation {delegation_id} you may manage")
        if d.revoked_at is not None:
            raise Forbidden("this delegation is already revoked",
                            {"reason": "delegation_revoked"})
        out = {"delegation": delegation_id, "agent": d.agent, "revoked": True}
        _finish(out, dry_run)
        revoke_delegation_txn(conn, delegation_id, now)
        audit.record_space_txn(conn, space, at=now, action="delegation.revoke",
                               actor=p.actor(), details=out)
        return out

    return _write(store, txn, _dry(body), "delegation.revoke")


# ---------------------------------------------------------------- audit


def audit_lines(store: Store, p: Principal, space_ref: str | None, since: int
                ) -> Iterator[bytes]:
    """NDJSON export: one event per line, then ``{"end": {"count", "names"}}``. Owners
    export every chain (or one space); a space admin exports that space's chain. ``names``:
    the display names of the users, devices, replicas and spaces the exported events name
    (actors, the ids in their details, the chains), for output that shows names instead of
    ids (D138); the events themselves keep every id, as the chain hashed them."""
    direct(p)
    with store.read(snapshot=True) as conn:
        chain = None
        if space_ref is not None:
            space, _ = space_access_txn(conn, p, space_ref, "admin")
            chain = space.id
        elif not p.is_owner:
            raise Forbidden("only hub owners export the whole audit; name a space you admin")
        n = 0
        ids: set[str] = set()
        for row in iter_audit_txn(conn, since, chain):
            n += 1
            ev = audit.row_to_event(row)
            if len(ids) < MAX_AUDIT_NAMES:
                ids.update(_named_ids(ev))
            yield (canonical_str(ev) + "\n").encode()
        names = names_txn(conn, ids)
        yield (canonical_str({"end": {"count": n, "names": names}}) + "\n").encode()


MAX_AUDIT_NAMES = 20_000  # ids named at the end of one export (members, devices, spaces)
_NAMED_KEYS = ("user", "user_id", "device", "device_id", "replica", "replica_id", "space")


def _named_ids(ev: dict[str, Any]) -> set[str]:
    """The ids an audit event names that have display names: its actor, its chain (a
    space) and the people, devices, replicas and spaces its details point to."""
    found = {ev["chain"]}
    for part in (ev.get("actor"), ev.get("details")):
        if isinstance(part, dict):
            found.update(str(part[k]) for k in _NAMED_KEYS if isinstance(part.get(k), str))
    return {i for i in found if is_id(i)}


def verify_audit(store: Store, p: Principal, space_ref: str | None) -> dict[str, Any]:
    events = []
    for line in audit_lines(store, p, space_ref, 0):
        import json

        obj = json.loads(line)
        if "end" not in obj:
            events.append(obj)
    ok, bad = audit.verify_events(events)
    return {"ok": ok, "events": len(events), "first_bad": bad}
