"""Identity and administration commands of ``quire`` (registered by ``replica/cli/main.py``):

    quire admin rules list|add|remove SPACE …      quire admin member list|role|remove SPACE …
    quire admin invite list|revoke …               quire admin devices list|revoke
    quire admin replicas list|revoke SPACE …       quire admin delegations list|revoke
    quire admin users deactivate USER_ID
    quire admin audit [--space S] [--since MS] [--json] [--verify]
    quire delegate create|list|revoke              quire devices approve CODE
    quire login URL [--device NAME]

Destructive verbs take ``--dry-run``: the hub runs every check and writes nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import socket
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from replica.machine.home import Home, HubConfig, private_dir
from shared.canonical import canonical_bytes
from shared.errors import (
    AuditUnverified,
    InvalidRequest,
    QuireError,
    Unauthorized,
    from_wire,
)

if TYPE_CHECKING:  # imported where used: every quire command loads this module
    from replica.hubclient.client import HubClient

AUDIT_GENESIS = "0" * 64
TTL_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _q(s: str) -> str:
    return quote(s, safe="")


def parse_ttl(text: str) -> int:
    """``90s``, ``30m``, ``8h``, ``1d`` or plain seconds."""
    text = text.strip().lower()
    unit = TTL_UNITS.get(text[-1:]) if text else None
    num = text[:-1] if unit else text
    if not num.isdigit():
        raise InvalidRequest(f"bad duration {text!r}: use e.g. 30m, 8h, 1d")
    return int(num) * (unit or 1)


# ---------------------------------------------------------------- audit verification (pure)


def audit_digest(ev: dict[str, Any]) -> str:
    body = {k: ev[k] for k in ("chain", "n", "at", "action", "actor", "details", "prev")}
    return hashlib.sha256(canonical_bytes(body)).hexdigest()


def verify_audit_events(events: list[dict[str, Any]]) -> tuple[bool, dict[str, Any] | None]:
    """The same check as the hub's ``hub/audit.verify_events``, done here so a person does
    not have to trust the hub that produced the export: every chain from n=1, linked."""
    tips: dict[str, tuple[int, str]] = {}
    for ev in events:
        n0, prev = tips.get(ev["chain"], (0, AUDIT_GENESIS))
        if ev["n"] != n0 + 1 or ev["prev"] != prev or ev["digest"] != audit_digest(ev):
            return False, ev
        tips[ev["chain"]] = (ev["n"], ev["digest"])
    return True, None


# ---------------------------------------------------------------- admin nouns


def _rows(out: Any, key: str, doc: dict[str, Any], columns: list[str], row: Any) -> None:
    """A list as an aligned table for people (replica/cli/humanout.py); --json: the document."""
    from replica.cli.humanout import table

    rows = doc.get(key, [])
    out.doc(doc, None if out.json else table(columns, [row(r) for r in rows],
                                             empty=f"no {key}"))


def _when(ms: Any) -> str:
    from shared.humanize import when

    return when(ms, never="")


def _state(r: dict[str, Any], now: int | None = None) -> str:
    """open / used / revoked / expired, for invites and delegations."""
    from shared.humanize import now_ms

    if r.get("revoked_at"):
        return "revoked " + _when(r["revoked_at"])
    if r.get("used_at"):
        return "used " + _when(r["used_at"])
    exp = r.get("expires_at")
    return "expired" if isinstance(exp, int) and exp <= (now or now_ms()) else "open"


def _done(out: Any, res: dict[str, Any], what: str) -> None:
    prefix = "would " if res.get("dry_run") else ""
    out.doc(res, f"{prefix}{what}" + (" (dry run: nothing changed)" if res.get("dry_run")
                                      else ""))


def _rule_line(r: dict[str, Any]) -> str:
    when = " when it weakens a guardrail" if r.get("when") == "weakens" else ""
    src = "  (default)" if r.get("source") == "default" else ""
    cond = "".join([f" of kind {','.join(r['kinds'])}" if r.get("kinds") else "",
                    f" tagged {','.join(r['tags'])}" if r.get("tags") else ""])
    rule_id = f"{r['id']}  " if r.get("id") else ""  # a rule not added yet has none
    return (f"{rule_id}{r.get('effect', 'deny')} {','.join(r['actions'])} for "
            f"{r['who']} on {r['entries']}{cond}{when}{src}")


def _who(d: dict[str, Any]) -> str:
    """A member, or their agent, by name (never an id)."""
    agent = d.get("agent")
    who = (f"the agents of {d['name']}" if agent == "*" else
           f"agent {agent} of {d['name']}" if agent else d["name"])
    return f"{who} ({d['role']})"


def _impact_lines(impact: list[dict[str, Any]]) -> list[str]:
    """A read rule's preview: who would stop or start reading what."""
    if not impact:
        return ["nobody would read anything more or less"]
    out = []
    for d in impact:
        for verb, n, sample in (("stop", d["loses"], d["loses_sample"]),
                                ("start", d["gains"], d["gains_sample"])):
            if n:
                more = f" and {n - len(sample)} more" if n > len(sample) else ""
                out.append(f"{_who(d)} would {verb} reading {n} entr"
                           f"{'y' if n == 1 else 'ies'}: {', '.join(sample)}{more}")
    return out


