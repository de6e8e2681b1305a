"""The OpenAPI document: every operation described, bodies from the hub's own schemas, a
human page shipped with the package (no CDN)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from hub.api.openapi import OPS
from shared.schemas import REQUESTS
from tests.kit.wire import WireTeam, make_wire_team, put


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireTeam]:
    yield from make_wire_team(tmp_path_factory.mktemp("hub") / "data", None)


def test_every_operation_has_summary_schemas_and_errors(team: WireTeam) -> None:
    doc = team.raw.get("/v1/openapi.json").json()
    assert doc["openapi"] == "3.1.0"
    routes = {(m, r.path) for r in team.app.routes if hasattr(r, "methods")
              for m in (r.methods or ()) if m not in ("HEAD", "OPTIONS")}  # OPTIONS: the
    # CORS preflight the MCP SDK answers for its discovery documents
    assert routes == set(OPS), routes ^ set(OPS)
    ops: list[tuple[str, str, dict[str, Any]]] = [
        (m, p, op) for p, item in doc["paths"].items() for m, op in item.items()]
    assert len(ops) == len(OPS) >= 45
    for m, p, op in ops:
        assert op["summary"] and op["description"], (m, p)
        assert any(s.startswith("2") for s in op["responses"]), (m, p)
        for status in ("401", "404", "422", "429"):
            ref = op["responses"][status]["content"]["application/json"]["schema"]["$ref"]
            assert ref == "#/components/schemas/Error", (m, p)
        if m == "post" and OPS[(m.upper(), p)].request is None:
            raise AssertionError(f"POST {p} has no request schema")
    schemas = doc["components"]["schemas"]
    for name, schema in REQUESTS.items():
        assert schemas[f"req_{name}"] == schema


def test_bodies_accept_exactly_the_schema_fields(team: WireTeam) -> None:
    """A field the schema does not list is refused by the handler (one source of truth)."""
    r = team.owner.post("/v1/spaces", {"name": "x1", "colour": "red"})
    assert r.status_code == 422 and "colour" in r.text
    assert set(REQUESTS["space_create"]["properties"]) == {"name"}


def test_docs_page_is_shipped_and_loads_nothing_from_elsewhere(team: WireTeam) -> None:
    r = team.raw.get("/v1/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "openapi.json" in r.text
    assert not re.search(r"(src|href)=\"(https?:)?//", r.text)  # no CDN
    assert "default-src 'none'" in r.headers["content-security-policy"]  # no script at all
    assert "<script" not in r.text


@pytest.fixture
def team_db(tmp_path: Any, db_url: str | None) -> Iterator[WireTeam]:
    yield from make_wire_team(tmp_path / "data", db_url)


def test_nul_in_query_path_or_body_is_invalid_request(team_db: WireTeam) -> None:
    """Found by the fuzz test: ``GET /v1/audit?space=%00`` was a 500 on PostgreSQL (text
    cannot hold NUL); the same for NUL in names and other text fields of small bodies."""
    t = team_db
    for path in ("/v1/audit?space=%00", f"/v1/spaces/{t.space}%00/head",
                 "/v1/spaces/a%00b/usage", f"/v1/spaces/{t.space}/entries?prefix=%00"):
        r = t.owner.get(path)
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", \
            (path, r.text)
    for path, body in ((f"/v1/spaces/{t.space}/epoch", {"reason": "a\x00b"}),
                       ("/v1/spaces", {"name": "x\x00"}),
                       (f"/v1/spaces/{t.space}/replicas", {"name": "r\x00"}),
                       ("/v1/delegations", {"space": t.space, "agent": "b\x00t"})):
        r = t.owner.post(path, body)
        assert r.status_code == 422, (path, r.text)
    # batches are judged by the entry rules (stored as escaped canonical JSON): a 4xx
    assert t.editor.publish(t.space, [put("page/nul", "a\x00b")]).status_code == 422
