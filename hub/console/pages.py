"""The console: server-rendered pages under /console (Jinja2, no JavaScript).

Each handler finds the browser's session (hub/console/sessions.py), turns it into the same
``Principal`` the API uses, and calls the same domain functions as the API (hub/reads.py,
hub/admin.py, hub/spaces.py): the console has no path of its own to the database, so it has
the API's access checks and the guard's. Every POST checks the Origin (or Referer) and the
form's CSRF token before anything else; every page is sent with a strict
Content-Security-Policy (no script at all), and the session cookie is HttpOnly, SameSite=Strict
and Secure when the hub's public URL is https.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from hub import (
    activity,
    admin,
    backlinks,
    blobs,
    grants,
    logs,
    page_restore,
    reads,
    spaces,
    wikilinks,
)
from hub.api.blobs import DOWNLOAD_HEADERS
from hub.api.http import hub_of
from hub.clientaddr import client_of
from hub.console import csp_reports, markdown, oidc, preview, sessions
from hub.console.http import (
    HEADERS,
    HERE,
    call,
    checked_form,
    moment,
    page,
    redirect,
    same_origin,
    session_secret,
    signed_in,
    space_and_role,
)
from shared import policy
from shared.attachments import (
    INLINE_IMAGES,
    OCTET_STREAM,
    content_disposition,
    declares_attachment,
)
from shared.errors import Forbidden, InvalidRequest, NotFound, QuireError, RateLimited

OIDC_PATH = "/console/signin/oidc"
log = logging.getLogger("quire.hub")
CODE_COOKIE = "quire_console_code"
HISTORY_SHOWN = 50  # versions listed on an entry page, newest first


# ---------------------------------------------------------------- sign-in


async def home(request: Request) -> Response:
    return redirect("/console/spaces")


async def signin_page(request: Request) -> Response:
    s = hub_of(request).settings
    return page(request, "signin.html",
                oidc_name=oidc.provider_name(s) if oidc.configured(s) else "")


async def signin_start(request: Request) -> Response:
    hub = hub_of(request)
    if not same_origin(request):
        return page(request, "error.html", status=403,
                    error=Forbidden("this form was sent from another site"))
    # every start stores a device login and a session: limited per client address, in the
    # same bucket as the API's device logins (device_codes_per_min)
    addr = client_of(request.client.host if request.client else None,
                     request.headers.items(), hub.settings)
    ok, wait = await call(hub.login_limiter.allow, addr)
    if not ok:
        refused = page(request, "error.html", status=429, error=RateLimited(
            "too many sign-ins from this address; wait a minute and retry"))
        refused.headers["Retry-After"] = str(wait)
        return refused
    secret, user_code = await call(sessions.start, hub.store, hub.settings, hub.now(), addr)
    resp = redirect("/console/signin/wait")
    secure = hub.settings.url.startswith("https:")
    resp.set_cookie(sessions.COOKIE, secret, max_age=hub.settings.console_session_ttl,
                    path="/console", httponly=True, samesite="strict", secure=secure)
    # the code to approve, shown on the waiting page (its hash alone is stored)
    resp.set_cookie(CODE_COOKIE, user_code, max_age=hub.settings.device_code_ttl,
                    path="/console/signin", httponly=True, samesite="strict", secure=secure)
    return resp


async def signin_wait(request: Request) -> Response:
    hub = hub_of(request)
    secret = session_secret(request)
    session = sessions.find(hub.store, secret, hub.now())
    if session is None or secret is None:
        return redirect("/console/signin")
    try:
        done = await call(sessions.resume, hub.store, hub.key, hub.settings, secret, session,
                          hub.now())
    except QuireError as e:
        return page(request, "error.html", status=401, error=e)
    if done:
        await call(_log_signin, hub, done, "device_approval")
        resp = redirect("/console/spaces")
        resp.delete_cookie(CODE_COOKIE, path="/console/signin")
        if done != secret:  # signed in just now, under a new secret (session fixation)
            resp.set_cookie(sessions.COOKIE, done, max_age=hub.settings.console_session_ttl,
                            path="/console", httponly=True, samesite="strict",
                            secure=hub.settings.url.startswith("https:"))
        return resp
    return page(request, "wait.html", user_code=request.cookies.get(CODE_COOKIE, ""),
                interval=hub.settings.device_code_interval)


def _log_signin(hub: Any, secret: str, method: str) -> None:
    """One ``console_signin`` line for a sign-in that succeeded (who, which device, how);
    the request's access line carries the same user and device (hub/api/observe.py)."""
    session = sessions.find(hub.store, secret, hub.now())
    if session is None:
        return
    info = logs.current()
    if info is not None:
        info.user, info.device = session.user_id, session.device_id
    logs.event(log, "console_signin", method=method, user=session.user_id,
               device=session.device_id)


