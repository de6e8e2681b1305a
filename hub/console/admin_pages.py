"""The console's administration pages, under /console/admin (a space's admins; hub owners).

Every handler calls the function the API handler for the same action calls (hub/admin.py,
hub/spaces.py), with the browser's ``Principal``: the access checks, the audit and the
refusals are the API's, and nothing here reads or writes the database itself.

Every change is two POSTs. The first (the form's button) runs the API function with
``dry_run``: every check runs, nothing is written, and the page shows what would happen (a
role change: what the member gains and loses; an epoch bump: the head left behind and the
replicas and agents that must take a snapshot) with a Confirm button. Only the second POST,
carrying ``confirm=yes``, changes anything. Both pass the Origin and CSRF checks first
(``http.checked_form``).

    GET  spaces/{s}/rules                      effective rules + "what may X change" preview
    GET  spaces/{s}/scope[?user&agent]         what each member (or agent) may read
                                               (hub/console/scope_pages.py)
    GET  spaces/{s}/access                     replicas and agent delegations, with revoke
    GET  spaces/{s}/epoch                      the current epoch and the reason form
    GET  spaces/{s}/audit[?actor&action&since&until]   events, chain verification
    GET  spaces/{s}/audit.jsonl[?same filters] the filtered events as JSON lines
    GET  audit, audit.jsonl                    the same over every chain (hub owners)
    POST spaces/{s}/members/{user}/role        preview, then change a member's role
    POST spaces/{s}/invites/{invite}/revoke    preview, then revoke an invite
    POST spaces/{s}/rules/{rule}/remove        preview, then remove a space rule
    POST spaces/{s}/replicas/{replica}/revoke  preview, then revoke a replica
    POST spaces/{s}/delegations/{id}/revoke    preview, then revoke an agent's delegation
    POST spaces/{s}/epoch                      impact preview, then bump the epoch
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Mount, Route

from hub import admin, reads, spaces
from hub import scope as scopes
from hub.api.http import hub_of
from hub.console import preview, scope_pages
from hub.console.http import (
    HEADERS,
    call,
    checked_form,
    moment,
    page,
    redirect,
    signed_in,
    space_of,
)
from shared.canonical import canonical_str
from shared.errors import InvalidRequest, NotFound
from shared.humanize import stamp
from shared.ids import is_id
from shared.kinds import effective_kind

AUDIT_SHOWN = 200  # events listed on the audit page (newest first); the export has them all


def _confirmed(form: dict[str, str]) -> bool:
    return form.get("confirm") == "yes"


def _members_url(ref: str) -> str:
    return f"/console/spaces/{ref}/members"


def _confirm(request: Request, p: Any, sp: dict[str, Any], role: str, *, title: str,
             intro: str, fields: dict[str, str], button: str, back: str,
             facts: list[tuple[str, Any]] | None = None,
             lists: list[tuple[str, list[str]]] | None = None) -> Response:
    """The preview page: what would happen, and a form that repeats the POST confirmed."""
    return page(request, "confirm.html", me=p, space=sp, role=role, title=title, intro=intro,
                action=request.url.path, fields=fields, button=button, back=back,
                facts=facts or [], lists=[(t, items) for t, items in lists or [] if items])


# ---------------------------------------------------------------- members and invites


@signed_in
async def role_change(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    form = await checked_form(request)
    ref, sp, role = await space_of(request, p)
    user = request.path_params["user"]
    body = {"role": form.get("role", ""), "dry_run": not _confirmed(form)}
    out = await call(admin.set_role, hub.store, p, ref, user, body, hub.now())
    if not out["dry_run"]:
        hub.access_changed(sp["id"])
        return redirect(_members_url(ref), done="role_changed")
    rules = await call(admin.list_rules, hub.store, p, ref)
    members = await call(admin.list_members, hub.store, p, ref)
    name = next((m["name"] for m in members["members"] if m["user_id"] == user), user)
    impact = preview.role_impact(rules["effective"], user, out["previous"], out["role"])
    return _confirm(
        request, p, sp, role, title=f"Change {name}'s role", button="Confirm role change",
        intro=f"{name} is {out['previous']} in {sp['name']}; this makes them {out['role']}. "
              "Nothing has changed yet.",
        fields={"role": out["role"]}, back=_members_url(ref),
        lists=[("They would gain", impact["gains"]), ("They would lose", impact["loses"]),
               ("Rules that would start to apply to them", impact["rules_start"]),
               ("Rules that would stop applying to them", impact["rules_stop"])],
        facts=[("Rules that apply to them afterwards",
                len(impact["rules_after"]) or "none")])


@signed_in
async def invite_revoke(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    form = await checked_form(request)
    ref, sp, role = await space_of(request, p)
    inv = request.path_params["invite"]
    out = await call(admin.revoke_invite, hub.store, p, inv,
                     {"dry_run": not _confirmed(form)}, hub.now())
    if not out["dry_run"]:
        return redirect(_members_url(ref), done="invite_revoked")
    found = await call(admin.list_invites, hub.store, p, ref)
    it: dict[str, Any] = next((i for i in found["invites"] if i["id"] == inv), {})
    return _confirm(request, p, sp, role, title="Revoke an invite", button="Confirm revoke",
                    intro="Whoever holds this invite's code can no longer join with it.",
                    fields={}, back=_members_url(ref),
                    facts=[("Role it grants", it.get("role", "?")),
                           ("Created", moment(it.get("created_at"), never="unknown")),
                           ("Expires", moment(it.get("expires_at"), never="unknown"))])


# ---------------------------------------------------------------- rules


@signed_in
async def rules_page(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    ref, sp, role = await space_of(request, p)
    rules = await call(admin.list_rules, hub.store, p, ref)
    members = (await call(admin.list_members, hub.store, p, ref))["members"]
    qp = request.query_params
    result = None
    if qp.get("entry"):
        user = qp.get("user", "")
        who = next((m for m in members if m["user_id"] == user), None)
        if who is None:
            raise InvalidRequest("choose a member of this space")
        agent = (qp.get("agent") or "").strip() or None
        if agent is not None and not admin.AGENT.match(agent):
            raise InvalidRequest("agent must be 1-64 of letters, digits, '_.@:-'")
        entry = reads.parse_entry_id(qp.get("entry"))
        try:  # a live entry's own kind (front matter first, D139), else its path's
            live = (await call(reads.get_entry, hub.store, p, ref, entry))["entry"]
            kind: str | None = effective_kind(entry, live.get("meta"))
        except NotFound:
            kind = None
        result = dict(preview.what_may_change(rules["effective"], user, who["role"], agent,
                                              entry, kind), name=who["name"])
        # and what they may read (read rules, hub/scope.py), as the API's scope answers
        result["scope"] = await call(scopes.show_scope, hub.store, p, ref,
                                     f"agent:{agent}" if agent else user, user, entry)
    return page(request, "rules.html", me=p, space=sp, role=role, rules=rules["rules"],
                names={m["user_id"]: m["name"] for m in members},
                effective=rules["effective"], members=members, result=result,
                qp=dict(qp))


@signed_in
async def rule_remove(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    form = await checked_form(request)
    ref, sp, role = await space_of(request, p)
    out = await call(admin.remove_rule, hub.store, p, ref, request.path_params["rule"],
                     {"dry_run": not _confirmed(form)}, hub.now())
    back = f"/console/admin/spaces/{ref}/rules"
    if not out["dry_run"]:
        hub.access_changed(sp["id"])
        return redirect(back, done="rule_removed")
    r = out["rule"]
    who = (await call(reads.names, hub.store, p, ref, {r["who"]})).get(r["who"], r["who"])
    return _confirm(request, p, sp, role, title="Remove a rule", button="Confirm remove",
                    intro="Publications prepared under the current rules are re-checked "
                          "under the new ones.", fields={}, back=back,
                    facts=[("Rule", f"{r['effect']} {who} {', '.join(r['actions'])} "
                                    f"on {r['entries']}")],
                    lists=preview.read_impact_section(out))


# ---------------------------------------------------------------- replicas and agents


@signed_in
async def access_page(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    ref, sp, role = await space_of(request, p)
    dels = await call(admin.list_space_delegations, hub.store, p, ref)
    reps = await call(admin.list_replicas, hub.store, p, ref)
    members = await call(admin.list_members, hub.store, p, ref)
    names = {m["user_id"]: m["name"] for m in members["members"]}
    names.update(await call(reads.names, hub.store, p, ref, {
        r["user_id"] for r in reps["replicas"] + dels["delegations"]} - set(names)))
    return page(request, "access.html", me=p, space=sp, role=role, names=names,
                replicas=reps["replicas"], delegations=dels["delegations"], now=hub.now())


@signed_in
async def replica_revoke(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    form = await checked_form(request)
    ref, sp, role = await space_of(request, p)
    out = await call(admin.revoke_replica, hub.store, p, ref, request.path_params["replica"],
                     {"dry_run": not _confirmed(form)}, hub.now())
    back = f"/console/admin/spaces/{ref}/access"
    if not out["dry_run"]:
        hub.access_changed(sp["id"])
        return redirect(back, done="replica_revoked")
    device = (await call(reads.names, hub.store, p, ref, {out["device_id"]})).get(
        out["device_id"], "a removed device")
    return _confirm(request, p, sp, role, title="Revoke a replica", button="Confirm revoke",
                    intro="The replica can no longer pull or publish here; its owner must "
                          "join again.", fields={}, back=back,
                    facts=[("Replica", out["name"]), ("Device", device)])


@signed_in
async def delegation_revoke(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    form = await checked_form(request)
    ref, sp, role = await space_of(request, p)
    out = await call(admin.revoke_delegation, hub.store, p,
                     request.path_params["delegation"], {"dry_run": not _confirmed(form)},
                     hub.now())
    back = f"/console/admin/spaces/{ref}/access"
    if not out["dry_run"]:
        hub.access_changed(sp["id"])
        return redirect(back, done="delegation_revoked")
    return _confirm(request, p, sp, role, title="Revoke an agent's delegation",
                    button="Confirm revoke", intro="The agent's token stops working on its "
                    "next request; its in-flight publications are refused.", fields={},
                    back=back, facts=[("Agent", out["agent"])])


# ---------------------------------------------------------------- epochs


@signed_in
async def epoch_page(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    ref, sp, role = await space_of(request, p)
    await call(admin.list_members, hub.store, p, ref)  # the admin check, as the bump's
    return page(request, "epoch.html", me=p, space=sp, role=role)


@signed_in
async def epoch_bump(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    form = await checked_form(request)
    ref, sp, role = await space_of(request, p)
    body = {"reason": form.get("reason", "")}
    dry = not _confirmed(form)
    out = await call(spaces.bump_epoch, hub.store, p, ref, body, hub.now(), hub.key,
                     dry_run=dry)
    if not dry:
        hub.epoch_changed(out)
        return redirect(f"/console/spaces/{ref}", done="epoch_bumped")
    reps = await call(admin.list_replicas, hub.store, p, ref)
    dels = await call(admin.list_space_delegations, hub.store, p, ref)
    live = [f"{r['name']} on {r['device_name']}" for r in reps["replicas"]
            if r["revoked_at"] is None]
    agents = [f"{d['agent']} ({d['scope']})" for d in dels["delegations"]
              if d["revoked_at"] is None and d["expires_at"] > hub.now()]
    return _confirm(
        request, p, sp, role, title=f"Start a new epoch in {sp['name']}",
        button="Confirm epoch bump", back=f"/console/admin/spaces/{ref}/epoch",
        intro="History restarts at seq 0. Every replica is told (epoch_changed), takes a "
              "snapshot of the new epoch and replays its local changes; publications made "
              "in the old epoch are refused. Nothing has changed yet.",
        fields={"reason": body["reason"]},
        facts=[("Reason", body["reason"]),
               ("Changes (batches) in the epoch left behind", out["previous_seq"]),
               ("Replicas that must take a snapshot", len(live)),
               ("Agents whose next publication is refused", len(agents))],
        lists=[("Replicas", live), ("Agents", agents)])


# ---------------------------------------------------------------- audit


def _day(raw: str | None, name: str, end: bool = False) -> int | None:
    """A YYYY-MM-DD date as Unix ms at its start (``end``: the next day's start), UTC."""
    if not raw:
        return None
    try:
        d = datetime.strptime(raw, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError as e:
        raise InvalidRequest(f"{name} must be a date (YYYY-MM-DD)") from e
    return int(d.timestamp() * 1000) + (86_400_000 if end else 0)


def _filters(request: Request) -> dict[str, Any]:
    qp = request.query_params
    actor, action = (qp.get("actor") or "").strip(), (qp.get("action") or "").strip()
    if len(actor) > 100 or len(action) > 100:
        raise InvalidRequest("actor and action filters are at most 100 characters")
    return {"actor": actor, "action": action, "since": _day(qp.get("since"), "since"),
            "until": _day(qp.get("until"), "until", end=True)}


def _matching(lines: Iterator[bytes], f: dict[str, Any], names: dict[str, str]
              ) -> Iterator[tuple[bytes, dict[str, Any]]]:
    """The exported events that pass the filters (actor: a user id or name, a device or an
    agent, case-insensitive substring; action: a prefix, e.g. ``member.``)."""
    actor = f["actor"].lower()
    for line in lines:
        ev = json.loads(line)
        if "end" in ev:
            continue
        if f["action"] and not ev["action"].startswith(f["action"]):
            continue
        if f["until"] is not None and ev["at"] >= f["until"]:
            continue
        a = ev.get("actor") or {}
        who = [str(a.get("user") or ""), names.get(str(a.get("user")), ""),
               str(a.get("device") or ""), str(a.get("agent") or "")]
        if actor and not any(actor in w.lower() for w in who):
            continue
        yield line, ev


_HEX = re.compile(r"[0-9a-f]{40,}")


def _ids_in(v: Any) -> Iterator[str]:
    if isinstance(v, str) and is_id(v):
        yield v
    elif isinstance(v, dict):
        for x in v.values():
            yield from _ids_in(x)
    elif isinstance(v, list):
        for x in v:
            yield from _ids_in(x)


def _human(v: Any, names: dict[str, str]) -> Any:
    """A detail's value for people: ids as names (None when the hub has no name for it:
    the export keeps every id), digests cut to 12 hex digits."""
    if isinstance(v, str) and is_id(v):
        return names.get(v)
    if isinstance(v, str) and _HEX.fullmatch(v):
        return v[:12] + "…"
    if isinstance(v, dict):
        return {k: h for k, x in v.items() if (h := _human(x, names)) is not None}
    if isinstance(v, list):
        return [h for x in v if (h := _human(x, names)) is not None]
    return v


def _readable(events: list[dict[str, Any]], names: dict[str, str]) -> None:
    """Each event gains ``who`` (the actor's name, agent and device) and ``shown`` (its
    details as ``(label, text)``, names for ids, without the request id)."""
    for ev in events:
        a = ev.get("actor") or {}
        who = names.get(str(a.get("user")), "a former member") if a.get("user") else "the hub"
        if a.get("agent"):
            who += f" through {a['agent']}"
        if names.get(str(a.get("device"))):
            who += f" on {names[str(a['device'])]}"
        ev["who"] = who
        shown = []
        for k, v in ev["details"].items():
            h = _human(v, names)
            if k == "request_id" or h is None or h in ({}, []):
                continue
            label = k[:-3] if k.endswith("_id") else k
            if k.endswith("_at") and isinstance(h, int) and not isinstance(h, bool):
                h = stamp(h, utc=True)  # Unix ms in the chain, a UTC time here
            shown.append((label, h if isinstance(h, str) else json.dumps(h)))
        ev["shown"] = shown


async def _audit_scope(request: Request, p: Any
                       ) -> tuple[str | None, dict[str, Any], dict[str, str]]:
    """The space whose chain is read (None: every chain, hub owners), the page's context,
    and member names by user id. The listing that names them is the access check: a
    space's members (its admins), or every device (hub owners)."""
    hub = hub_of(request)
    if "space" not in request.path_params:
        devices = await call(admin.list_devices, hub.store, p, True)
        spaces_ = await call(spaces.list_spaces, hub.store, p)
        return None, {"base": "/console/admin/audit", "space": None, "role": None,
                      "chains": {s["id"]: s["name"] for s in spaces_["spaces"]}}, {
            d["user_id"]: d["user_name"] for d in devices["devices"]}
    ref, sp, role = await space_of(request, p)
    members = await call(admin.list_members, hub.store, p, ref)
    return ref, {"base": f"/console/admin/spaces/{ref}/audit", "space": sp, "role": role,
                 "chains": {}}, {m["user_id"]: m["name"] for m in members["members"]}


@signed_in
async def audit_page(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    f = _filters(request)
    ref, ctx, names = await _audit_scope(request, p)

    def read() -> tuple[list[dict[str, Any]], int]:
        found = [ev for _, ev in _matching(
            admin.audit_lines(hub.store, p, ref, f["since"] or 0), f, names)]
        found.sort(key=lambda ev: (ev["at"], ev["n"]), reverse=True)
        return found[:AUDIT_SHOWN], len(found)

    events, total = await run_in_threadpool(read)
    ids = {i for ev in events for i in _ids_in([ev["chain"], ev.get("actor"), ev["details"]])}
    names = dict(names, **await call(reads.names, hub.store, p, ref, ids))
    _readable(events, names)
    verified = await call(admin.verify_audit, hub.store, p, ref)
    return page(request, "audit.html", me=p, events=events, total=total, shown=AUDIT_SHOWN,
                names=names, verified=verified, f=f, query=request.url.query,
                qp=dict(request.query_params), **ctx)


@signed_in
async def audit_export(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    f = _filters(request)
    ref, _, names = await _audit_scope(request, p)  # the access check first

    def lines() -> Iterator[bytes]:
        end: dict[str, Any] = {}

        def events() -> Iterator[bytes]:
            for line in admin.audit_lines(hub.store, p, ref, f["since"] or 0):
                if line.startswith(b'{"end":'):
                    end.update(json.loads(line)["end"])
                else:
                    yield line

        n = 0
        for line, _ in _matching(events(), f, names):
            n += 1
            yield line
        # unfiltered, the API's end line as it is (with its names: D138); filtered, a count
        filtered = f["action"] or f["actor"] or f["until"] is not None
        tail = {"count": n} if filtered or "names" not in end else dict(end, count=n)
        yield (canonical_str({"end": tail}) + "\n").encode()

    it = lines()
    first = await run_in_threadpool(next, it, None)  # access errors before the headers

    async def body() -> Any:
        if first is not None:
            yield first
        async for chunk in iterate_in_threadpool(it):
            yield chunk

    name = "".join(c for c in ref or "hub" if c.isalnum() or c in "-_") or "space"
    return StreamingResponse(body(), media_type="application/x-ndjson", headers=dict(
        HEADERS, **{"Content-Disposition": f'attachment; filename="audit-{name}.jsonl"'}))


S = "/spaces/{space}"
ROUTES = [
    Route(S + "/members/{user}/role", role_change, methods=["POST"]),
    Route(S + "/invites/{invite}/revoke", invite_revoke, methods=["POST"]),
    Route(S + "/rules", rules_page, methods=["GET"]),
    Route(S + "/rules/{rule}/remove", rule_remove, methods=["POST"]),
    Route(S + "/access", access_page, methods=["GET"]),
    Route(S + "/replicas/{replica}/revoke", replica_revoke, methods=["POST"]),
    Route(S + "/delegations/{delegation}/revoke", delegation_revoke, methods=["POST"]),
    Route(S + "/epoch", epoch_page, methods=["GET"]),
    Route(S + "/epoch", epoch_bump, methods=["POST"]),
    Route(S + "/audit", audit_page, methods=["GET"]),
    Route(S + "/audit.jsonl", audit_export, methods=["GET"]),
    Route("/audit", audit_page, methods=["GET"]),  # every chain: hub owners
    Route("/audit.jsonl", audit_export, methods=["GET"]),
    *scope_pages.ROUTES,
]
# before the /console mount, which would take every /console/... path
CONSOLE_ADMIN = Mount("/console/admin", routes=ROUTES)
