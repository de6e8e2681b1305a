"""The console's conflicts and screening pages (docs/console.md): what replicas report and what
admins allowed, for every member; the allow form for a space's admins.

    GET  /console/spaces/{s}/conflicts   open conflicts reported by replicas (members):
                                         hub/conflict_reports.list_reports
    GET  /console/spaces/{s}/screening   screening allows (members): screening.list_allows;
                                         admins also get the allow form
    POST /console/admin/spaces/{s}/screening/allow
                                         preview (screening.allow, dry_run), then, with
                                         confirm=yes, the allow the API's
                                         POST .../screening/allows makes

As in hub/console/admin_pages.py: the same domain functions as the API with the browser's
``Principal`` (same access checks, same audit), and the POST passes the Origin and CSRF
checks before anything else.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from hub import conflict_reports, reads, screening
from hub.api.http import hub_of
from hub.console.http import call, checked_form, page, redirect, signed_in, space_of


@signed_in
async def conflicts_page(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    ref, sp, role = await space_of(request, p)
    n = request.query_params.get("page", "1")
    out = await call(conflict_reports.list_reports, hub.store, p, ref,
                     int(n) if n.isdigit() and len(n) < 9 else 1)
    return page(request, "conflicts.html", me=p, space=sp, role=role,
                conflicts=out["conflicts"], total=out["total"], entries=out["entries"],
                at=out["page"], pages=out["pages"])


@signed_in
async def screening_page(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    ref, sp, role = await space_of(request, p)
    out = await call(screening.list_allows, hub.store, p, ref, None)
    names = await call(reads.names, hub.store, p, ref,
                       {str(a["created_by"]) for a in out["allows"]})
    return page(request, "screening.html", me=p, space=sp, role=role, allows=out["allows"],
                names=names,
                limit=screening.MAX_LISTED)


@signed_in
async def screening_allow(request: Request, p: Any) -> Response:
    hub = hub_of(request)
    form = await checked_form(request)
    ref, sp, role = await space_of(request, p)
    body = {k: form.get(k, "").strip() for k in ("entry", "version", "rule")}
    body["rule"] = body["rule"] or "*"
    dry = form.get("confirm") != "yes"
    out = await call(screening.allow, hub.store, p, ref, body, hub.now(), dry_run=dry)
    back = f"/console/spaces/{ref}/screening"
    if not dry or out["allow"].get("id"):
        return redirect(back, done="allowed")  # made, or already allowed: the list shows it
    a = out["allow"]
    return page(request, "confirm.html", me=p, space=sp, role=role,
                title="Allow a screening finding", button="Confirm allow",
                intro="That exact version of the entry may then be published despite the "
                      "finding; another version is screened again. Nothing has changed yet.",
                action=request.url.path, back=back, lists=[],
                fields={"entry": a["entry"], "version": a["version"], "rule": a["rule"]},
                facts=[("Entry", a["entry"]), ("Version", a["version"]),
                       ("Finding", "every finding" if a["rule"] == "*" else a["rule"])])


# relative to /console and /console/admin: hub/app.py mounts them before the pages of
# hub/console/pages.py and hub/console/admin_pages.py (whose mounts take every path below)
ROUTES = [
    Route("/spaces/{space}/conflicts", conflicts_page, methods=["GET"]),
    Route("/spaces/{space}/screening", screening_page, methods=["GET"]),
]
ADMIN_ROUTES = [
    Route("/spaces/{space}/screening/allow", screening_allow, methods=["POST"]),
]
