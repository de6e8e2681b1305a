"""OpenID Connect sign-in in a real browser: Debian's Chromium driven by Playwright, a real
``quire hub serve`` process configured as docs/operations.md ("Configuring an OIDC
provider") says (``hub.toml``, a client secret file, ``quire hub email``), and the test
provider (tests/hub/console/oidc_provider.py) on loopback. The admin clicks the provider's button,
the browser goes through the provider and back, and lands on the spaces page.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hub.console.oidc_provider import Provider, User
from tests.hub.console.test_console_browser import (
    CHROMIUM,
    _browser_available,
    axe_violations,
    shot,
)
from tests.kit.host import REPO, free_port
from tests.kit.hubproc import hub_cmd, init_hub, serve_hub
from tests.kit.wire import redeem

pytestmark = pytest.mark.e2e


def _documented_settings() -> dict[str, object]:
    """The hub.toml of docs/operations.md, "Configuring an OIDC provider"."""
    text = (REPO / "docs" / "operations.md").read_text()
    section = text.split("## Configuring an OIDC provider", 1)[1]
    return tomllib.loads(re.search(r"```toml\n(.*?)```", section, re.S).group(1))  # type: ignore


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    _browser_available()
    import httpx2

    data = Path(tmp_path_factory.mktemp("oidc-hub"))
    port = free_port()
    provider = Provider("quire-console", "browser-test-client-secret").start()
    secret = data / "oidc-client-secret"
    secret.write_text(provider.client.client_secret + "\n")
    secret.chmod(0o600)
    code = init_hub(data)
    # the settings docs/operations.md shows, with this test's provider (added to what
    # init wrote there, if anything)
    ours = {"oidc_issuer": provider.issuer, "oidc_client_id": "quire-console",
            "oidc_client_secret_file": str(secret), "oidc_name": "Test IdP"}
    assert set(ours) == set(_documented_settings())
    with open(data / "hub.toml", "a") as toml:
        toml.write("".join(f"{k} = {json.dumps(v)}\n" for k, v in ours.items()))
    proc = serve_hub(data, port=port)
    provider.client.redirect_uris = [proc.url + "/console/signin/oidc/callback"]
    client = httpx2.Client(base_url=proc.url, timeout=30)
    try:
        owner = redeem(client, code, "owner-laptop")
        owner.create_space("team")
        out = subprocess.run(hub_cmd("email", "--data", str(data), owner.user_id,
                                         "ada@example.com"),
                             capture_output=True, text=True, cwd=REPO, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "client-secret" not in (proc.log.read_text() if proc.log.exists() else "")
        yield {"url": proc.url, "provider": provider, "proc": proc}
    finally:
        client.close()
        proc.stop()
        provider.stop()


def test_an_admin_signs_in_through_the_provider(setup: dict[str, Any]) -> None:
    from playwright.sync_api import sync_playwright

    setup["provider"].user = User("ada-sub", "ada@example.com")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_context(bypass_csp=True).new_page()
            page.goto(setup["url"] + "/console/")
            assert page.url.endswith("/console/signin")
            shot(page, "signin-oidc")
            assert not axe_violations(page)
            page.get_by_role("link", name="Sign in with Test IdP").click()
            page.wait_for_url("**/console/spaces")
            assert page.get_by_role("link", name="team").is_visible()
            shot(page, "spaces-oidc")

            # an email the operator never set: the refusal page, still signed out
            setup["provider"].user = User("eve-sub", "eve@example.com")
            other = browser.new_context(bypass_csp=True).new_page()
            other.goto(setup["url"] + "/console/signin")
            other.get_by_role("link", name="Sign in with Test IdP").click()
            other.wait_for_url("**/console/signin/oidc/callback**")
            assert "no member of this hub signs in as eve@example.com" in other.content()
            shot(other, "signin-oidc-refused")
            other.goto(setup["url"] + "/console/spaces")
            assert other.url.endswith("/console/signin")
        finally:
            browser.close()
    log = setup["proc"].log.read_text()
    assert "browser-test-client-secret" not in log and "oidc_signin_refused" in log