def _oidc_refused(request: Request, e: oidc.Refused) -> Response:
    logs.event(log, "oidc_signin_refused", logging.WARNING, reason=e.reason)
    resp = page(request, "oidc_refused.html", status=403, message=e.message)
    resp.delete_cookie(oidc.FLOW_COOKIE, path=OIDC_PATH)
    return resp


async def oidc_start(request: Request) -> Response:
    """Off to the OpenID Connect provider (hub/console/oidc.py); a link, not a form: the
    CSP's form-action 'self' would stop a form's redirect to the provider."""
    hub = hub_of(request)
    if not oidc.configured(hub.settings):
        return page(request, "error.html", status=404, error=NotFound(
            "sign-in through an OpenID Connect provider is not configured on this hub"))
    addr = client_of(request.client.host if request.client else None,
                     request.headers.items(), hub.settings)
    ok, _ = await call(hub.login_limiter.allow, addr)
    if not ok:
        return page(request, "error.html", status=429, error=RateLimited(
            "too many sign-ins from this address; wait a minute and retry"))
    try:
        flow, url = await oidc.start(hub, request.app.state)
    except oidc.Refused as e:
        return _oidc_refused(request, e)
    resp = RedirectResponse(url, status_code=302, headers=HEADERS)
    resp.set_cookie(oidc.FLOW_COOKIE, flow, max_age=oidc.FLOW_TTL_S, path=OIDC_PATH,
                    httponly=True, samesite="lax", secure=hub.settings.url.startswith("https:"))
    return resp


async def oidc_callback(request: Request) -> Response:
    hub = hub_of(request)
    if not oidc.configured(hub.settings):
        return page(request, "error.html", status=404, error=NotFound(
            "sign-in through an OpenID Connect provider is not configured on this hub"))
    try:
        secret = await oidc.finish(hub, request.app.state, request.cookies.get(oidc.FLOW_COOKIE),
                                   request.query_params)
    except oidc.Refused as e:
        return _oidc_refused(request, e)
    await call(_log_signin, hub, secret, "oidc")
    # a page, not a redirect: after the provider's cross-site redirect a SameSite=Strict
    # cookie is only sent on a navigation this page starts (its meta refresh or link)
    resp = page(request, "signed_in.html")
    resp.set_cookie(sessions.COOKIE, secret, max_age=hub.settings.console_session_ttl,
                    path="/console", httponly=True, samesite="strict",
                    secure=hub.settings.url.startswith("https:"))
    resp.delete_cookie(oidc.FLOW_COOKIE, path=OIDC_PATH)
    return resp


async def signout(request: Request) -> Response:
    hub = hub_of(request)
    await checked_form(request)
    session = sessions.find(hub.store, session_secret(request), hub.now())
    if session is not None:
        await call(sessions.end, hub.store, session, hub.now())
    resp = redirect("/console/signin")
    resp.delete_cookie(sessions.COOKIE, path="/console")
    return resp


# ---------------------------------------------------------------- spaces and the browser