def _scope_lines(d: dict[str, Any]) -> str:
    """``quire admin scope show``: what this member or agent may read."""
    of = f" of {d['judged']}" if d.get("judged") is not None else ""
    lines = [f"{_who(d)} reads {d['readable']}{of} live "
             f"entr{'y' if d['readable'] == 1 and not of else 'ies'}"
             + (" (no read rule narrows it)" if d["unrestricted"] else "")]
    lines += [f"  rule: {r}" for r in d["rules"]]
    if d["hidden"]:
        more = d["hidden"] - len(d["hidden_sample"])
        lines.append(f"  not readable: {', '.join(d['hidden_sample'])}"
                     + (f" and {more} more" if more > 0 else ""))
    return "\n".join(lines)


def _kinds(args: argparse.Namespace, out: Any, c: HubClient) -> None:
    """``quire admin kinds show|set``: the space's folder mapping (hub/space_kinds.py)."""
    base = f"/v1/spaces/{_q(args.space)}/kinds"
    if args.verb == "show":
        res = c.admin_get(base)
    else:
        pairs = {}
        for pair in args.pairs:
            folder, sep, kind = pair.partition("=")
            if not sep or not folder.strip("/") or not kind:
                raise InvalidRequest(f"{pair!r}: write FOLDER=KIND, e.g. Skills/=skill")
            pairs[folder.strip("/")] = kind
        res = c.admin_post(base, {"kinds": pairs, "dry_run": bool(args.dry_run)})
    lines = [f"{folder}/ -> {kind}" for folder, kind in res["kinds"].items()] or [
        "no folder mapping: a first folder named like a kind (guardrail/, skill/) gives it"]
    if args.verb == "set":
        lines.append(("would change " if res.get("dry_run") else "changed ")
                     + (", ".join(f"{f}/" for f in res["changed"]) or "nothing")
                     + (" (dry run: nothing changed)" if res.get("dry_run") else ""))
        if "read_impact" in res:  # a dry run, and a read rule names kinds
            lines += _impact_lines(res["read_impact"])
    out.doc(res, "\n".join(lines))


