"""The console as a team browser, on the real hub app (docs/console.md, "Rendered pages",
"Activity", "Restore a page", "Confirmation banners"): entry bodies rendered from Markdown
and sanitized, wiki links to the console, hostile content shown as text, the space's
activity with names, the CSP report endpoint, and the banner after an action."""

from __future__ import annotations

import html as htmllib
import re
from typing import Any

import pytest
from markupsafe import escape

from hub.console import markdown
from shared.ids import entry_id_problem
from tests.hub.console.test_console_inproc import _csrf, _origin, members, sign_in
from tests.kit.wire import delete, put

XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>'
XSS_TAG = "<script>alert(1)</script>"  # a tag takes no spaces
# an entry id takes no <, > or " at all; where ids are plain slugs, the name people see is
# the title (hostile above)
EVIL_ID = next(i for i in ("page/x' autofocus onfocus='alert(1)' &amp;", "page/xss")
               if entry_id_problem(i) is None)
SAFE_TAGS = markdown.TAGS  # what the sanitizer lets through, and nothing else


def unsafe(html: str) -> list[str]:
    """What in ``html`` (real markup, not escaped text) could run script or restyle the
    page: a tag outside the allow-list, an event handler, a style or id attribute, a link
    that is not http, https, mailto or relative."""
    from html.parser import HTMLParser

    found: list[str] = []

    class P(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag not in SAFE_TAGS:
                found.append(f"<{tag}>")
            for k, v in attrs:
                if k.startswith("on") or k in ("style", "id", "src", "srcset", "action"):
                    found.append(f"{tag}[{k}]")
                if k == "href" and v is not None:
                    scheme = re.match(r"\s*([a-zA-Z][a-zA-Z0-9+.-]*):", v)
                    if scheme and scheme.group(1).lower() not in ("http", "https", "mailto"):
                        found.append(f"{tag}[href={v}]")

        def handle_comment(self, data: str) -> None:
            found.append("<!--")

    P(convert_charrefs=True).feed(html)
    return found


def page_unsafe(html: str) -> list[str]:
    """``unsafe`` for a whole console page: its own forms, inputs and ids are ours; no
    script, frame, object, image or event handler may appear anywhere."""
    return [u for u in unsafe(html) if u.startswith(("<script", "<iframe", "<img", "<svg",
                                                      "<object", "<embed", "<style"))
            or "[on" in u or "href=" in u]


PAYLOADS = [
    XSS,
    "[a](javascript:alert(1)) [b](JAVASCRIPT:alert(1)) [c](data:text/html,<script>x</script>)",
    "[d](vbscript:msgbox(1)) <a href=\"javascript:alert(1)\">e</a> [f](  javascript:alert(1))",
    "![x](javascript:alert(1)) ![y](https://example.com/t.png \"t\")",
    "<svg onload=alert(1)> <iframe src=//evil></iframe> <style>*{}</style> <!-- c -->",
    "| a |\n|--:|\n| 1 |\n\n<details open ontoggle=alert(1)>",
    "[[x\"onmouseover=\"alert(1)]] [[page/a|<b onclick=alert(1)>]]",
    "```\n</code></pre><script>alert(1)</script>\n```",
    "<form action=//evil><input name=csrf></form> <div id=__proto__>",
    "[g](&#106;avascript:alert(1)) [h](java&#x09;script:alert(1))",
]


def test_renderer_never_emits_script_markup() -> None:
    """Every payload goes through the whole renderer and comes out without anything that
    could run (the sanitizer alone, fed the raw payload as HTML, says the same)."""
    for body in PAYLOADS:
        out = str(markdown.render(body, "page/a", "team",
                                  lambda names: {n: "page/a" for n in names}))
        assert not unsafe(out), (body, out, unsafe(out))
        assert not unsafe(markdown._CLEANER.clean(body)), body
    assert sorted(unsafe('<a href="javascript:x" onclick="y">')) == ["a[href=javascript:x]",
                                                                   "a[onclick]"]
    # the sanitizer stops what a renderer that let raw HTML through (a configuration
    # slip) would emit: the same payloads through markdown-it with html on
    from markdown_it import MarkdownIt

    loose = MarkdownIt("commonmark", {"html": True})
    assert unsafe(loose.render(XSS))  # what the sanitizer is there for
    for body in PAYLOADS:
        assert not unsafe(markdown._CLEANER.clean(loose.render(body))), body


def test_renderer_headings_links_and_wikilinks() -> None:
    body = ("# Deploy\n\nSee [the docs](https://example.com/d), [[rollback]], "
            "[[page/gone|gone]] and [skill](../skill/ship.md).\n")
    out = str(markdown.render(body, "page/deploy", "team",
                              lambda names: {n: "page/rollback" for n in names
                                             if n == "rollback"}))
    assert "<h2>Deploy</h2>" in out  # one level down: the page's title is the h1
    assert '<a href="https://example.com/d" rel="noopener nofollow ugc">the docs</a>' in out
    assert ('<a class="wikilink" href="/console/spaces/team/entry?id=page/rollback" '
            'rel="noopener nofollow ugc">rollback</a>') in out
    assert '<span class="wikilink-missing">gone</span>' in out
    assert 'href="/console/spaces/team/entry?id=skill/ship"' in out


def _text(page: str) -> str:
    """What a reader sees, one space between words."""
    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", "", page)).split())


@pytest.fixture
def team(hub_app: dict[str, Any]) -> dict[str, Any]:
    t = members(hub_app)
    ed, space = t["ed"], t["space"]
    a = put("page/deploy", "# Steps\n\nFirst read [[rollback]], [[old]] and the "
            "[runbook](https://example.com/runbook).\n", title="How we deploy")
    b = put("page/old", "Old.\n", title="Old")
    assert ed.publish(space, [a, b, put("page/rollback", "Roll back.\n")]).status_code == 201
    evil = put(EVIL_ID, XSS + "\n\n[[page/deploy]]\n", title=XSS, tags=[XSS_TAG],
               meta={"k": XSS})
    assert ed.publish(space, [evil]).status_code == 201
    a2 = put("page/deploy", a.entry.body + "Then press the button.\n", base=a.entry.version,
             title="How we deploy")
    assert t["owner"].publish(space, [a2]).status_code == 201
    assert ed.publish(space, [delete("page/old", b.entry.version)]).status_code == 201
    return dict(t, a=a, a2=a2)


def test_entry_renders_markdown_with_resolved_links(hub_app: dict[str, Any],
                                                    team: dict[str, Any]) -> None:
    b = sign_in(hub_app, team["viewer"])
    r = b.get("/console/spaces/team/entry", params={"id": "page/deploy", "seq": "1"})
    assert r.status_code == 200, r.text
    assert "<h2>Steps</h2>" in r.text
    assert 'href="/console/spaces/team/entry?id=page/rollback"' in r.text
    assert 'href="https://example.com/runbook" rel="noopener nofollow ugc"' in r.text
    # links go to the pages as they are now: page/old was deleted since
    assert '<span class="wikilink-missing">old</span>' in r.text
    r = b.get("/console/spaces/team/entry", params={"id": "page/deploy", "source": "1"})
    assert '<pre class="body"># Steps' in r.text and "<h2>Steps" not in r.text


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # templates: no SQL of note
def test_hostile_title_body_tag_and_meta_are_text(hub_app: dict[str, Any],
                                                  team: dict[str, Any]) -> None:
    b = sign_in(hub_app, team["viewer"])
    for path, params in (("/console/spaces/team/entry", {"id": EVIL_ID}),
                         ("/console/spaces/team", {}),
                         ("/console/spaces/team/search", {"q": "alert"}),
                         ("/console/spaces/team/activity", {})):
        r = b.get(path, params=params)
        assert r.status_code == 200, r.text
        assert not page_unsafe(r.text), (path, page_unsafe(r.text))
        if "'" in EVIL_ID:  # the id's quote is escaped: text, not an attribute's end
            assert "x&#39; autofocus onfocus=&#39;alert(1)&#39;" in r.text, path
    r = b.get("/console/spaces/team/entry", params={"id": EVIL_ID})
    assert str(escape(XSS)) in r.text  # the title, as text
    assert str(escape(XSS_TAG)) in r.text
    assert "report-uri /console/csp-report" in r.headers["content-security-policy"]


def test_activity_names_who_changed_what(hub_app: dict[str, Any], team: dict[str, Any]
                                         ) -> None:
    b = sign_in(hub_app, team["viewer"])
    r = b.get("/console/spaces/team")
    assert 'href="/console/spaces/team/activity"' in r.text
    r = b.get("/console/spaces/team/activity")
    assert r.status_code == 200, r.text
    joined = _text(r.text)
    assert "deleted page/old" in joined
    assert "edited page/deploy (+1 −0 lines)" in joined
    assert "created page/rollback (1 line)" in joined
    assert "editor-laptop" in joined and "owner-laptop" in joined  # devices, by name
    assert joined.index("deleted page/old") < joined.index("created page/rollback")
    assert " UTC" in joined and "seq" not in joined
    # paged: one change a page here, the next link walks back
    r = b.get("/console/spaces/team/activity", params={"before": "2"})
    assert "created page/deploy" in _text(r.text) and EVIL_ID not in _text(r.text)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # templates: no SQL of note
def test_a_rename_is_one_change_in_the_activity_and_the_history(
        hub_app: dict[str, Any], team: dict[str, Any]) -> None:
    """A rename (docs/protocol.md "Renames") reads as one: ``renamed OLD to NEW`` in the
    activity (its delete not listed apart), and the new page's history goes on into the
    old name's, each version linking to the name it had."""
    from dataclasses import replace

    ed, space = team["ed"], team["space"]
    old = put("page/rollback", "Roll back.\n")
    new = replace(put("Runbooks/rollback", "Roll back.\n", title="page/rollback"),
                  moved_from="page/rollback")
    assert ed.publish(space, [delete("page/rollback", old.entry.version), new]
                      ).status_code == 201
    b = sign_in(hub_app, team["viewer"])
    joined = _text(b.get("/console/spaces/team/activity").text)
    assert "renamed page/rollback to Runbooks/rollback" in joined, joined
    assert "deleted page/rollback" not in joined
    r = b.get("/console/spaces/team/entry", params={"id": "Runbooks/rollback"})
    assert "(renamed from page/rollback)" in _text(r.text)
    assert "(as page/rollback)" in _text(r.text)
    assert 'entry?id=page/rollback&amp;seq=1"' in r.text  # the old version, by its name


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # templates: no SQL of note
def test_csp_report_counted_and_logged(hub_app: dict[str, Any],
                                       caplog: pytest.LogCaptureFixture) -> None:
    """Anyone may post a report (browsers send no token): counted by directive, logged,
    bounded; a body too large is refused and counts nothing."""
    from starlette.testclient import TestClient

    hub = hub_app["hub"]
    c = TestClient(hub_app["app"], base_url=hub_app["settings"].url.rstrip("/"))

    def count(d: str) -> float:
        v = hub.metrics.registry.get_sample_value("quire_console_csp_reports_total",
                                                  {"directive": d})
        return v or 0.0

    r = c.post("/console/csp-report", content=b'{"csp-report": {"effective-directive": '
               b'"script-src-elem", "blocked-uri": "inline", "document-uri": "x"}}',
               headers={"content-type": "application/csp-report"})
    assert r.status_code == 204 and count("script-src-elem") == 1
    r = c.post("/console/csp-report", json=[{"type": "csp-violation", "body": {
        "effectiveDirective": "made-up-" + "x" * 500, "blockedURL": "y"}}],
        headers={"content-type": "application/reports+json"})
    assert r.status_code == 204 and count("other") == 1
    assert any(getattr(rec, "quire", {}).get("directive") == "script-src-elem"
               for rec in caplog.records)
    r = c.post("/console/csp-report", content=b"[" + b" " * 70_000 + b"]")
    assert r.status_code == 413
    r = c.post("/console/csp-report", content=b"not json")
    assert r.status_code == 204 and count("other") == 1


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # templates: no SQL of note
def test_banner_after_an_action_is_fixed_text(hub_app: dict[str, Any],
                                              team: dict[str, Any]) -> None:
    b = sign_in(hub_app, team["owner"])
    r = b.get("/console/spaces/team/members")
    r = b.post("/console/spaces/team/rules", headers=_origin(hub_app), data={
        "csrf": _csrf(r.text), "effect": "deny", "who": "viewer", "actions": "create",
        "entries": "note/**", "confirm": "yes"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].endswith("?done=rule_added")
    r = b.get(r.headers["location"])
    assert '<p class="banner" role="status">Rule added.</p>' in r.text
    r = b.get("/console/spaces/team", params={"done": "<b>Your device was revoked</b>"})
    assert "banner" not in r.text and "revoked" not in r.text  # no text from the link


def _restorable(hub_app: dict[str, Any]) -> None:
    from hub.page_restore import publisher_for

    if publisher_for(hub_app["hub"]) is None:
        pytest.skip("no hub-attested publication on this hub (hub/attested_publish.py)")


RESTORE = "/console/spaces/team/restore"


def test_restore_one_page_as_the_members_edit(hub_app: dict[str, Any],
                                             team: dict[str, Any]) -> None:
    """Preview writes nothing; the confirmation publishes the old content as the editor's
    edit through the guard; a stale confirmation, a viewer's and a forged one change
    nothing; a deleted page comes back."""
    _restorable(hub_app)
    owner, space = team["owner"], team["space"]

    def head() -> int:
        return int(owner.head(space)["seq"])

    b = sign_in(hub_app, team["ed"])
    r = b.get("/console/spaces/team/entry", params={"id": "page/deploy"})
    assert r.text.count('action="/console/spaces/team/restore"') == 1  # not the current one
    csrf, before = _csrf(r.text), head()
    form = {"csrf": csrf, "id": "page/deploy", "seq": "1", "epoch": ""}
    r = b.post(RESTORE, data=form, headers=_origin(hub_app))
    assert r.status_code == 200 and "Confirm restore" in r.text, r.text
    assert "-Then press the button." in htmllib.unescape(r.text)
    assert head() == before  # a preview
    base = re.search(r'name="base" value="([0-9a-f]{64})"', r.text)
    assert base, r.text
    confirm = dict(form, base=base.group(1), confirm="yes")
    r = b.post(RESTORE, data={**confirm, "csrf": "0" * 64}, headers=_origin(hub_app))
    assert r.status_code == 403 and head() == before  # no CSRF token: nothing

    # someone edits the page after the preview: the confirmation writes nothing
    a2, space = team["a2"], team["space"]
    a3 = put("page/deploy", a2.entry.body + "And wait.\n", base=a2.entry.version,
             title="How we deploy")
    assert owner.publish(space, [a3]).status_code == 201
    before = head()
    r = b.post(RESTORE, data=confirm, headers=_origin(hub_app))
    assert r.status_code == 409 and "base_mismatch" in r.text and head() == before

    # previewed again, then confirmed: the editor's edit, through the guard
    r = b.post(RESTORE, data=form, headers=_origin(hub_app))
    base = re.search(r'name="base" value="([0-9a-f]{64})"', r.text)
    assert base and base.group(1) == a3.entry.version, r.text
    confirm = dict(form, base=base.group(1), confirm="yes")
    r = b.post(RESTORE, data=confirm, headers=_origin(hub_app), follow_redirects=False)
    assert r.status_code == 303, r.text
    assert r.headers["location"].endswith("entry?id=page/deploy&done=restored")
    assert head() == before + 1
    got = owner.get(f"/v1/spaces/{space}/entry", params={"id": "page/deploy"}).json()
    assert got["entry"]["body"] == team["a"].entry.body
    hist = owner.get(f"/v1/spaces/{space}/history", params={"id": "page/deploy"}).json()
    assert hist["versions"][0]["author"]["user"] == team["ed"].user_id  # the editor's edit
    assert not hist["versions"][0]["author"]["agent"]
    r = b.get(r.headers["location"])
    assert "Restored" in r.text and 'class="banner"' in r.text
    assert "restored page/deploy" in _text(b.get("/console/spaces/team/activity").text)
    r = b.post(RESTORE, data=form, headers=_origin(hub_app))  # nothing left to restore
    assert r.status_code == 422 and "already at that version" in r.text
    before = head()

    # a viewer sees no button, and its POST (preview or confirmed) is refused
    v = sign_in(hub_app, team["viewer"])
    page_ = v.get("/console/spaces/team/entry", params={"id": "page/deploy"}).text
    assert "/restore" not in page_
    for extra in ({}, {"confirm": "yes", "base": base.group(1)}):
        r = v.post(RESTORE, data={**form, **extra, "csrf": _csrf(page_)},
                   headers=_origin(hub_app))
        assert r.status_code == 403 and head() == before, r.text

    # a deleted page comes back from its history
    r = b.post(RESTORE, data={**form, "id": "page/old", "confirm": "yes", "base": ""},
               headers=_origin(hub_app), follow_redirects=False)
    assert r.status_code == 303, r.text
    got = owner.get(f"/v1/spaces/{space}/entry", params={"id": "page/old"}).json()
    assert got["entry"]["body"] == "Old.\n"


def test_a_wiki_link_goes_where_the_replica_would_send_it(hub_app: dict[str, Any],
                                                          team: dict[str, Any]) -> None:
    """Two pages end with the name: the console picks as shared/links.py does for the
    replica (the shortest path), not the first id."""
    from shared import links

    ids = ["Archive/Old/Runbook", "Ops/Runbook", "Meetings/Plan"]
    plan = put("Meetings/Plan", "See [[runbook]].\n")
    assert team["ed"].publish(team["space"], [put("Archive/Old/Runbook", "old\n"),
                                              put("Ops/Runbook", "new\n"), plan]
                              ).status_code == 201
    want = links.resolve_wikilink("Meetings/Plan", "runbook", links.Names(ids))
    assert want == "Ops/Runbook"
    r = sign_in(hub_app, team["viewer"]).get("/console/spaces/team/entry",
                                             params={"id": "Meetings/Plan"})
    assert f'href="/console/spaces/team/entry?id={want}"' in r.text, r.text
