"""What every console page shares: the templates, the security headers, the checked form and
the signed-in gate. The pages (pages.py, admin_pages.py, report_pages.py) only call these and
the domain.

    page(request, template, **ctx)   render a template with the CSRF token, strict headers
    redirect(url, done=KEY)          303 with the same headers; ``done`` names the banner
                                     the next page shows (DONE: fixed texts, never the URL's)
    checked_form(request)            a POST's form after the Origin and CSRF checks
    signed_in(handler)               handler(request, principal), or off to /console/signin
    call(fn, *args)                  a domain function in the thread pool
    space_and_role(store, p, ref)    the space as the caller sees it, and their role there
    moment(ms)                       a time as ``<time datetime="…Z">3 hours ago, … UTC</time>``

Times: the console runs no script, so it cannot learn the browser's time zone, and the
hub's own zone means nothing to a reader elsewhere. Every time is therefore UTC, said so
("2026-12-03 14:49 UTC", with "3 hours ago"), in a ``<time>`` element whose ``datetime``
is the ISO 8601 instant (docs/console.md, "Names and times").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from hub import logs, spaces
from hub.api.http import hub_of
from hub.console import sessions
from shared.errors import Forbidden, NotFound, QuireError, Unauthorized
from shared.humanize import stamp, when

HERE = Path(__file__).parent
_env = Environment(loader=FileSystemLoader(HERE / "templates"),
                   autoescape=select_autoescape(["html"]), trim_blocks=True,
                   lstrip_blocks=True)


def moment(ms: Any, now: int | None = None, never: str = "never") -> Markup:
    """A time for people, in UTC (the console cannot know the reader's zone): the text
    ``3 hours ago, 2026-12-03 14:49 UTC`` in ``<time datetime="2026-12-03T14:49:14Z">``."""
    if not isinstance(ms, int) or isinstance(ms, bool):
        return Markup(escape(never))
    iso = datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    rel = when(ms, now).split(", ", 1)[0]
    return Markup('<time datetime="{}">{}, {}</time>').format(iso, rel, stamp(ms, utc=True))


_env.filters["when"] = moment
_env.filters["utc"] = lambda ms: stamp(ms, seconds=True, utc=True)  # text, for attributes

CSP_REPORTS = "/console/csp-report"  # hub/console/csp_reports.py
CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
       f"frame-ancestors 'none'; base-uri 'none'; report-uri {CSP_REPORTS}")

# the confirmation banner after an action (``?done=KEY``): a fixed text per key, so a link
# cannot make the console say something of the link's choosing
DONE = {
    "role_changed": "Role changed.",
    "invite_revoked": "Invite revoked.",
    "rule_added": "Rule added.",
    "rule_removed": "Rule removed.",
    "replica_revoked": "Replica revoked.",
    "delegation_revoked": "Delegation revoked.",
    "epoch_bumped": "A new epoch has started; replicas take a snapshot at their next sync.",
    "allowed": "Finding allowed (or it already was).",
    "device_revoked": "Device revoked.",
    "device_approved": "Device approved: the machine showing the code is signed in.",
    "restored": "Restored: the earlier version is published as your edit, and is now the "
                "current one.",
}
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "same-origin", "Cache-Control": "no-store",
           "X-Frame-Options": "DENY"}


def session_secret(request: Request) -> str | None:
    """The console session cookie's secret, if the browser sent one."""
    return request.cookies.get(sessions.COOKIE)


def page(request: Request, template: str, status: int = 200, **ctx: Any) -> HTMLResponse:
    secret = session_secret(request)
    ctx.setdefault("me", None)
    ctx.setdefault("done", DONE.get(request.query_params.get("done", "")))
    html = _env.get_template(template).render(
        csrf=sessions.csrf_token(secret) if secret else "", request=request, **ctx)
    return HTMLResponse(html, status_code=status, headers=HEADERS)


def redirect(url: str, done: str | None = None) -> RedirectResponse:
    """A 303 to ``url``; with ``done`` (a key of DONE), the page there says what was done."""
    if done is not None:
        assert done in DONE, done
        url += ("&" if "?" in url else "?") + "done=" + done
    return RedirectResponse(url, status_code=303, headers=HEADERS)


def same_origin(request: Request) -> bool:
    want = urlsplit(hub_of(request).settings.url)
    sent = request.headers.get("origin") or request.headers.get("referer")
    if not sent:
        return False
    got = urlsplit(sent)
    return (got.scheme, got.netloc) == (want.scheme, want.netloc)


async def checked_form(request: Request) -> dict[str, str]:
    """A POST's form, after the origin and CSRF checks (Forbidden otherwise)."""
    if not same_origin(request):
        raise Forbidden("this form was sent from another site", {"reason": "bad_origin"})
    form = await request.form(max_files=0, max_fields=20, max_part_size=64 * 1024)
    secret = session_secret(request)
    token = form.get("csrf")
    if not secret or not sessions.csrf_ok(secret, token if isinstance(token, str) else None):
        raise Forbidden("this form is missing its CSRF token or it is stale; reload the page",
                        {"reason": "bad_csrf"})
    return {k: str(v) for k, v in form.items()}


Handler = Callable[[Request, Any], Awaitable[Response]]


def signed_in(fn: Handler) -> Callable[[Request], Awaitable[Response]]:
    """Pages for a signed-in member: ``fn(request, principal)``; others go to sign-in."""
    async def handler(request: Request) -> Response:
        hub = hub_of(request)
        session = sessions.find(hub.store, session_secret(request), hub.now())
        if session is None or not session.signed_in:
            return redirect("/console/signin")
        try:
            p = await run_in_threadpool(sessions.principal, hub.store, session, hub.now())
        except Unauthorized:
            return redirect("/console/signin")
        info = logs.current()  # the member on the request's access line (hub/logs.py)
        if info is not None:
            info.user, info.device = p.user_id, p.device_id
        try:
            return await fn(request, p)
        except QuireError as e:
            return page(request, "error.html", status=e.status or 400, me=p, error=e)
    return handler


def call(fn: Callable[..., Any], *args: Any, **kw: Any) -> Awaitable[Any]:
    """``fn(*args, **kw)`` in the thread pool (domain functions block on the database)."""
    return run_in_threadpool(fn, *args, **kw)


def space_and_role(store: Any, p: Any, space_ref: str) -> tuple[dict[str, Any], str]:
    """The space as the caller sees it in their list, and their role there."""
    for sp in spaces.list_spaces(store, p)["spaces"]:
        if space_ref in (sp["id"], sp["name"]):
            return sp, sp.get("role") or "admin"
    raise NotFound(f"no space {space_ref!r} that you are a member of")


async def space_of(request: Request, p: Any) -> tuple[str, dict[str, Any], str]:
    """The ``{space}`` of the page's path: (the reference as written, the space as the
    caller sees it, their role there)."""
    ref = request.path_params["space"]
    sp, role = await call(space_and_role, hub_of(request).store, p, ref)
    return ref, sp, role