@signed_in
async def spaces_page(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    out = await call(spaces.list_spaces, hub.store, p)
    return page(request, "spaces.html", me=p, spaces=out["spaces"])


@signed_in
async def space_page(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    ref = request.path_params["space"]
    sp, role = await call(space_and_role, hub.store, p, ref)
    prefix = request.query_params.get("prefix", "")
    after = request.query_params.get("after", "")
    out = await call(reads.list_entries, hub.store, p, ref, prefix=prefix, after=after,
                     limit=100)
    return page(request, "space.html", me=p, space=sp, role=role, prefix=prefix, **out)


@signed_in
async def search_page(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    ref = request.path_params["space"]
    sp, role = await call(space_and_role, hub.store, p, ref)
    q = request.query_params.get("q", "")
    out = await call(reads.search, hub.store, p, ref, q, 50)
    return page(request, "search.html", me=p, space=sp, role=role, q=q, **out)


def _named_history(store: Any, p: Any, ref: str, versions: list[dict[str, Any]]
                   ) -> dict[str, str]:
    """Names of the history's authors and their devices (former members too)."""
    ids = {str(v["author"][k]) for v in versions for k in ("user", "device")
           if v["author"].get(k)}
    return reads.names(store, p, ref, ids)


def _rendered(store: Any, p: Any, ref: str, space_name: str, entry_id: str, body: str
              ) -> Any:
    """The body as sanitized HTML, its ``[[wiki links]]`` resolved in this space."""
    return markdown.render(body, entry_id, space_name,
                           lambda names: wikilinks.resolve(store, p, ref, entry_id, names))


@signed_in
async def entry_page(request: Request, p: Any) -> Response:
    """One entry (at the head, or as a batch of any epoch left it: ``seq`` and ``epoch``),
    its body rendered from Markdown (``source=1``: as text), and its history with who and
    when; each row links to that version and to its change, in the row's own epoch (a seq
    alone means the current epoch), and, for members who may publish, to restoring it."""
    hub = hub_of(request)
    ref, qp = request.path_params["space"], request.query_params
    sp, role = await call(space_and_role, hub.store, p, ref)
    entry_id = reads.parse_entry_id(qp.get("id"))
    epoch = reads.parse_epoch(qp.get("epoch"))
    seq = reads.parse_seq(qp.get("seq"))
    out = await call(reads.get_entry, hub.store, p, ref, entry_id, seq=seq, epoch=epoch)
    hist = await call(reads.history, hub.store, p, ref, entry_id, HISTORY_SHOWN)
    names = await call(_named_history, hub.store, p, ref, hist["versions"])
    shown = next((v for v in hist["versions"] if v["version"] == out["version"]
                  and (v["epoch"], v["seq"]) <= (out["at"]["epoch"], out["at"]["seq"])),
                 None)
    source = qp.get("source") == "1"
    body = out["entry"].get("body", "")
    rendered = None if source else await call(_rendered, hub.store, p, ref, sp["name"],
                                              entry_id, body)
    old = seq is not None or epoch is not None
    linked = None if old else await call(backlinks.backlinks, hub.store, p, ref, entry_id)
    keep = {k: v for k, v in (("id", entry_id), ("seq", qp.get("seq")),
                              ("epoch", qp.get("epoch"))) if v}
    current = hist["versions"][0]["version"] if hist["versions"] else None
    may_restore = (policy.at_least(role, "editor")
                   and page_restore.publisher_for(hub) is not None)
    return page(request, "entry.html", me=p, space=sp, role=role, id=entry_id,
                versions=hist["versions"], names=names, shown=shown,
                old=old, limit=HISTORY_SHOWN, linked=linked,
                rendered=rendered, source=source, here=keep, current=current,
                may_restore=may_restore, inline_images=INLINE_IMAGES, **out)


@signed_in
async def attachment_file(request: Request, p: Any) -> Response:
    """``…/file?id=ID``: the bytes of attachment ``ID`` at the head, for its entry page:
    shown inline only when its media type is a raster image (``<img>``, the console's
    ``img-src 'self'``), else a download; never sniffed, never a page of this origin."""
    hub = hub_of(request)
    ref = request.path_params["space"]
    entry_id = reads.parse_entry_id(request.query_params.get("id"))
    out = await call(reads.get_entry, hub.store, p, ref, entry_id)
    meta = out["entry"].get("meta", {})
    if not declares_attachment(meta):
        raise NotFound(f"{entry_id} is not an attachment")
    data = await call(blobs.get_blob, hub.store, p, ref, str(meta["sha256"]))
    name = entry_id.rsplit("/", 1)[-1]
    inline = meta.get("media_type") in INLINE_IMAGES
    headers = dict(DOWNLOAD_HEADERS, **{"Content-Disposition": content_disposition(
        name, inline=inline)})
    return Response(data, media_type=str(meta["media_type"]) if inline else OCTET_STREAM,
                    headers=headers)


@signed_in
async def restore_page(request: Request, p: Any) -> Response:
    """``POST …/restore`` (id, seq, epoch): a preview of restoring that version (what
    would change, whether the rules allow it), then, with ``confirm=yes`` and the base the
    preview showed, the restore itself, published as the member's edit through the guard
    (hub/page_restore.py); back to the entry with a banner."""
    hub = hub_of(request)
    form = await checked_form(request)
    ref = request.path_params["space"]
    sp, role = await call(space_and_role, hub.store, p, ref)
    entry_id = reads.parse_entry_id(form.get("id"))
    epoch = reads.parse_epoch(form.get("epoch") or None)
    seq = reads.parse_seq(form.get("seq"))
    if seq is None:
        raise InvalidRequest("which version to restore: seq is missing")
    publisher = page_restore.publisher_for(hub)
    if publisher is None:
        raise InvalidRequest("this hub cannot publish for the console yet (no hub-attested "
                             "publication): restore with `quire restore` on a replica",
                             {"reason": "restore_unavailable"})
    back = markdown.entry_href(sp["name"], entry_id)
    if form.get("confirm") == "yes":
        await call(page_restore.restore, hub.store, publisher, p, ref, entry_id, epoch, seq,
                   form.get("base") or None, hub.now())
        return redirect(back, done="restored")
    got = await call(page_restore.plan, hub.store, p, ref, entry_id, epoch, seq)
    hist = await call(reads.history, hub.store, p, ref, entry_id, HISTORY_SHOWN)
    when = next((v["accepted_at"] for v in hist["versions"]
                 if v["seq"] == seq and (epoch is None or v["epoch"] == epoch)), None)
    d = got["diff"]
    changes = [f"{f}: {d['fields'][f][0]!r} → {d['fields'][f][1]!r}" for f in d["fields"]]
    if d["body"]:
        changes.append("the body, as shown below")
    facts: list[tuple[str, Any]] = [("Page", entry_id),
                                    ("The version of", moment(when, never="an earlier epoch")),
                                    ("Published as", f"your edit ({p.user_name})")]
    if got["deleted_now"]:
        facts.append(("Now", "deleted: the restore brings it back"))
    if got["denied"]:
        facts.append(("The rules", f"refuse it: {got['denied']}"))
    return page(request, "confirm.html", me=p, space=sp, role=role,
                title=f"Restore {entry_id}", button="Confirm restore",
                intro="this publishes that version's content as a new edit by you, through "
                      "the same checks as any edit (rules, screening); the history keeps "
                      "every version. Nothing has changed yet.",
                action=request.url.path, back=back,
                fields={"id": entry_id, "seq": str(seq), "epoch": form.get("epoch") or "",
                        "base": got["base"] or ""},
                facts=facts, lists=[("What changes", changes)] if changes else [],
                diff=d["body"])


@signed_in
async def activity_page(request: Request, p: Any) -> Response:
    """The space's changes, newest first (hub/activity.py), with names and times."""
    hub = hub_of(request)
    ref, qp = request.path_params["space"], request.query_params
    sp, role = await call(space_and_role, hub.store, p, ref)
    before = reads.parse_seq(qp.get("before"), "before")
    epoch = reads.parse_epoch(qp.get("epoch"))
    out = await call(activity.activity, hub.store, p, ref, epoch=epoch, before=before)
    ids = {str(c["author"][k]) for c in out["changes"] for k in ("user", "device")
           if c["author"].get(k)}
    names = await call(reads.names, hub.store, p, ref, ids)
    return page(request, "activity.html", me=p, space=sp, role=role, names=names, **out)


@signed_in
async def diff_page(request: Request, p: Any) -> Response:
    """The change of one entry between two seqs of one epoch (the current one unless
    ``epoch``); with ``to``, who published that batch and when."""
    hub = hub_of(request)
    ref, qp = request.path_params["space"], request.query_params
    sp, role = await call(space_and_role, hub.store, p, ref)
    from_seq = reads.parse_seq(qp.get("from"), "from") or 0
    to_seq = reads.parse_seq(qp.get("to"), "to")
    epoch = reads.parse_epoch(qp.get("epoch"))
    out = await call(reads.diff, hub.store, p, ref, reads.parse_entry_id(qp.get("id")),
                     from_seq=from_seq, to_seq=to_seq, epoch=epoch)
    by, names = None, {}
    if to_seq:
        by = await call(reads.batch, hub.store, p, ref, seq=to_seq, epoch=epoch)
        names = await call(reads.names, hub.store, p, ref,
                           {str(by["author"]["user"]), str(by["author"]["device"])})
    return page(request, "diff.html", me=p, space=sp, role=role, d=out, by=by, names=names)


# ---------------------------------------------------------------- administration


@signed_in
async def members_page(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    ref = request.path_params["space"]
    sp, role = await call(space_and_role, hub.store, p, ref)
    members = await call(admin.list_members, hub.store, p, ref)
    invites = await call(admin.list_invites, hub.store, p, ref)
    rules = await call(admin.list_rules, hub.store, p, ref)
    names = {m["user_id"]: m["name"] for m in members["members"]}
    names.update(await call(reads.names, hub.store, p, ref, {
        str(i["created_by"]) for i in invites["invites"] if i["created_by"]} - set(names)))
    return page(request, "members.html", me=p, space=sp, role=role, names=names,
                members=members["members"], invites=invites["invites"], rules=rules["rules"])


@signed_in
async def invite_create(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    form = await checked_form(request)
    ref = request.path_params["space"]
    sp, role = await call(space_and_role, hub.store, p, ref)
    s, dry = hub.settings, form.get("confirm") != "yes"
    body = {"role": form.get("role", "")}
    if form.get("name", "").strip():  # the new member's name, offered at join (D138)
        body["name"] = form.get("name", "")
    out = await call(spaces.invite, hub.store, p, ref, body,
                     hub.now(), s.invite_ttl, s.invite_ttl_max, dry_run=dry)
    if dry:  # a preview first: only the confirming POST makes the invite (and its code)
        named = [("For", out["name"])] if out.get("name") else []
        return page(request, "confirm.html", me=p, space=sp, role=role,
                    title=f"Invite a new {out['role']}", button="Confirm create invite",
                    intro=f"whoever holds the code joins {sp['name']} as {out['role']}. "
                          "The code is shown once, on the next page.",
                    action=request.url.path,
                    fields={"role": out["role"], **({"name": out["name"]} if named else {})},
                    back=f"/console/spaces/{ref}/members", lists=[],
                    facts=[("Role", out["role"]), *named,
                           ("Expires", moment(out["expires_at"]))])
    return page(request, "invite_created.html", me=p, space=sp, role=role, invite=out)


def _words(raw: str) -> list[str]:
    """A form's comma-separated list."""
    return [w.strip() for w in raw.split(",") if w.strip()]


def _conditions(r: dict[str, Any]) -> str:
    """A read rule's kinds and tags, as the preview says them."""
    return "".join([f" of kind {', '.join(r['kinds'])}" if r.get("kinds") else "",
                    f" tagged {', '.join(r['tags'])}" if r.get("tags") else ""])


@signed_in
async def rule_add(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    form = await checked_form(request)
    ref = request.path_params["space"]
    body: dict[str, Any] = {"effect": form.get("effect", "deny"), "who": form.get("who", ""),
                            "actions": _words(form.get("actions", "")),
                            "entries": form.get("entries", "")}
    for cond in ("kinds", "tags"):  # a read rule's conditions (hub/scope.py)
        if _words(form.get(cond, "")):
            body[cond] = _words(form.get(cond, ""))
    dry = form.get("confirm") != "yes"
    out = await call(admin.add_rule, hub.store, p, ref, body, hub.now(), dry_run=dry)
    if dry:  # a preview first: only the confirming POST adds the rule
        sp, role = await call(space_and_role, hub.store, p, ref)
        r = out["rule"]
        who = (await call(reads.names, hub.store, p, ref, {r["who"]})).get(r["who"], r["who"])
        return page(request, "confirm.html", me=p, space=sp, role=role, title="Add a rule",
                    button="Confirm add rule", action=request.url.path,
                    intro="the guard applies it to every publication from now on; "
                          "publications prepared under the current rules are re-checked.",
                    fields={"effect": r["effect"], "who": r["who"],
                            "actions": ",".join(r["actions"]), "entries": r["entries"],
                            "kinds": ",".join(r.get("kinds", [])),
                            "tags": ",".join(r.get("tags", []))},
                    back=f"/console/spaces/{ref}/members",
                    lists=preview.read_impact_section(out),
                    facts=[("Rule", f"{r['effect']} {who} {', '.join(r['actions'])} "
                                    f"on {r['entries']}" + _conditions(r))])
    return redirect(f"/console/spaces/{ref}/members", done="rule_added")


@signed_in
async def devices_page(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    out = await call(admin.list_devices, hub.store, p, p.is_owner)
    return page(request, "devices.html", me=p, devices=out["devices"])


@signed_in
async def device_revoke(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    form = await checked_form(request)
    out = await call(admin.revoke_device, hub.store, p, request.path_params["device"],
                     {"dry_run": form.get("confirm") != "yes"}, hub.now())
    if out["dry_run"]:  # a preview first: only the confirming POST revokes
        return page(request, "confirm.html", me=p, title=f"Revoke {out['name']}",
                    intro="its tokens stop working on the next request and the guard "
                          "refuses its in-flight publications. Nothing has changed yet.",
                    action=request.url.path, fields={}, button="Confirm revoke",
                    back="/console/devices", facts=[("Device", out["name"])], lists=[])
    hub.access_changed()
    return redirect("/console/devices", done="device_revoked")


@signed_in
async def device_approve(request: Request, p: Any) -> Response:
    """Approve a new machine's device login by its code: first what it is (the name as
    requested and as it will be, the address and time of the request, the code to
    compare), then only the confirming POST approves (as ``quire devices approve``)."""
    hub = hub_of(request)
    form = await checked_form(request)
    ok, wait = await call(hub.approve_limiter.allow, p.user_id)
    if not ok:  # per user, as the API: user codes are short, so guesses are what it bounds
        refused = page(request, "error.html", status=429, me=p, error=RateLimited(
            "too many approval attempts; wait a few seconds and retry"))
        refused.headers["Retry-After"] = str(wait)
        return refused
    body = {"user_code": form.get("code", "")}
    if form.get("confirm") != "yes":
        seen = await call(grants.preview_device, hub.store, p, body, hub.now())
        name = repr(seen["requested_name"])
        if seen["renamed"]:
            name += (f" (you already have a device {seen['like']!r}: this one will be "
                     f"{seen['device_name']!r})")
        return page(request, "confirm.html", me=p, title="Approve a new device",
                    intro="the machine showing this code becomes a device of yours, with "
                          "access to every space you are in. Approve only a machine you are "
                          "at yourself, never one someone asked you to. Nothing has changed "
                          "yet.",
                    action=request.url.path, fields={"code": seen["user_code"]},
                    button="Confirm approve", back="/console/devices", lists=[],
                    facts=[("Code", f"{seen['user_code']} (compare it with the code on "
                                    "the new machine)"),
                           ("Name", name),
                           ("Requested from", seen["requested_from"] or "unknown"),
                           ("Requested", moment(seen["requested_at"])),
                           ("Code expires", moment(seen["expires_at"]))])
    await call(grants.approve_device, hub.store, p, body, hub.now())
    return redirect("/console/devices", done="device_approved")


CONSOLE = Mount("/console", routes=[
    Route("/", home, methods=["GET"]),
    Route("/signin", signin_page, methods=["GET"]),
    Route("/signin", signin_start, methods=["POST"]),
    Route("/signin/wait", signin_wait, methods=["GET"]),
    Route("/signin/oidc", oidc_start, methods=["GET"]),
    Route("/signin/oidc/callback", oidc_callback, methods=["GET"]),
    Route("/signout", signout, methods=["POST"]),
    Route("/spaces", spaces_page, methods=["GET"]),
    Route("/spaces/{space}", space_page, methods=["GET"]),
    Route("/spaces/{space}/search", search_page, methods=["GET"]),
    Route("/spaces/{space}/entry", entry_page, methods=["GET"]),
    Route("/spaces/{space}/file", attachment_file, methods=["GET"]),
    Route("/spaces/{space}/diff", diff_page, methods=["GET"]),
    Route("/spaces/{space}/activity", activity_page, methods=["GET"]),
    Route("/spaces/{space}/restore", restore_page, methods=["POST"]),
    Route("/csp-report", csp_reports.csp_report, methods=["POST"]),
    Route("/spaces/{space}/members", members_page, methods=["GET"]),
    Route("/spaces/{space}/invites", invite_create, methods=["POST"]),
    Route("/spaces/{space}/rules", rule_add, methods=["POST"]),
    Route("/devices", devices_page, methods=["GET"]),
    Route("/devices/approve", device_approve, methods=["POST"]),
    Route("/devices/{device}/revoke", device_revoke, methods=["POST"]),
    Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
])