def admin(args: argparse.Namespace, out: Any, c: HubClient, hub: HubConfig) -> bool:
    """Handle the identity admin nouns; False when the noun is not one of them."""
    noun, verb = args.noun, args.verb
    dry = {"dry_run": bool(getattr(args, "dry_run", False))}
    if noun == "rules":
        base = f"/v1/spaces/{_q(args.space)}/rules"
        if verb == "list":
            # the effective rules: the built-in typed defaults, then the space's own; a
            # rule about one member shows their name (its id stays in --json)
            people = {} if out.json else {
                p["user_id"]: p["name"] for p in c.admin_get(
                    f"/v1/spaces/{_q(args.space)}/people").get("people") or []}
            _rows(out, "effective", c.admin_get(base),
                  ["id", "effect", "actions", "who", "entries", "when", "source"],
                  lambda r: [r["id"], r.get("effect", "deny"), ",".join(r["actions"]),
                             people.get(r["who"], r["who"]), r["entries"],
                             r.get("when") or "", r.get("source", "space")])
        elif verb == "add":
            effect = "allow" if args.allow else "deny"
            body: dict[str, Any] = {
                "effect": effect, "who": args.who, "entries": args.entries,
                "actions": [a.strip() for a in (args.allow or args.deny).split(",")
                            if a.strip()], **dry}
            for field in ("kinds", "tags"):  # a read rule's conditions
                if getattr(args, field, None):
                    body[field] = [x.strip() for x in getattr(args, field).split(",")
                                   if x.strip()]
            res = c.admin_post(base, body)
            said = ("would add" if res.get("dry_run") else "added") + \
                f" rule {_rule_line(res['rule'])}"
            if "read_impact" in res:
                said += "\n" + "\n".join(_impact_lines(res["read_impact"]))
            out.doc(res, said + ("\n(dry run: nothing changed)" if res.get("dry_run") else ""))
        else:
            res = c.admin_post(f"{base}/{_q(args.rule)}/remove", dry)
            extra = ("\n" + "\n".join(_impact_lines(res["read_impact"]))
                     if "read_impact" in res else "")
            _done(out, res, f"removed rule {args.rule}{extra}")
    elif noun == "kinds":
        _kinds(args, out, c)
    elif noun == "scope":
        asked = {k: v for k, v in (("who", args.who), ("as", getattr(args, "as_user", None)))
                 if v}
        res = c.admin_get(f"/v1/spaces/{_q(args.space)}/scope", asked or None)
        out.doc(res, _scope_lines(res))
    elif noun == "member":
        base = f"/v1/spaces/{_q(args.space)}/members"
        if verb == "list":
            _rows(out, "members", c.admin_get(base), ["user", "role", "name", "active"],
                  lambda m: [m["user_id"], m["role"], m["name"],
                             "yes" if m.get("active", True) else "no"])
        elif verb == "role":
            res = c.admin_post(f"{base}/{_q(args.user)}/role", dict(dry, role=args.role))
            _done(out, res, f"set role of {args.user} to {args.role}")
        else:
            res = c.admin_post(f"{base}/{_q(args.user)}/remove", dry)
            _done(out, res, f"removed {args.user} from {args.space}")
    elif noun == "invite" and verb == "list":
        _rows(out, "invites", c.admin_get(f"/v1/spaces/{_q(args.space)}/invites"),
              ["id", "for", "role", "expires", "state"],
              lambda i: [i["id"], i.get("name") or "", i["role"], _when(i["expires_at"]),
                         _state(i)])
    elif noun == "invite" and verb == "revoke":
        res = c.admin_post(f"/v1/invites/{_q(args.invite)}/revoke", dry)
        _done(out, res, f"revoked invite {args.invite}")
    elif noun == "devices":
        if verb == "list":
            params = {"all": "1"} if args.all else None
            _rows(out, "devices", c.admin_get("/v1/devices", params),
                  ["id", "name", "user", "state"],
                  lambda d: [d["id"], d["name"] + (" (this device)" if d.get("current") else ""),
                             d["user_name"], _state(d) if d["revoked_at"] else "active"])
        else:
            res = c.admin_post(f"/v1/devices/{_q(args.device)}/revoke", dry)
            _done(out, res, f"revoked device {args.device}")
    elif noun == "users" and verb == "name":
        res = c.admin_post(f"/v1/users/{_q(args.user)}/name", dict(dry, name=args.name))
        _done(out, res, f"renamed {res['user_id']} from {res['previous']!r} to {res['name']!r}")
    elif noun == "users":
        res = c.admin_post(f"/v1/users/{_q(args.user)}/deactivate", dry)
        _done(out, res, f"deactivated user {args.user}")
    elif noun == "replicas":
        base = f"/v1/spaces/{_q(args.space)}/replicas"
        if verb == "list":
            _rows(out, "replicas", c.admin_get(base), ["id", "name", "device", "state"],
                  lambda r: [r["id"], r["name"], r["device_name"],
                             _state(r) if r["revoked_at"] else "active"])
        else:
            res = c.admin_post(f"{base}/{_q(args.replica)}/revoke", dry)
            _done(out, res, f"revoked replica {args.replica}")
    elif noun == "delegations":
        if verb == "list":
            _list_delegations(out, c)
        else:
            res = c.admin_post(f"/v1/delegations/{_q(args.delegation)}/revoke", dry)
            _done(out, res, f"revoked delegation {args.delegation}")
    elif noun == "audit":
        _audit(args, out, c, hub)
    else:
        return False
    return True


