"""Headers every answer carries, on the real hub app (in-process): ``nosniff`` on every
answer (API, streams, errors, console pages and files), and the API's page at /v1/docs under
a strict Content-Security-Policy (no script at all, no framing)."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator

import pytest

from tests.kit.wire import WireTeam, make_wire_team


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireTeam]:
    yield from make_wire_team(tmp_path_factory.mktemp("hub") / "data", None)


def test_every_answer_says_nosniff(team: WireTeam) -> None:
    s = team.space
    answers = {
        "liveness": team.raw.get("/healthz"),
        "json": team.owner.get(f"/v1/spaces/{s}/head"),
        "ndjson stream": team.owner.get(f"/v1/spaces/{s}/snapshot"),
        "unauthenticated": team.raw.get(f"/v1/spaces/{s}/head"),
        "no route": team.raw.get("/v1/nowhere"),
        "wrong method": team.raw.delete("/v1/hub"),
        "bad body": team.owner.post("/v1/spaces", {"name": 5}),
        "openapi": team.raw.get("/v1/openapi.json"),
        "docs page": team.raw.get("/v1/docs"),
        "console page": team.raw.get("/console/signin"),
        "console redirect": team.raw.get("/console/spaces", follow_redirects=False),
        "console file": team.raw.get("/console/static/console.css"),
    }
    missing = {what: r.status_code for what, r in answers.items()
               if r.headers.get("x-content-type-options") != "nosniff"}
    assert not missing, missing
    assert all(len(r.headers.get_list("x-content-type-options")) == 1
               for r in answers.values())


def test_the_docs_page_runs_no_script_and_cannot_be_framed(team: WireTeam) -> None:
    r = team.raw.get("/v1/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert "script-src" not in directives and "unsafe-inline" not in csp
    assert "<script" not in r.text.lower()
    assert not re.search(r"<[^>]+\son\w+=", r.text)  # no event handler attributes
    # the one style block is allowed by its hash, and renders
    style = r.text[r.text.index("<style>") + 7:r.text.index("</style>")]
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert directives["style-src"] == f"'sha256-{digest}'"
    # every operation is on the page, rendered by the hub (escaped)
    doc = team.raw.get("/v1/openapi.json").json()
    assert r.text.count("<details>") == sum(len(v) for v in doc["paths"].values())
    assert "/v1/spaces/{space}/head" in r.text
