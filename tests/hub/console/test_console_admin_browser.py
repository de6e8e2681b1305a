"""The console's administration pages in a real browser (Debian's Chromium, Playwright)
against a real hub process: an admin changes a member's role after its preview, revokes an
invite after its preview, looks at the effective rules with a "what may this agent change"
preview, previews an epoch bump, reads the verified audit log and the open conflicts a
replica reported, and allows a screening finding after its preview; the replicas and agents
page at a phone's width. axe-core checks each new page; the screenshots go to
tests/hub/console/screenshots/ (copied to docs/img/console/ for docs/console.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.humanize import stamp
from tests.hub.console.test_console_browser import (
    _browser_available,
    axe_violations,
    shot,
    sign_in,
)
from tests.hub.console.test_console_browser import browser as browser  # noqa: F401 (fixture)
from tests.kit.host import free_port
from tests.kit.hubproc import init_hub, serve_hub
from tests.kit.wire import put, redeem

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    _browser_available()
    import httpx2

    data = Path(tmp_path_factory.mktemp("console-admin-hub"))
    code = init_hub(data)
    proc = serve_hub(data, port=free_port())
    client = httpx2.Client(base_url=proc.url, timeout=30)
    try:
        owner = redeem(client, code, "owner")
        space = owner.create_space("team")
        ana = redeem(client, owner.invite(space, "viewer"), "ana")
        ben = redeem(client, owner.invite(space, "editor"), "ben")
        assert ben.publish(space, [put("page/deploy", "Deploy with the blue button.\n")]
                           ).status_code == 201
        r = ben.post("/v1/delegations", {"agent": "claude-code", "scope": "write",
                                         "space": space})
        assert r.status_code in (200, 201), r.text
        r = owner.post(f"/v1/spaces/{space}/rules", {"effect": "deny", "who": "agents",
                                                     "actions": ["create"],
                                                     "entries": "skill/*"})
        assert r.status_code in (200, 201), r.text
        owner.invite(space, "editor")  # an open invite to revoke
        yield {"url": proc.url, "owner": owner, "space": space, "ana": ana, "ben": ben}
    finally:
        client.close()
        proc.stop()


def shows(page: Any, where: str, *texts: str) -> None:
    """Wait until ``where`` on ``page`` holds every text: a click that submits or follows a
    link returns before the next page is there, and reading it at once may read nothing
    or the page before."""
    from playwright.sync_api import expect

    for text in texts:
        expect(page.locator(where).first).to_contain_text(text, timeout=60_000)


def ben_replica(hub: dict[str, Any]) -> str:
    return str(hub["ben"].replica(hub["space"]))


def test_an_admin_changes_a_role_and_revokes_an_invite(hub: dict[str, Any],
                                                       browser: Any) -> None:
    owner, url = hub["owner"], hub["url"]

    def owner_approves(code: str) -> None:
        r = owner.post("/v1/device/approve", {"user_code": code})
        assert r.status_code == 200, r.text

    admin = sign_in(browser, hub, owner_approves, "admin-console", bypass_csp=True)
    admin.goto(url + "/console/spaces/team/members")

    # ana (viewer) becomes an editor: first the preview, which changes nothing
    admin.get_by_label("New role for ana").select_option("editor")
    admin.get_by_role("button", name="Preview role change for ana").click()
    shows(admin, "main", "They would gain", "publish changes")
    roles = {m["name"]: m["role"] for m in owner.get(
        f"/v1/spaces/{hub['space']}/members").json()["members"]}
    assert roles["ana"] == "viewer"
    shot(admin, "role-preview")
    assert not axe_violations(admin)
    admin.get_by_role("button", name="Confirm role change").click()
    admin.wait_for_url(lambda u: u.endswith("/console/spaces/team/members?done=role_changed"))
    assert admin.get_by_role("status").inner_text() == "Role changed."  # the banner
    roles = {m["name"]: m["role"] for m in owner.get(
        f"/v1/spaces/{hub['space']}/members").json()["members"]}
    assert roles["ana"] == "editor"

    # revoke the open invite, after its preview
    invites = owner.get(f"/v1/spaces/{hub['space']}/invites").json()["invites"]
    open_id, made = next((i["id"], stamp(i["created_at"], seconds=True, utc=True))
                         for i in invites if not i["used_at"] and not i["revoked_at"])
    admin.get_by_role("button", name=f"Revoke the editor invite made {made}").click()
    shows(admin, "main", "Preview:")
    admin.get_by_role("button", name="Confirm revoke").click()
    admin.wait_for_url(lambda u: u.endswith("/console/spaces/team/members?done=invite_revoked"))
    invites = owner.get(f"/v1/spaces/{hub['space']}/invites").json()["invites"]
    assert next(i for i in invites if i["id"] == open_id)["revoked_at"]
    assert "revoked" in admin.locator("main").inner_text()

    # effective rules, and what ben's agent may change
    admin.get_by_role("link", name="Effective rules", exact=True).click()
    admin.get_by_label("Member").select_option(label="ben (editor)")
    admin.get_by_label("Acting through an agent (optional)").fill("claude-code")
    admin.get_by_label("Entry").fill("skill/release")
    admin.get_by_role("button", name="Preview").click()
    verdicts = admin.locator("table.verdicts").inner_text()
    assert re.search(r"create\s+denied", verdicts) and re.search(r"update\s+allowed", verdicts)
    shot(admin, "rules")
    assert not axe_violations(admin)

    # an epoch bump's impact preview (not confirmed: nothing changes)
    epoch = owner.head(hub["space"])["epoch"]
    admin.get_by_role("link", name="Epoch", exact=True).click()
    admin.get_by_label("Reason (recorded in the audit and shown to replicas)").fill(
        "restored from the backup of 2026-11-30")
    admin.get_by_role("button", name="Preview impact").click()
    shows(admin, "main", "Replicas that must take a snapshot")
    shot(admin, "epoch-preview")
    assert not axe_violations(admin)
    assert owner.head(hub["space"])["epoch"] == epoch

    # the audit log: verified, with the role change and the revoke in it
    admin.get_by_role("link", name="Audit", exact=True).click()
    shows(admin, "main", "Chain verified")
    text = admin.locator("main").inner_text()
    assert "Chain verified" in text and "member.role" in text and "invite.revoke" in text
    shot(admin, "audit")
    assert not axe_violations(admin)

    # open conflicts a replica reported (ben's, as his replica's sync would), read-only
    rep = ben_replica(hub)
    r = hub["ben"].client.put(
        f"/v1/spaces/{hub['space']}/replicas/{rep}/conflicts", headers=hub["ben"].auth,
        json={"conflicts": [{"id": "pk-0123456789abcdef0123", "entry": "page/deploy",
                             "kind": "edit", "since": 1_764_590_000_000, "claimed": True}]})
    assert r.status_code == 200, r.text
    admin.get_by_role("link", name="Conflicts", exact=True).click()
    shows(admin, "main tbody", "page/deploy")
    rows = admin.locator("main tbody").inner_text()
    assert "page/deploy" in rows and "ben" in rows
    shot(admin, "conflicts")
    assert not axe_violations(admin)

    # a screening allow: previewed (nothing written), then confirmed
    admin.get_by_role("link", name="Screening", exact=True).click()
    admin.get_by_label("Entry").fill("page/deploy")
    admin.get_by_label("Version (64 hex digits)").fill("ab" * 32)
    admin.get_by_label("Rule name or finding fingerprint (empty: every finding)").fill(
        "aws_access_key")
    admin.get_by_role("button", name="Preview").click()
    shows(admin, "main", "Preview:")
    shot(admin, "screening-preview")
    assert not axe_violations(admin)
    allows = f"/v1/spaces/{hub['space']}/screening/allows"
    assert owner.get(allows).json()["allows"] == []
    admin.get_by_role("button", name="Confirm allow").click()
    admin.wait_for_url(lambda u: u.endswith("/console/spaces/team/screening?done=allowed"))
    assert "aws_access_key" in admin.locator("main tbody").inner_text()
    assert len(owner.get(allows).json()["allows"]) == 1

    # replicas and agents, at a phone's width
    admin.set_viewport_size({"width": 390, "height": 844})
    admin.get_by_role("link", name="Replicas and agents").click()
    assert "claude-code" in admin.locator("main").inner_text()
    shot(admin, "access-phone")
    assert not axe_violations(admin)