def epoch_text(space: str, res: dict[str, Any]) -> str:
    """``quire admin epoch bump`` for people: what happened (or would), and its impact."""
    imp = res.get("impact") or {}
    left = imp.get("history_left") or {}
    reps = imp.get("replicas_resnapshot") or []
    # epochs and replicas by what people know them by, never their ids (--json has them)
    lines = [f"dry run: nothing changed; the current epoch of {space} would end"
             if res.get("dry_run") else f"{space} is in a new epoch (the previous one ended)",
             f"  history left behind: {left.get('batches', 0)} batch(es) of the previous "
             "epoch",
             f"  entries carried into the new epoch: {imp.get('entries_carried', 0)}",
             f"  replicas that take a snapshot on their next sync: {len(reps)}"]
    lines += [f"    {r['name']} ({r['device_name']})" for r in reps]
    lines.append("  members who lose access: none (members, roles and devices stay)")
    return "\n".join(lines)


def _list_delegations(out: Any, c: HubClient) -> None:
    _rows(out, "delegations", c.admin_get("/v1/delegations"),
          ["id", "agent", "scope", "space", "expires", "state"],
          lambda d: [d["id"], d["agent"], d["scope"], d["space_name"], _when(d["expires_at"]),
                     _state(d)])


def _audit(args: argparse.Namespace, out: Any, c: HubClient, hub: HubConfig) -> None:
    if args.verify:
        _verify_audit(args, out, c, hub)
        return
    names: dict[str, str] = {}
    events = list(c.audit(args.space, int(args.since or 0), names))
    if out.json:
        for ev in events:  # JSON lines: one event per line
            print(json.dumps(ev, ensure_ascii=False, sort_keys=True), flush=True)
        return
    for ev in events:
        print(audit_line(ev, names))


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# details worth a person's eye, in this order; ids among them are shown by name or left out
_DETAIL_KEYS = ("role", "name", "previous", "agent", "scope", "reason", "entries", "seq",
                "epoch_reason", "user", "user_id", "device", "replica", "space", "email")


def audit_line(ev: dict[str, Any], names: dict[str, str]) -> str:
    """One audit event for people: local time, where (the space's name, or ``hub``) and
    its number in that chain, the action, who (display name, the agent on their behalf, the
    device by name) and its details with names for ids; never an id (``--json`` keeps the
    events as exported). An id the hub could not name (an invite, a batch) is left out."""
    from shared.humanize import stamp
    from shared.ids import is_id

    def shown(v: Any) -> str | None:
        if isinstance(v, str) and is_id(v):
            return names.get(v)
        if isinstance(v, list):
            parts = [p for p in (shown(x) for x in v[:5]) if p]
            return ", ".join(parts) + (f" and {len(v) - 5} more" if len(v) > 5 else "") \
                if parts else None
        if isinstance(v, (str, int)) and not isinstance(v, bool):
            return _CONTROL.sub("", str(v))[:80]
        return None

    chain = ev.get("chain")
    where = "hub" if chain == "hub" else names.get(str(chain), "a space")
    raw_actor, raw_details = ev.get("actor"), ev.get("details")
    actor: dict[str, Any] = raw_actor if isinstance(raw_actor, dict) else {}
    if actor.get("user"):
        who = names.get(str(actor["user"]), "a member")
        if actor.get("agent"):
            who += f" for agent {_CONTROL.sub('', str(actor['agent']))[:64]}"
        if actor.get("device") and names.get(str(actor["device"])):
            who += f" ({names[str(actor['device'])]})"
    elif actor.get("system"):
        who = f"system ({_CONTROL.sub('', str(actor['system']))[:40]})"
    else:
        who = "anonymous"
    details: dict[str, Any] = raw_details if isinstance(raw_details, dict) else {}
    said = [f"{k} {v}" for k in _DETAIL_KEYS if k in details
            and (v := shown(details[k])) is not None]
    return (f"{stamp(ev['at'], seconds=True)}  {where}#{ev['n']:<5} {ev['action']:20} {who}"
            + (f"  ({'; '.join(said)})" if said else ""))


