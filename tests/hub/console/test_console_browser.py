"""The console in a real browser: Debian's Chromium driven by Playwright against a real hub
process, with the real CLI on the members' side.

An admin signs in by device approval, invites a member (who joins with `quire join` and the
code the console showed), adds a rule, and revokes the member's device: the member's replica
then reports it cannot sync. The member signs in too (approved from their own CLI with
`quire devices approve`, as docs/console.md says), searches, reads a page and its diff.
Screenshots of the main pages go to tests/hub/console/screenshots/ (artifacts, not assertions);
axe-core checks the main pages for accessibility violations, at desktop and phone width.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.host import REPO, free_port
from tests.kit.hubproc import init_hub, serve_hub
from tests.kit.wire import redeem

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
    assert "Deploy with the green button." in member.locator("pre.body").inner_text()
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
