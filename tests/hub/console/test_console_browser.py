"""The console in a real browser: Debian's Chromium driven by Playwright against a real hub
process, with the real CLI on the members' side.

An admin signs in by device approval, invites a member (who joins with `quire join` and the
code the console showed), adds a rule, and revokes the member's device: the member's replica
then reports it cannot sync. The member signs in too (approved from their own CLI with
`quire devices approve`, as docs/console.md says), searches, reads a page and its diff.
Screenshots of the main pages go to tests/hub/console/screenshots/ (artifacts, not assertions);
axe-core checks the main pages for accessibility violations, at desktop and phone width.

The team browser (``test_a_team_browses_and_restores``, a space of its own in the same hub
and browser): a page rendered from Markdown with a heading and links; hostile content in a
title, body, tag and meta shown as text, with no dialog, no script run and no CSP report
(counted by the hub, ``quire_console_csp_reports_total``, read from its metrics listener;
the pages under attack are read in a context that keeps the CSP, axe runs in another with
``bypass_csp``, and a deliberate violation at the end shows the count does move); the
activity feed with names; axe with no violation at all; a page restored from its history.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.host import REPO, free_port
from tests.kit.hubproc import init_hub, serve_hub
from tests.kit.wire import put, redeem

pytestmark = pytest.mark.e2e

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = Path(__file__).parent / "screenshots"


def _browser_available() -> None:
    try:
        import playwright  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("playwright is not installed (make setup installs the dev extras)")
        pytest.skip("playwright is not installed")
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is not installed (.ci/run installs it)")
        pytest.skip("chromium is not installed (apt-get install chromium)")


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    _browser_available()
    import httpx2

    data = Path(tmp_path_factory.mktemp("console-hub"))
    port = free_port()
    code = init_hub(data)
    proc = serve_hub(data, port=port)
    client = httpx2.Client(base_url=proc.url, timeout=30)
    try:
        owner = redeem(client, code, "owner-laptop")
        space = owner.create_space("team")
        yield {"url": proc.url, "owner": owner, "space": space, "client": client,
               "metrics": proc.metrics_url,
               "root": Path(tmp_path_factory.mktemp("homes"))}
    finally:
        client.close()
        proc.stop()


@pytest.fixture(scope="module")
def browser(hub: dict[str, Any]) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                               args=["--no-sandbox", "--disable-gpu"])
        try:
            yield b
        finally:
            b.close()


def quire(home: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QUIRE_HOME": str(home), "NO_COLOR": "1"}
    out = subprocess.run([sys.executable, "-m", "replica.cli.main", *args], capture_output=True,
                         text=True, env=env, cwd=REPO, timeout=120)
    if check and out.returncode != 0:
        raise AssertionError(f"quire {' '.join(args)} -> {out.returncode}\n{out.stdout}\n"
                             f"{out.stderr}")
    return out


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def sign_in(browser: Any, hub: dict[str, Any], approve: Any, name: str,
            **context: Any) -> Any:
    """A new browser context signs in; ``approve(user_code)`` approves it elsewhere."""
    ctx = browser.new_context(**context)
    page = ctx.new_page()
    page.goto(hub["url"] + "/console/")
    assert page.url.endswith("/console/signin")
    shot(page, f"{name}-signin")
    page.get_by_role("button", name="Sign in with a signed-in device").click()
    code = re.search(r"quire devices approve ([A-Z0-9-]+)",
                     page.locator("pre.command").inner_text())
    assert code, page.content()
    shot(page, f"{name}-approve")
    approve(code.group(1))
    page.get_by_role("link", name="Check now").click()
    page.wait_for_url("**/console/spaces")
    return page


def axe_violations(page: Any) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [f"{v['id']}: {v['help']} ({len(v['nodes'])})"
            for v in results.response["violations"] if v["impact"] in ("serious", "critical")]


def test_admin_and_member_work_through_the_console(hub: dict[str, Any], browser: Any) -> None:
    owner, url = hub["owner"], hub["url"]

    def owner_approves(code: str) -> None:
        r = owner.post("/v1/device/approve", {"user_code": code})
        assert r.status_code == 200, r.text

    admin = sign_in(browser, hub, owner_approves, "admin", bypass_csp=True)
    shot(admin, "spaces")
    assert not axe_violations(admin)

    # invite a member; the code is shown once, and the member joins with the real CLI
    admin.get_by_role("link", name="team").click()
    admin.get_by_role("link", name="Members, invites and rules").click()
    admin.get_by_label("New invite as").select_option("editor")
    admin.get_by_role("button", name="Create invite").click()
    admin.get_by_role("button", name="Confirm create invite").click()  # after its preview
    code = admin.locator("#invite-code").inner_text().strip()
    assert code.startswith("qi_")
    home, vault = hub["root"] / "member", hub["root"] / "member-vault"
    quire(home, "join", url, "--invite", code, "--vault", str(vault), "--device",
          "member-laptop", "--json")
    (vault / "page").mkdir(parents=True, exist_ok=True)
    (vault / "page" / "deploy.md").write_text(
        "---\ntitle: How we deploy\n---\nDeploy with the blue button.\n")
    quire(home, "sync", "--json")
    (vault / "page" / "deploy.md").write_text(
        "---\ntitle: How we deploy\n---\nDeploy with the green button.\n")
    quire(home, "sync", "--json")

    # add a rule through the form; the effective rules show it
    admin.goto(url + "/console/spaces/team/members")
    admin.get_by_label("Effect").select_option("deny")
    admin.get_by_label("Who").fill("agents")
    admin.get_by_label("Actions").fill("create")
    admin.get_by_label("Entries").fill("skill/*")
    admin.get_by_role("button", name="Add rule").click()
    admin.get_by_role("button", name="Confirm add rule").click()
    from playwright.sync_api import expect  # the rules table of the page it leads to

    expect(admin.locator("table").nth(2)).to_contain_text("skill/*", timeout=60_000)
    shot(admin, "members")
    assert not axe_violations(admin)

    # the member signs in, approving the browser from their own CLI as docs/console.md says
    def member_approves(c: str) -> None:
        quire(home, "devices", "approve", c, "--yes", "--json")

    member = sign_in(browser, hub, member_approves, "member",
                     viewport={"width": 390, "height": 844}, bypass_csp=True)
    member.get_by_role("link", name="team").click()
    member.get_by_label("Search this space").fill("green button")
    member.get_by_role("button", name="Search").click()
    shot(member, "search-phone")
    member.get_by_role("link", name="How we deploy").click()
    assert "Deploy with the green button." in member.locator(".rendered").inner_text()
    shot(member, "entry-phone")
    assert not axe_violations(member)
    member.get_by_role("link", name="changes").first.click()
    diff = member.locator("pre.diff").inner_text()
    assert "-Deploy with the blue button." in diff and "+Deploy with the green button." in diff
    shot(member, "diff-phone")

    # the admin revokes the member's laptop: its replica can no longer sync
    admin.goto(url + "/console/devices")
    shot(admin, "devices")
    admin.get_by_role("button", name="Revoke member-laptop").click()
    admin.get_by_role("button", name="Confirm revoke").click()  # after its preview
    row = admin.locator("tr").filter(has=admin.locator("td:first-child",
                                                       has_text=re.compile("^member-laptop$")))
    assert "revoked" in row.inner_text()
    out = quire(home, "sync", "--json", check=False)
    assert out.returncode != 0
    status = json.loads(quire(home, "status", "--json", check=False).stdout or "{}")
    text = json.dumps(status) + out.stdout
    assert "device_revoked" in text or "suspended" in text, text


# ---------------------------------------------------------------- the team browser

XSS = '<script>alert("title")</script><img src=x onerror=alert(1)>'
XSS_BODY = ('<script>alert("body")</script>\n\n<img src=x onerror=alert(2)>\n\n'
            '[click](javascript:alert(3)) <svg onload=alert(4)>\n\n[[page/deploy]]\n')
XSS_TAG = "<script>alert(5)</script>"
XSS_ID = "page/x' autofocus onfocus='alert(6)'"  # an entry id takes no <, > or "
LONG = "x" * 300  # one word, longer than a phone is wide
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def crew(hub: dict[str, Any]) -> dict[str, Any]:
    """A space "crew" of people with names, in the module's hub: Ann made the pages, Olga
    changed one, Ann made a hostile one."""
    from tests.hub.console.test_console_names import _redeem

    client, owner = hub["client"], hub["owner"]
    space = owner.create_space("crew")
    olga = _redeem(client, owner.invite(space, "admin"), "Olga Owner", "olga-laptop")
    ann = _redeem(client, owner.invite(space, "editor"), "Ann Lee", "ann-laptop")
    v1 = put("page/deploy", "# Steps\n\nRead [[rollback]] and the "
             "[runbook](https://example.com/runbook) first.\n\nPress the blue "
             f"button.\n\n{LONG}\n", title="How we deploy")
    assert ann.publish(space, [v1, put("page/rollback", "Roll back.\n",
                                       title="Rollback")]).status_code == 201
    v2 = put("page/deploy", v1.entry.body.replace("blue", "green"),
             base=v1.entry.version, title="How we deploy")
    assert olga.publish(space, [v2]).status_code == 201
    evil = put("page/xss", XSS_BODY, title=XSS, tags=[XSS_TAG], meta={"note": XSS})
    named = put(XSS_ID, "A hostile name.\n", title="Named")
    assert ann.publish(space, [evil, named]).status_code == 201
    return {"olga": olga, "space": space}


def csp_reports(hub: dict[str, Any]) -> float:
    import httpx2

    text = httpx2.get(hub["metrics"], timeout=10).text
    return sum(float(m.group(1)) for m in re.finditer(
        r"^quire_console_csp_reports_total\{[^}]*\} (\S+)$", text, re.MULTILINE))


def all_axe_violations(page: Any) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [f"{v['id']} ({v['impact']}): {v['help']}: "
            f"{[n['target'] for n in v['nodes']][:3]}" for v in results.response["violations"]]


def test_a_team_browses_and_restores(hub: dict[str, Any], crew: dict[str, Any],
                                     browser: Any) -> None:
    """docs/console.md, \"Rendered pages\", \"Activity\", \"Restore a page\": rendered
    Markdown, hostile content as text with no script run and no CSP report, the activity
    feed by name, axe with no violation at all, and a page restored from its history."""
    url, olga = hub["url"], crew["olga"]

    def approve(code: str) -> None:
        assert olga.post("/v1/device/approve", {"user_code": code}).status_code == 200

    # the CSP kept: every page under attack is read here, and nothing may run
    page = sign_in(browser, hub, approve, "crew-csp")
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    # a rendered page: a heading, a link out, a wiki link to another page in the console
    page.goto(f"{url}/console/spaces/crew/entry?id=page/deploy")
    assert page.get_by_role("heading", name="Steps", level=2).is_visible()
    out = page.get_by_role("link", name="runbook")
    assert out.get_attribute("href") == "https://example.com/runbook"
    assert out.get_attribute("rel") == "noopener nofollow ugc"
    page.get_by_role("link", name="rollback", exact=True).click()
    page.wait_for_url("**/entry?id=page/rollback")
    assert page.get_by_role("heading", name="Rollback", level=1).is_visible()

    # hostile content is text, on every page that shows it
    page.goto(f"{url}/console/spaces/crew/entry?id=page/xss")
    assert page.get_by_role("heading", level=1).inner_text() == XSS
    assert XSS_TAG in page.locator(".tag").inner_text()
    body = page.locator(".rendered").inner_text()
    assert '<script>alert("body")</script>' in body and "<svg onload=alert(4)>" in body
    assert page.locator("main script, main img, main svg, main iframe").count() == 0
    click = page.get_by_text("[click](javascript:alert(3))")  # not a link: text
    assert click.count() == 1
    for path in ("/console/spaces/crew", "/console/spaces/crew/search?q=alert"):
        page.goto(url + path)
        assert page.get_by_text(XSS, exact=True).count() >= 1, path
    page.goto(url + "/console/spaces/crew")
    page.get_by_role("link", name=XSS_ID, exact=True).click()  # the name, as text
    page.wait_for_url("**/entry?id=**")
    assert page.locator("p.head code").inner_text() == XSS_ID
    page.goto(f"{url}/console/spaces/crew/entry?id=page/xss&source=1")
    assert XSS_BODY.strip() in page.locator("pre.body").inner_text()

    # the activity feed, by name, newest first
    page.goto(f"{url}/console/spaces/crew")
    page.get_by_role("link", name="What changed recently").click()
    feed = page.locator("ol.activity > li")
    first = feed.nth(0).inner_text()
    assert "Ann Lee" in first and "created page/xss" in first and "UTC" in first
    assert f"created {XSS_ID}" in first
    second = feed.nth(1).inner_text()
    assert "Olga Owner" in second and "edited page/deploy (+1 −1 lines)" in second
    assert "created page/rollback (1 line)" in feed.nth(2).inner_text()
    shot(page, "activity")

    assert dialogs == [], dialogs  # no script ran
    assert not [e for e in errors if "Content Security Policy" in e], errors
    assert csp_reports(hub) == 0  # and the browser blocked nothing

    # a deliberate violation is reported: the count above could have moved
    page.evaluate("() => { const i = document.createElement('img'); "
                  "i.src = 'https://example.com/x.png'; document.body.append(i); }")
    deadline = time.monotonic() + 30
    while csp_reports(hub) == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert csp_reports(hub) == 1

    # axe (its script needs the CSP bypassed: the same session in another context) on
    # every page touched; at a phone's width too, where no page may be wider than it
    ax = browser.new_context(storage_state=page.context.storage_state(),
                             bypass_csp=True).new_page()
    for size in ({"width": 1280, "height": 900}, PHONE):
        ax.set_viewport_size(size)
        for path, name in (("/console/spaces/crew/entry?id=page/deploy", "entry-rendered"),
                           ("/console/spaces/crew/entry?id=page/xss", "xss"),
                           ("/console/spaces/crew/activity", "activity"),
                           ("/console/spaces/crew", "entries")):
            ax.goto(url + path)
            if size != PHONE or name == "entry-rendered":
                assert not all_axe_violations(ax), (size, path, all_axe_violations(ax))
            wide = ax.evaluate("() => document.documentElement.scrollWidth")
            assert wide <= size["width"], (path, wide)  # nothing breaks the layout
            if size == PHONE:
                shot(ax, f"{name}-phone")
    ax.set_viewport_size({"width": 1280, "height": 900})

    # restore the first version of page/deploy from its history, as Olga's edit
    from hub.page_restore import publisher_for

    class _Hub:  # the serving process has the same code as this one
        pass

    if publisher_for(_Hub()) is None:
        pytest.skip("no hub-attested publication on this hub (hub/attested_publish.py)")
    ax.goto(f"{url}/console/spaces/crew/entry?id=page/deploy")
    ax.get_by_role("button", name=re.compile("^Restore the version of")).click()
    ax.get_by_text("Preview:").wait_for()
    assert "-Press the green button." in ax.locator("pre.diff").inner_text()
    shot(ax, "restore-preview")
    assert not all_axe_violations(ax), all_axe_violations(ax)
    ax.get_by_role("button", name="Confirm restore").click()
    ax.wait_for_url(lambda u: u.endswith("done=restored"))
    assert ax.get_by_role("status").inner_text().startswith("Restored")
    assert "Press the blue button." in ax.locator(".rendered").inner_text()
    assert not all_axe_violations(ax), all_axe_violations(ax)
    got = olga.get(f"/v1/spaces/{crew['space']}/entry?id=page/deploy").json()
    assert "blue" in got["entry"]["body"]
    ax.goto(f"{url}/console/spaces/crew/activity")
    assert "restored page/deploy" in ax.locator("ol.activity > li").nth(0).inner_text()