def _verify_audit(args: argparse.Namespace, out: Any, c: HubClient, hub: HubConfig) -> None:
    """The chain links from n=1, and it holds every audit tip the hub key signed that this
    home kept (replica/trust/audit_tips.py): deleting the last events, or editing one and
    rehashing the rest, is caught up to the newest kept tip."""
    from replica.store.store import Store
    from replica.trust import audit_tips as auditcheck

    home = Home(hub.dir.parent.parent)
    stores = []
    for sp in home.spaces():
        if sp.hub_id == hub.hub_id and sp.store_path.exists() and (
                args.space is None or args.space in (sp.space_id, sp.name)):
            st = Store(sp.store_path)
            try:
                stores.append((sp.space_id, st.get_meta(auditcheck.AUDIT_TIPS)))
            finally:
                st.close()
    tips = auditcheck.kept_tips(hub.dir, c.hub_keys, stores)
    # fresh signed heads, asked for before the export: an honest export holds their tips
    names = [args.space] if args.space else [s["id"] for s in c.spaces()]
    fresh = [c.head(n)["signed"] for n in names]
    for h in fresh:
        tips += auditcheck.tips_of(h, "the hub's current head")
    events = list(c.audit(args.space, 0))
    _, bad = verify_audit_events(events)
    if bad is not None:  # the first event that does not verify
        raise AuditUnverified(f"audit chain does not verify at {bad['chain']} n={bad['n']}",
                              {"first_bad": bad, "events": len(events)})
    chains = {h.space for h in fresh} if args.space else None
    checked = auditcheck.check_events(events, tips, chains)
    auditcheck.save(hub.dir, fresh)
    doc = {"ok": True, "events": len(events), "first_bad": None, "signed_tips": checked}
    out.doc(doc, f"audit chain verifies: {len(events)} event(s), {checked} signed tip(s) "
                 "held")


def add_admin_parsers(nouns: Any, common: argparse.ArgumentParser, parser_class: Any) -> None:
    def verbs(name: str, help: str) -> Any:
        v = nouns.add_parser(name, parents=[common], help=help).add_subparsers(
            dest="verb", metavar="VERB", parser_class=parser_class)
        v.required = True
        return v

    def dry(p: Any) -> Any:
        p.add_argument("--dry-run", action="store_true",
                       help="run every check on the hub, change nothing")
        return p

    r = verbs("rules", "allow and deny rules of a space (effective rules: defaults included)")
    r.add_parser("list", parents=[common],
                 help="the effective rules, built-in defaults first").add_argument(
                     "space", metavar="SPACE")
    ra = r.add_parser("add", parents=[common], help="add an allow or a deny rule")
    ra.add_argument("space", metavar="SPACE")
    eff = ra.add_mutually_exclusive_group(required=True)
    eff.add_argument("--deny", metavar="ACTIONS", help="create,update,delete, or read")
    eff.add_argument("--allow", metavar="ACTIONS",
                     help="create,update,delete (e.g. relax the guardrail default), or read")
    ra.add_argument("--who", required=True,
                    help="viewer|editor|admin, a user id, agents (every agent) or agent:NAME "
                         "(one agent); a role's or user's allow never reaches their agents")
    ra.add_argument("--entries", required=True, metavar="GLOB", help="e.g. 'guardrail/*'")
    ra.add_argument("--kinds", metavar="KINDS", help="a read rule: only entries of these "
                    "kinds (comma-separated)")
    ra.add_argument("--tags", metavar="TAGS", help="a read rule: only entries holding one of "
                    "these tags (comma-separated)")
    dry(ra)

    k = verbs("kinds", "the space's folder mapping: which folder gives its files which kind")
    k.add_parser("show", parents=[common], help="the folder mapping").add_argument(
        "space", metavar="SPACE")
    ks = dry(k.add_parser("set", parents=[common], help="replace the folder mapping (none: "
                          "the default layout); admins"))
    ks.add_argument("space", metavar="SPACE")
    ks.add_argument("pairs", nargs="*", metavar="FOLDER=KIND", help="e.g. Skills/=skill")

    sc = verbs("scope", "what a member or an agent may read (read rules)")
    ss = sc.add_parser("show", parents=[common], help="the read rules that apply and the "
                       "entries in and out of scope")
    ss.add_argument("space", metavar="SPACE")
    ss.add_argument("--who", metavar="USER_ID|agent:NAME",
                    help="a member (default: you), or an agent (with --as)")
    ss.add_argument("--as", dest="as_user", metavar="USER_ID",
                    help="the member an agent acts for")
    rr = dry(r.add_parser("remove", parents=[common]))
    rr.add_argument("space", metavar="SPACE")
    rr.add_argument("rule", metavar="RULE_ID")

    m = verbs("member", "members of a space")
    m.add_parser("list", parents=[common]).add_argument("space", metavar="SPACE")
    mr = dry(m.add_parser("role", parents=[common], help="set a member's role"))
    mr.add_argument("space", metavar="SPACE")
    mr.add_argument("user", metavar="USER_ID")
    mr.add_argument("role", choices=["viewer", "editor", "admin"])
    mm = dry(m.add_parser("remove", parents=[common]))
    mm.add_argument("space", metavar="SPACE")
    mm.add_argument("user", metavar="USER_ID")

    d = verbs("devices", "devices (yours; --all for owners)")
    d.add_parser("list", parents=[common]).add_argument("--all", action="store_true")
    dry(d.add_parser("revoke", parents=[common])).add_argument("device", metavar="DEVICE_ID")

    us = verbs("users", "users of the hub: display names; deactivation (owners)")
    un = dry(us.add_parser("name", parents=[common],
                           help="set a member's display name (yours: me; admins: a member "
                                "of a space they admin)"))
    un.add_argument("user", metavar="USER_ID|me")
    un.add_argument("name", metavar="NAME")
    dry(us.add_parser("deactivate", parents=[common],
                      help="revoke a user on every device")).add_argument("user",
                                                                          metavar="USER_ID")

    rp = verbs("replicas", "replicas of a space")
    rp.add_parser("list", parents=[common]).add_argument("space", metavar="SPACE")
    rv = dry(rp.add_parser("revoke", parents=[common]))
    rv.add_argument("space", metavar="SPACE")
    rv.add_argument("replica", metavar="REPLICA_ID")

    dl = verbs("delegations", "agent delegations")
    dl.add_parser("list", parents=[common])
    dry(dl.add_parser("revoke", parents=[common])).add_argument("delegation",
                                                                metavar="DELEGATION_ID")

    au = nouns.add_parser("audit", parents=[common], help="export or verify the audit chain")
    au.add_argument("--space", metavar="SPACE", help="one space's chain (space admins)")
    au.add_argument("--since", metavar="MS", help="events at or after (Unix ms)")
    au.add_argument("--verify", action="store_true", help="verify every chain, fully")
    au.set_defaults(verb="export")


def add_invite_verbs(inv: Any, common: argparse.ArgumentParser) -> None:
    inv.add_parser("list", parents=[common]).add_argument("space", metavar="SPACE")
    rv = inv.add_parser("revoke", parents=[common])
    rv.add_argument("invite", metavar="INVITE_ID")
    rv.add_argument("--dry-run", action="store_true")


# ---------------------------------------------------------------- delegate, devices, login


def cmd_delegate(args: argparse.Namespace, out: Any, client: Any) -> int:
    with client as c:
        if args.verb == "create":
            res = c.admin_post("/v1/delegations", {
                "space": args.space, "agent": args.agent,
                "scope": "write" if args.write else "read",
                "ttl_seconds": parse_ttl(args.ttl)})
            d = res["delegation"]
            out.doc(res, f"delegation {d['id']} for agent {d['agent']} ({d['scope']}) on "
                         f"{d['space_name']}, expires {_when(d['expires_at'])}\n"
                         f"give the agent: QUIRE_DELEGATION_TOKEN={res['token']}")
        elif args.verb == "list":
            _list_delegations(out, c)
        else:
            res = c.admin_post(f"/v1/delegations/{_q(args.delegation)}/revoke",
                               {"dry_run": args.dry_run})
            _done(out, res, f"revoked delegation {args.delegation}")
    return 0


class ConfirmationNeeded(QuireError):
    """``quire devices approve`` where nobody can answer its question: exit 2 (usage)."""

    code = "usage"
    status = 0


def approval_text(seen: dict[str, Any]) -> str:
    """What ``quire devices approve`` shows before asking (the hub's preview)."""
    name = seen.get("device_name")
    lines = ["A new machine asks to become a device of yours, with access to every space "
             "you are in:",
             f"  code:          {seen.get('user_code')}  (the code the new machine shows: "
             "compare them)",
             f"  name:          {seen.get('requested_name')!r}"]
    if seen.get("renamed"):
        lines.append(f"                 you already have a device {seen.get('like')!r}: this "
                     f"one will be {name!r}")
    lines += [f"  requested from {seen.get('requested_from') or 'an unknown address'}, "
              f"{_when(seen.get('requested_at'))}",
              f"  the code expires {_when(seen.get('expires_at'))}",
              "Approve only a machine you are at yourself, never one someone asked you to."]
    return "\n".join(lines)


def _confirmed(args: argparse.Namespace, out: Any, text: str) -> bool:
    if args.yes:
        return True
    import sys

    if out.json or not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise ConfirmationNeeded(
            "approving a device needs a confirmation: run 'quire devices approve CODE' on a "
            "terminal, or add --yes once you checked the name, address and time "
            "(quire devices approve CODE --yes)", {"reason": "confirmation_required"})
    out.say(text)
    try:
        answer = input("Approve this device? [y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def cmd_devices(args: argparse.Namespace, out: Any, client: Any) -> int:
    """Show the pending device login (name, address, time, code), ask, then approve."""
    from replica.cli import exitcodes

    with client as c:
        seen = c.admin_post("/v1/device/preview", {"user_code": args.code})
        text = approval_text(seen)
        if not _confirmed(args, out, text):
            out.doc(dict(seen, approved=False), "not approved: nothing changed")
            return exitcodes.ERROR
        res = c.admin_post("/v1/device/approve", {"user_code": args.code})
    shown = "" if not args.yes or out.json else text + "\n"
    out.doc(res, f"{shown}approved: {res.get('device_name')!r} is now a device of yours "
                 "(revoke it with 'quire admin devices revoke DEVICE_ID' if it is not yours)")
    return 0


def _refused(known: HubConfig, public_key: str) -> bool:
    """Does the hub refuse this machine's current device credential (revoked device,
    revoked login, unknown device)? False when it has none or the hub accepts it."""
    from replica.hubclient.auth import auth_for
    from replica.hubclient.client import HubClient
    from replica.machine.credentials import CredentialFile

    creds = CredentialFile(known.credential_path, known.key_path)
    auth = auth_for(known.key_path, creds)
    if auth is None:
        return False
    try:
        with HubClient(known.url, auth=auth, hub_key=public_key) as c:
            c.spaces()
    except Unauthorized:
        return True
    return False


def cmd_login(args: argparse.Namespace, out: Any, home: Home) -> int:
    """RFC 8628 on the new machine: show a code, poll until a signed-in device approves."""
    from replica.app.service import describe_hub, hub_url
    from replica.hubclient.client import HubClient
    from replica.machine.credentials import CredentialFile
    from shared.dpop import make_proof
    from shared.signing import load_private, new_private_key, public_b64, save_private

    url = hub_url(args.url)
    with HubClient(url) as anon:
        info, hub_id, public_key = describe_hub(url)
        htu_base = str(info.get("url") or url).rstrip("/")
        known = home.hub(hub_id)
        if known is not None:  # a rotated key is followed; any other is refused
            from replica.app.service import follow_pin

            follow_pin(known, public_key)
        hub_dir = home.hub_dir(hub_id)
        private_dir(hub_dir)  # 0700 up to the home folder, whatever the umask
        key_path = hub_dir / "device.pem"
        if key_path.exists() and known is not None and _refused(known, public_key):
            # this device was revoked (or its login is otherwise refused for good): its key
            # can never sign in again, so this login makes a new device; the old key is kept
            # aside, and the next sync re-registers the space replicas (replica/app/rejoin.py)
            key_path.rename(hub_dir / f"device-{known.device_id or 'old'}.pem.refused")
        if key_path.exists():
            key = load_private(key_path)
        else:
            key = new_private_key()
            save_private(key, key_path)
        device_name = args.device or socket.gethostname()[:100] or "device"
        status, start = anon.grant({"device_name": device_name,
                                    "device_key": public_b64(key)}, "/v1/device/code",
                                   make_proof(key, "POST", htu_base + "/v1/device/code"))
        if status >= 400:
            raise from_wire(status, start)
        out.say(f"To approve this machine, run on a signed-in device:\n\n"
                f"    quire devices approve {start['user_code']}\n\n"
                f"(the code expires in {start['expires_in'] // 60} minutes; waiting …)")
        if out.json and args.print_code:
            print(json.dumps({"user_code": start["user_code"]}), flush=True)
        interval = max(1, int(start.get("interval", 5)))
        deadline = time.monotonic() + int(start["expires_in"])
        while True:
            time.sleep(interval if not args.poll_fast else 0.5)
            path = "/v1/token"
            status, res = anon.grant(
                {"grant_type": "urn:ietf:params:oauth:grant-type:device_code",
                 "device_code": start["device_code"]}, path,
                make_proof(key, "POST", htu_base + path))
            if status == 200:
                break
            err = (res or {}).get("error", {}) if isinstance(res, dict) else {}
            if err.get("code") == "authorization_pending" and time.monotonic() < deadline:
                continue
            if err.get("code") == "rate_limited":
                interval += 5  # RFC 8628 slow_down
                continue
            raise from_wire(status, res) if err.get("code") != "authorization_pending" else \
                Unauthorized("the login code expired before it was approved")
    # the name the approval gave (another if the member already has a device like it)
    device_name = res.get("device_name") or device_name
    hub = HubConfig(hub_id, url, public_key, info.get("key_id"), res.get("user_id"),
                    res.get("device_id"), device_name, hub_dir,
                    *((known.key_history, known.key_chain) if known else ()))
    hub.save()
    CredentialFile(hub.credential_path, key_path).save_grant(res, htu_base)
    out.doc({"hub": {"id": hub_id, "url": url}, "user_id": hub.user_id,
             "device_id": hub.device_id},
            f"this machine is now signed in to {url} as device {device_name!r}; join spaces "
            f"with 'quire join {url} --invite CODE'")
    return 0


def add_parsers(sub: Any, common: argparse.ArgumentParser, parser_class: Any) -> None:
    dg = sub.add_parser("delegate", parents=[common], help="tokens for agents on this device")
    dv = dg.add_subparsers(dest="verb", metavar="VERB", parser_class=parser_class)
    dv.required = True
    dc = dv.add_parser("create", parents=[common], help="mint a token for an agent")
    dc.add_argument("--space", required=True, metavar="SPACE")
    dc.add_argument("--agent", required=True, metavar="NAME")
    dc.add_argument("--write", action="store_true", help="may publish (default: read only)")
    dc.add_argument("--ttl", default="8h", help="lifetime, at most 24h (default 8h)")
    dc.add_argument("--hub", metavar="URL")
    dl = dv.add_parser("list", parents=[common])
    dl.add_argument("--hub", metavar="URL")
    dr = dv.add_parser("revoke", parents=[common])
    dr.add_argument("delegation", metavar="DELEGATION_ID")
    dr.add_argument("--dry-run", action="store_true")
    dr.add_argument("--hub", metavar="URL")

    de = sub.add_parser("devices", parents=[common], help="approve a new machine's login")
    dev = de.add_subparsers(dest="verb", metavar="VERB", parser_class=parser_class)
    dev.required = True
    ap = dev.add_parser("approve", parents=[common], help="approve the code 'quire login' shows")
    ap.add_argument("code", metavar="CODE")
    ap.add_argument("--yes", action="store_true",
                    help="approve without asking (scripts: check the name and address first)")
    ap.add_argument("--hub", metavar="URL")

    lg = sub.add_parser("login", parents=[common],
                        help="sign this machine in as a second device of a member (RFC 8628)")
    lg.add_argument("url", help="the hub's URL")
    lg.add_argument("--device", metavar="NAME", help="this device's name (default: host name)")
    lg.add_argument("--print-code", action="store_true",
                    help="with --json, print the user code as a first JSON line")
    lg.add_argument("--poll-fast", action="store_true", help=argparse.SUPPRESS)


def error_of(e: QuireError) -> dict[str, Any]:
    return {"code": e.code, "message": e.message, "details": e.details}
